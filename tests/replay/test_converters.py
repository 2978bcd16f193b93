"""Each input format, on small hand-written fixtures: what hooks a live agent would have
sent, in which order and at which time, and what is reported instead of crashing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tma1.clock import epoch_ms
from tma1.replay import claude_hooklog, claude_transcript, codex_rollout, eventlog
from tma1.replay.formats import CLAUDE_HOOKLOG, EVENTLOG, detect, read_records
from tma1.replay.model import FILE_CHANGE, HOOK, USAGE, Converted

CLAUDE_TRANSCRIPT = claude_transcript.FORMAT
CODEX_ROLLOUT = codex_rollout.FORMAT

FIX = Path(__file__).parent / "fixtures"


def ms(iso: str) -> int:
    ts = epoch_ms(iso)
    assert ts is not None
    return ts


def hooks(conv: Converted) -> list[tuple[int, str, str | None, str | None]]:
    """(ts, hook event, tool name, tool_use_id) in replay order."""
    items = sorted((i for i in conv.items if i.kind == HOOK), key=lambda i: (i.ts, i.seq))
    return [
        (i.ts, i.hook_event or "", i.payload.get("tool_name"), i.payload.get("tool_use_id"))
        for i in items
        if i.payload is not None
    ]


# --- detection -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("claude_transcript.jsonl", CLAUDE_TRANSCRIPT),
        ("claude_transcript_array.json", CLAUDE_TRANSCRIPT),
        ("codex_rollout.jsonl", CODEX_ROLLOUT),
        ("codex_legacy.jsonl", CODEX_ROLLOUT),
        ("hooklog_pre.json", CLAUDE_HOOKLOG),
        ("hooklog_post.json", CLAUDE_HOOKLOG),
        ("eventlog.jsonl", EVENTLOG),
    ],
)
def test_format_is_detected_by_content_not_name(
    tmp_path: Path, fixture: str, expected: str
) -> None:
    # A misleading name: the content decides.
    misnamed = tmp_path / "rollout-2025-01-01.chat.json"
    shutil.copy(FIX / fixture, misnamed)
    assert detect(read_records(misnamed)) == expected


def test_unrecognised_and_empty_files_are_reported_not_detected(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    rec = read_records(empty)
    assert detect(rec) is None
    assert [p.message for p in rec.problems] == ["empty file"]
    other = tmp_path / "other.jsonl"
    other.write_text('{"hello": 1}\n{"world": 2}\n')
    assert detect(read_records(other)) is None


def test_json_array_elements_know_their_line_and_a_broken_element_is_named(
    tmp_path: Path,
) -> None:
    rec = read_records(FIX / "claude_transcript_array.json")
    text = (FIX / "claude_transcript_array.json").read_text().splitlines()
    # Each element's reported line is the line its opening brace is on.
    for line, value in rec.records:
        assert text[line - 1].strip() == "{"
        assert isinstance(value, dict)
    broken = tmp_path / "broken.json"
    broken.write_text('[\n  {"type": "user"},\n  {"type": oops},\n  {"type": "user"}\n]\n')
    rec = read_records(broken)
    assert [v for _, v in rec.records] == [{"type": "user"}]
    assert len(rec.problems) == 1
    assert rec.problems[0].line == 3
    assert "unreadable array element" in rec.problems[0].message


def test_unreadable_jsonl_lines_are_reported_with_file_and_line() -> None:
    rec = read_records(FIX / "claude_transcript.jsonl")
    assert [(p.line, p.message.split(" (")[0]) for p in rec.problems] == [(19, "not JSON")]
    assert str(rec.problems[0]).startswith(f"{FIX / 'claude_transcript.jsonl'}:19: ")


def test_epoch_ms_reads_iso_and_epoch_forms() -> None:
    assert epoch_ms("2025-01-01T00:00:00Z") == 1_735_689_600_000
    assert epoch_ms("2025-01-01T01:00:00+01:00") == 1_735_689_600_000
    assert epoch_ms("2025-01-01T00:00:00") == 1_735_689_600_000  # naive = UTC
    assert epoch_ms(1_735_689_600_000) == 1_735_689_600_000
    assert epoch_ms(1_735_689_600) == 1_735_689_600_000  # epoch seconds
    assert epoch_ms("1735689600000") == 1_735_689_600_000
    for bad in (None, "", "yesterday", True, -5, float("nan"), [1]):
        assert epoch_ms(bad) is None


# --- Claude Code transcripts ----------------------------------------------------------------


def test_claude_transcript_becomes_the_hooks_claude_code_would_have_sent() -> None:
    conv = claude_transcript.convert(read_records(FIX / "claude_transcript.jsonl"))
    t = ms("2025-01-01T10:00:00Z")
    assert hooks(conv) == [
        (t, "SessionStart", None, None),
        (t, "UserPromptSubmit", None, None),
        (t + 1_500, "PreToolUse", "Bash", "t1"),
        (t + 3_000, "PostToolUseFailure", "Bash", "t1"),
        (t + 4_000, "PreToolUse", "Read", "t2"),
        (t + 5_000, "PostToolUse", "Read", "t2"),
        # t3 (modified since read) and t4 (<tool_use_error>) were rejected before any hook.
        (t + 8_000, "PreToolUse", "Bash", "t5"),
        (t + 9_000, "PostToolUse", "Bash", "t5"),
        (t + 10_000, "Stop", None, None),
        # /model, its output and the meta caveat are no prompts.
        (t + 60_000, "UserPromptSubmit", None, None),
        # t6 was refused by the user: its PreToolUse ran, no PostToolUse; the turn was
        # interrupted, so no Stop follows.
        (t + 61_000, "PreToolUse", "Bash", "t6"),
    ]
    by_id = {
        (i.hook_event, i.payload.get("tool_use_id")): i.payload
        for i in conv.items
        if i.payload is not None
    }
    fail = by_id[("PostToolUseFailure", "t1")]
    assert fail["error"].startswith("Exit code 1\n./main.go:3:1: syntax error")
    assert fail["cwd"] == "/work/proj" and fail["session_id"] == "s-claude"
    ok = by_id[("PostToolUse", "t5")]
    assert ok["tool_response"] == {
        "stdout": "",
        "stderr": "",
        "interrupted": False,
        "isImage": False,
    }
    prompt = [i.payload for i in conv.items if i.hook_event == "UserPromptSubmit"]
    assert [p["prompt"] for p in prompt if p] == ["fix the build", "now run the tests"]


def test_claude_usage_is_deduplicated_by_message_and_skips_sidechains() -> None:
    conv = claude_transcript.convert(read_records(FIX / "claude_transcript.jsonl"))
    usages = [i.usage for i in conv.items if i.kind == USAGE and i.usage]
    t = ms("2025-01-01T10:00:00Z")
    # m1 (two lines, counted once), m2, m7; the sidechain m6 (90k tokens) is not the
    # main context.
    assert [(u.ts - t, u.occupancy, u.message_id) for u in usages] == [
        (1_000, 1_510, "m1"),
        (4_000, 2_005, "m2"),
        (10_000, 2_101, "m7"),
        # u20 and u21, "[Request interrupted by user…]": turn ends, as the live tailer
        # stores them.
        (62_000, 0, "turn_end:u20"),
        (62_500, 0, "turn_end:u21"),
    ]
    assert [u.kind for u in usages] == ["usage"] * 3 + ["turn_end"] * 2


def test_claude_refusals_are_noted_and_the_bad_line_is_reported() -> None:
    conv = claude_transcript.convert(read_records(FIX / "claude_transcript.jsonl"))
    kinds = [(n.kind, n.origin.rsplit(":", 1)[1]) for n in conv.notes]
    assert sorted(kinds) == [
        ("modified_since_read", "9"),
        ("refused", "22"),
        ("validation_rejected", "11"),
    ]
    stale = next(n for n in conv.notes if n.kind == "modified_since_read")
    assert "Edit /work/proj/main.go" in stale.detail
    assert [p.line for p in conv.problems] == [19]


def test_claude_json_array_gives_the_same_hooks_as_jsonl() -> None:
    a = claude_transcript.convert(read_records(FIX / "claude_transcript.jsonl"))
    b = claude_transcript.convert(read_records(FIX / "claude_transcript_array.json"))
    assert hooks(a) == hooks(b)
    assert [i.payload for i in a.items if i.kind == HOOK] == [
        i.payload for i in b.items if i.kind == HOOK
    ]
    assert b.problems == []


@pytest.mark.parametrize(
    ("text", "is_error", "verdict"),
    [
        ("ok", False, claude_transcript.OK),
        ("Exit code 0\nfine", False, claude_transcript.OK),
        ("Exit code 2\nboom", False, claude_transcript.FAILURE),
        ("Exit code 1\nboom", True, claude_transcript.FAILURE),
        ("# pkg\n./a.go:1: undefined: x", True, claude_transcript.FAILURE),
        ("<tool_use_error>File does not exist.</tool_use_error>", True, claude_transcript.REJECTED),
        ("File does not exist.", True, claude_transcript.REJECTED),
        ("Found 2 matches of the string to replace, but replace_all is false.", True,
         claude_transcript.REJECTED),
        ("File has been modified since read, either by the user or by a linter.", True,
         claude_transcript.REJECTED),
        ("cd to '/tmp' was blocked. For security, …", True, claude_transcript.REJECTED),
        ("Bash operation blocked by hook:\n- [x]: BLOCKED", True, claude_transcript.REFUSED),
        ("The user doesn't want to proceed with this tool use.", True,
         claude_transcript.REFUSED),
        ("[Request interrupted by user for tool use]", True, claude_transcript.REFUSED),
    ],
)  # fmt: skip
def test_classify_result(text: str, is_error: bool, verdict: str) -> None:
    assert claude_transcript.classify_result(text, is_error) == verdict


def _entry(uuid: str, sid: str, ts: str, etype: str = "user", **extra: object) -> dict:
    return {"type": etype, "uuid": uuid, "sessionId": sid, "timestamp": ts, **extra}


def test_a_resumed_sessions_copied_history_is_retimed_from_its_neighbours(tmp_path: Path) -> None:
    """Real logs hold a resumed session's copy of earlier history: every copied entry has
    the copy's timestamp and the new session id, interleaved with the original session's
    real-time system (hook) lines. The copies take their neighbours' time and session."""
    copy_ts = "2025-08-07T01:21:55.124Z"
    rows: list[dict] = [
        _entry("p0", "orig", "2025-08-06T20:00:00.000Z",
               message={"role": "user", "content": "go"}),
    ]  # fmt: skip
    for k in range(12):
        tid = f"t{k}"
        real = f"2025-08-06T20:{k + 1:02d}:00.000Z"
        rows.append(
            _entry(f"a{k}", "resumed", copy_ts, "assistant",
                   message={"id": f"m{k}", "content": [
                       {"type": "tool_use", "id": tid, "name": "Bash",
                        "input": {"command": f"make t{k}"}}]})
        )  # fmt: skip
        rows.append(_entry(f"s{k}", "orig", real, "system", content="PreToolUse:Bash completed"))
        rows.append(
            _entry(f"r{k}", "resumed", copy_ts,
                   message={"content": [{"type": "tool_result", "tool_use_id": tid,
                                         "content": "ok"}]})
        )  # fmt: skip
        rows.append(
            _entry(f"q{k}", "orig", real.replace(":00.000Z", ":30.000Z"), "system",
                   content="PostToolUse:Bash completed")
        )  # fmt: skip
    path = tmp_path / "resumed.json"
    path.write_text(json.dumps(rows))
    conv = claude_transcript.convert(read_records(path))
    tool_hooks = [h for h in hooks(conv) if h[1] in ("PreToolUse", "PostToolUse")]
    assert len(tool_hooks) == 24
    t0 = ms("2025-08-06T20:00:00Z")
    for k in range(12):
        pre, post = tool_hooks[2 * k], tool_hooks[2 * k + 1]
        assert pre[0] == t0 + (k + 1) * 60_000  # the next real line: its PreToolUse hook
        assert post[0] == t0 + (k + 1) * 60_000 + 30_000
    assert {i.session_id for i in conv.items} == {"orig"}
    assert [n.kind for n in conv.notes] == ["retimed_copy"]
    assert "24 entries of session resumed" in conv.notes[0].detail


# --- Codex rollouts -------------------------------------------------------------------------


def test_codex_current_rollout_becomes_codex_hooks() -> None:
    conv = codex_rollout.convert(read_records(FIX / "codex_rollout.jsonl"))
    t = ms("2025-11-13T10:00:00Z")
    assert hooks(conv) == [
        (t, "SessionStart", None, None),
        (t + 1_000, "UserPromptSubmit", None, None),
        (t + 2_000, "PreToolUse", "Bash", "c1"),
        (t + 3_000, "PostToolUse", "Bash", "c1"),
        (t + 4_000, "PreToolUse", "apply_patch", "c2"),
        (t + 5_000, "PostToolUse", "apply_patch", "c2"),
        # update_plan fires no hook.
        (t + 6_000, "Stop", None, None),
        (t + 60_000, "UserPromptSubmit", None, None),
        (t + 61_000, "PreToolUse", "Bash", "c4"),
        # turn_aborted: no Stop.
    ]
    items = {(i.hook_event, i.payload.get("tool_use_id")): i for i in conv.items if i.payload}
    assert all(i.source == "codex" and i.envelope == "codex" for i in conv.items if i.payload)
    pre = items[("PreToolUse", "c1")].payload
    assert pre["tool_input"] == {"command": "pytest -q"}
    assert pre["cwd"] == "/work/cproj" and pre["model"] == "gpt-5-codex"
    post = items[("PostToolUse", "c1")].payload
    assert post["tool_response"].startswith("Exit code: 1\nOutput:\nFAILED tests/test_x.py::")
    patch = items[("PreToolUse", "c2")].payload["tool_input"]["command"]
    assert patch.startswith("*** Begin Patch\n*** Update File: src/x.py")
    assert [i.payload["prompt"] for i in conv.items if i.hook_event == "UserPromptSubmit"] == [
        "run the tests",
        "again please",
    ]
    usages = [i.usage for i in conv.items if i.kind == USAGE and i.usage]
    # token_count repeated with the same total is one request.
    assert [
        (u.ts - t, u.kind, u.occupancy, u.input_tokens, u.cache_read_tokens) for u in usages
    ] == [
        (3_500, "usage", 5_000, 4_000, 1_000),
        # The user aborted the second turn: a turn end, as the live tailer stores it.
        (62_000, "turn_end", 0, 0, 0),
    ]
    assert [p.line for p in conv.problems] == [16]
    assert conv.synthetic_time is None


def test_codex_legacy_rollout_gets_a_stated_synthetic_timeline() -> None:
    conv = codex_rollout.convert(read_records(FIX / "codex_legacy.jsonl"))
    t = ms("2025-08-24T15:29:23.406Z")
    s = codex_rollout.LEGACY_SPACING_MS
    assert hooks(conv) == [
        (t, "SessionStart", None, None),
        (t + s, "UserPromptSubmit", None, None),
        (t + 2 * s, "PreToolUse", "Bash", "call1"),
        (t + 3 * s, "PostToolUse", "Bash", "call1"),
        (t + 4 * s, "PreToolUse", "apply_patch", "call2"),
        (t + 5 * s, "PostToolUse", "apply_patch", "call2"),
        (t + 6 * s, "Stop", None, None),
    ]
    post = next(i.payload for i in conv.items if i.hook_event == "PostToolUse" and i.payload)
    assert post["tool_response"].startswith("Exit code: 101\nOutput:\nerror[E0425]")
    assert post["cwd"] == "/work/lproj"
    assert conv.synthetic_time and "synthetic" not in conv.format
    assert "5 s" in conv.synthetic_time


def test_codex_shell_script_and_tool_mapping() -> None:
    assert codex_rollout.shell_script(["bash", "-lc", "ls -la"]) == "ls -la"
    assert codex_rollout.shell_script(["git", "commit", "-m", "a b"]) == "git commit -m 'a b'"
    assert codex_rollout.tool_call("exec_command", {"cmd": "make"}, "/w") == (
        "Bash",
        {"command": "make"},
        "/w",
    )
    assert codex_rollout.tool_call("apply_patch", {"input": "*** Begin Patch"}, None)[:2] == (
        "apply_patch",
        {"command": "*** Begin Patch"},
    )
    assert codex_rollout.tool_response("plain text") == "plain text"
    assert codex_rollout.tool_response('{"output":"x","metadata":{"exit_code":0}}') == (
        "Exit code: 0\nOutput:\nx"
    )


# --- Claude Code hook logs --------------------------------------------------------------------


def test_hook_logs_get_a_synthetic_timeline_and_posts_follow_their_pres() -> None:
    pre, post = claude_hooklog.convert_many(
        [read_records(FIX / "hooklog_pre.json"), read_records(FIX / "hooklog_post.json")]
    )
    base, step = claude_hooklog.BASE_MS, claude_hooklog.SPACING_MS
    merged = sorted([*pre.items, *post.items], key=lambda i: (i.ts, i.seq))
    assert [(i.ts - base, i.session_id, i.hook_event, i.payload["tool_name"]) for i in merged] == [
        (0, "hA", "PreToolUse", "Read"),
        (step, "hA", "PreToolUse", "Edit"),
        (step + step // 2, "hA", "PostToolUse", "Edit"),  # matched to its Pre
        (2 * step, "hB", "PreToolUse", "Bash"),
        (2 * step + step // 2, "hB", "PostToolUse", "Bash"),  # no Pre: after hB's last
    ]  # fmt: skip
    assert [p.line for p in pre.problems] == [18]  # "not a payload"
    assert pre.synthetic_time and "2025-01-01T00:00:00Z" in pre.synthetic_time
    assert post.synthetic_time == pre.synthetic_time


# --- tma1 event log -----------------------------------------------------------------------------


def test_event_log_records_become_items_and_bad_records_are_reported() -> None:
    conv = eventlog.convert(read_records(FIX / "eventlog.jsonl"))
    t = ms("2025-03-01T09:00:00Z")
    assert [(i.ts - t, i.kind, i.hook_event) for i in conv.items] == [
        (0, HOOK, "SessionStart"),
        (1_000, HOOK, "PreToolUse"),
        (2_000, FILE_CHANGE, None),
        (3_000, USAGE, None),
        (4_000, HOOK, "UserPromptSubmit"),
    ]
    change = conv.items[2].change
    assert change is not None
    assert (change.project, change.path, change.change, change.writer_session) == (
        "/work/eproj",
        "/work/eproj/a.py",
        "modified",
        None,
    )
    usage = conv.items[3].usage
    assert usage is not None and usage.occupancy == 110_010  # the three inputs
    codex = conv.items[4]
    assert codex.source == "codex" and codex.envelope == "codex"
    assert "ts" not in codex.payload and "agent_source" not in codex.payload  # type: ignore[operator]
    assert [(p.line, p.message.split(";")[0].split(" (")[0]) for p in conv.problems] == [
        (9, "not JSON"),
        (6, "no readable `ts`"),
        (7, "file_change needs project, path and change added|modified|deleted"),
        (8, "not a JSON object"),
        (10, "usage without session_id"),
    ]


def test_a_foreign_file_reports_a_bounded_number_of_lines(tmp_path: Path) -> None:
    junk = tmp_path / "binary.jsonl"
    junk.write_bytes(b"\x00\xff garbage line\n" * 500)
    rec = read_records(junk)
    assert rec.records == []
    assert rec.problems[0].message == "not valid UTF-8; undecodable bytes replaced"
    assert len(rec.problems) == 1 + 50 + 1
    assert rec.problems[-1].message == "… and 450 more unreadable lines (not listed)"
    assert detect(rec) is None
