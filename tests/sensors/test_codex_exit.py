"""A Codex shell call's exit status (design §2.18) and the lines an apply_patch call
wrote, from its rollout, on the payloads and rollout captured from the real Codex 0.171
binary (tests/fixtures/real-agents/)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import LiveServer
from sqlalchemy import select

from tma1.clock import ManualClock
from tma1.events import EDITED_LINES, parse_payload
from tma1.sensors import codex_exit
from tma1.sensors.codex_exit import CommandEnd, await_found, read_command_end
from tma1.storable.editlines import WHOLE_FILE
from tma1.store.schema import hook_events

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "real-agents"
HOOKS = FIXTURES / "codex-0.171.0.hooks-buildsh.jsonl"
ROLLOUT = FIXTURES / "codex-0.171.0.rollout-buildsh.jsonl"
BUILD_CALLS = (
    "call_30e8da1770f143d3ab43",
    "call_4602f2a38a8840dd8837",
    "call_a0d2ad8dac0d43daaff6",
)
CAT_CALL = "call_039b381df59f4bae8e79"
PATCH_CALL = "call_875ceba25e3e463782ff"


def payloads() -> list[dict[str, Any]]:
    return [json.loads(line)["payload"] for line in HOOKS.read_text().splitlines()]


def test_reads_each_calls_end_from_the_real_rollout() -> None:
    for call in BUILD_CALLS:
        assert read_command_end(ROLLOUT, call) == CommandEnd(1, "failed")
    assert read_command_end(ROLLOUT, CAT_CALL) == CommandEnd(0, "completed")
    # apply_patch has no command-end item, and its output is not a shell call's.
    assert read_command_end(ROLLOUT, PATCH_CALL) is None
    assert read_command_end(ROLLOUT, "call_nobody") is None
    assert read_command_end(ROLLOUT.with_name("absent.jsonl"), BUILD_CALLS[0]) is None


def test_a_long_item_whose_id_is_before_the_tail_is_read_whole(tmp_path: Path) -> None:
    # A command item holds the whole output after its id: with 400 KB of output the id
    # is far before a 128 KB tail, and the reader widens the tail to the line's start.
    lines = ROLLOUT.read_text().splitlines(keepends=True)
    item = json.loads(next(ln for ln in lines if BUILD_CALLS[0] in ln and "CommandExecution" in ln))
    item["payload"]["item"]["aggregated_output"] = "compiling\n" * 40_000
    path = tmp_path / "rollout.jsonl"
    path.write_text("".join(lines[:5]) + json.dumps(item) + "\n" + "".join(lines[-3:]))
    assert path.stat().st_size > 3 * codex_exit.TAIL_BYTES
    assert read_command_end(path, BUILD_CALLS[0]) == CommandEnd(1, "failed")
    # A tail inside the real rollout's last lines: the calls named there are found.
    assert read_command_end(ROLLOUT, BUILD_CALLS[2], tail_bytes=8192) == CommandEnd(1, "failed")


def test_the_item_wins_over_the_output_line_and_the_output_line_is_a_fallback(
    tmp_path: Path,
) -> None:
    lines = ROLLOUT.read_text().splitlines(keepends=True)
    item = next(
        ln for ln in lines if BUILD_CALLS[0] in ln and '"CommandExecution"' in ln
    )  # exit 1 / failed
    output = next(ln for ln in lines if BUILD_CALLS[0] in ln and "function_call_output" in ln)
    only_output = tmp_path / "only-output.jsonl"
    only_output.write_text(output)
    assert read_command_end(only_output, BUILD_CALLS[0]) == CommandEnd(1, None, "output")
    both = tmp_path / "both.jsonl"
    both.write_text(item + output)
    assert read_command_end(both, BUILD_CALLS[0]) == CommandEnd(1, "failed")


def test_a_line_still_being_written_is_not_read(tmp_path: Path) -> None:
    item = next(
        ln
        for ln in ROLLOUT.read_text().splitlines()
        if BUILD_CALLS[0] in ln and '"CommandExecution"' in ln
    )
    path = tmp_path / "rollout.jsonl"
    path.write_text(item)  # no newline yet: Codex is mid-write
    assert read_command_end(path, BUILD_CALLS[0]) is None
    with path.open("a") as f:
        f.write("\n")
    assert read_command_end(path, BUILD_CALLS[0]) == CommandEnd(1, "failed")


def test_the_wait_finds_an_item_written_after_the_first_look(tmp_path: Path) -> None:
    item = next(
        ln
        for ln in ROLLOUT.read_text().splitlines(keepends=True)
        if BUILD_CALLS[1] in ln and '"CommandExecution"' in ln
    )
    path = tmp_path / "rollout.jsonl"
    path.write_text("")
    looks: list[int] = []
    real = codex_exit.read_command_end

    def look(p: str, call: str, **kw: Any) -> CommandEnd | None:
        found = real(p, call, **kw)
        looks.append(1)
        if len(looks) == 1:
            path.write_text(item)  # Codex writes the item just after our first look
        return found

    assert asyncio.run(
        await_found(look, str(path), BUILD_CALLS[1], wait_s=60, poll_s=0.001)
    ) == CommandEnd(1, "failed")
    assert len(looks) == 2
    # A file that does not exist is not waited for at all.
    looks.clear()
    assert asyncio.run(await_found(look, str(tmp_path / "none.jsonl"), "x", wait_s=60)) is None
    assert looks == []


def _rewritten(tmp_path: Path, *, strip_errors: bool) -> tuple[list[dict[str, Any]], Path]:
    """The captured hooks and rollout, moved under `tmp_path`. `strip_errors`: every
    build output becomes `compiling src/app.py` alone, no recognisable error text."""
    project = tmp_path / "proj-codex-buildsh"
    (project / "src").mkdir(parents=True)
    rollout = tmp_path / "rollout.jsonl"
    text = ROLLOUT.read_text()
    hooks = payloads()
    if strip_errors:
        text = text.replace(r"src/app.py:3: error: expected return value 3, got 2\n", "")
        for p in hooks:
            if isinstance(p.get("tool_response"), str):
                p["tool_response"] = p["tool_response"].replace(
                    "src/app.py:3: error: expected return value 3, got 2\n", ""
                )
        assert "error" not in "".join(str(p.get("tool_response")) for p in hooks)
    rollout.write_text(text)
    for p in hooks:
        p["transcript_path"] = str(rollout)
        p["cwd"] = str(project)
    return hooks, rollout


def test_parsed_alone_the_captured_builds_look_like_successes() -> None:
    # What the hooks say without the rollout: the reason this module exists.
    builds = [p for p in payloads() if p.get("tool_use_id") in BUILD_CALLS]
    posts = [p for p in builds if p["hook_event_name"] == "PostToolUse"]
    assert len(posts) == 3
    for p in posts:
        ev = parse_payload(p, ts=1, source="codex")
        assert ev.event_type == "PostToolUse" and not ev.is_failure
        assert codex_exit.wants_exit_status(ev)


@pytest.mark.parametrize("strip_errors", [False, True], ids=["as-captured", "no-error-text"])
def test_three_failing_builds_block_the_stop_through_the_server(
    live: LiveServer, clock: ManualClock, tmp_path: Path, strip_errors: bool
) -> None:
    hooks, _ = _rewritten(tmp_path, strip_errors=strip_errors)
    for p in hooks:
        if p["hook_event_name"] == "Stop":
            # The captured run's model said "The build still fails; I am stopping here.":
            # a Stop that hands the failure back is not blocked (test_handback). This
            # one announces success over the broken build.
            p["last_assistant_message"] = "Done: the build is fixed."
    answers = []
    for p in hooks:
        clock.advance(1000)
        r = live.hook(p, params={"source": "codex", "envelope": "codex"})
        assert r.status_code == 200
        answers.append((p["hook_event_name"], r.text))

    with live.store.connect() as conn:
        rows = [
            dict(r._mapping) for r in conn.execute(select(hook_events).order_by(hook_events.c.id))
        ]
    builds = [r for r in rows if r["tool_use_id"] in BUILD_CALLS and r["tool_command"]]
    posts = [r for r in builds if r["event_type"] != "PreToolUse"]
    # The rollout's exit status makes each a failed call either way; without any error
    # text the run says nothing about the code (design §2.21: no verdict), so it is
    # stored as a failure but never blocks.
    kind = "no_verdict" if strip_errors else "exit"
    assert [(r["event_type"], r["failure_kind"]) for r in posts] == [
        ("PostToolUseFailure", kind)
    ] * 3
    assert all(json.loads(r["metadata"])["exit_code"] == 1 for r in posts)
    cat = next(r for r in rows if r["tool_use_id"] == CAT_CALL and r["event_type"] != "PreToolUse")
    assert cat["event_type"] == "PostToolUse" and cat["failure_kind"] is None

    stop_name, stop_body = answers[-1]
    assert stop_name == "Stop"
    if strip_errors:
        assert stop_body == ""
        return
    body = json.loads(stop_body)
    assert body["decision"] == "block"
    assert "./build.sh" in body["reason"]
    assert "pipe" not in body["reason"]


def test_without_the_rollout_the_output_markers_still_count(
    live: LiveServer, tmp_path: Path
) -> None:
    # The rollout is gone (or never has the item): no wait past the bound, and a test
    # run whose output shows failures is still a (masked) failure.
    payload = {
        "session_id": "s-codex",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_use_id": "call_x",
        "tool_input": {"command": "pytest -q"},
        "tool_response": "FAILED tests/test_a.py::test_one - assert 1 == 2\n1 failed\n",
        "cwd": str(tmp_path),
        "transcript_path": str(tmp_path / "missing.jsonl"),
    }
    assert live.hook(payload, params={"source": "codex"}).status_code == 200
    with live.store.connect() as conn:
        [row] = [dict(r._mapping) for r in conn.execute(select(hook_events))]
    assert row["event_type"] == "PostToolUse" and row["failure_kind"] == "masked"


class _Counted:
    """A service (SQLite, short waits) whose rollout reads are counted by call id."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *readers: str) -> None:
        from tma1.config import Settings
        from tma1.live.service import build_service

        self.tmp_path = tmp_path
        self.rollout = tmp_path / "rollout.jsonl"
        self.looks: list[str] = []
        for name in readers:
            real = getattr(codex_exit, name)

            def look(p: str, call: str, _real: Any = real, **kw: Any) -> Any:
                self.looks.append(call)
                return _real(p, call, **kw)

            monkeypatch.setattr(codex_exit, name, look)
        settings = Settings(
            data_dir=tmp_path / "data",
            database_url=f"sqlite:///{tmp_path / 'tma1.db'}",
            watch_files=False,
            hook_db_budget_ms=30_000,
        )
        self.service = build_service(settings, clock=ManualClock())

    def post(self, call: str, tool: str = "Bash", response: str = "compiling\n") -> None:
        body = {
            "session_id": "s",
            "hook_event_name": "PostToolUse",
            "tool_name": tool,
            "tool_use_id": call,
            "tool_input": {"command": "./build.sh"},
            "tool_response": response,
            "cwd": str(self.tmp_path),
            "transcript_path": str(self.rollout),
        }
        asyncio.run(self.service.handle_hook_async(json.dumps(body).encode(), source="codex"))

    def close(self) -> None:
        self.service.stop()
        self.service.store.close()


def _end_item(call: str) -> str:
    return next(
        ln
        for ln in ROLLOUT.read_text().splitlines(keepends=True)
        if call in ln and '"CommandExecution"' in ln
    )


def test_a_rollout_that_never_shows_an_end_stops_costing_a_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Codex that records exit codes some other way must not cost every shell call
    the whole wait: after two misses a rollout gets one look and no wait, until it shows
    an end again."""
    svc = _Counted(tmp_path, monkeypatch, "read_command_end")
    svc.rollout.write_text('{"type":"event_msg","payload":{"type":"task_started"}}\n')
    svc.service._exit_waits.wait_s = 0.5
    try:
        svc.post("c1")
        svc.post("c2")
        assert svc.looks.count("c1") > 1 and svc.looks.count("c2") > 1  # waited: several looks
        svc.post("c3")
        assert svc.looks.count("c3") == 1  # two misses: one look, no wait
        # The rollout shows an end again: waiting is back.
        with svc.rollout.open("a") as f:
            f.write(_end_item(BUILD_CALLS[0]))
        svc.post(BUILD_CALLS[0])
        svc.post("c5")
        assert svc.looks.count("c5") > 1
    finally:
        svc.close()


def test_a_rollout_without_patch_diffs_stops_costing_patches_a_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Codex that records command ends but no FileChange items (older than 0.17): its
    patches stop waiting after two misses, and its shell calls keep their own wait."""
    svc = _Counted(tmp_path, monkeypatch, "read_patch_lines", "read_command_end")
    svc.rollout.write_text(_end_item(BUILD_CALLS[0]))
    svc.service._exit_waits.wait_s = svc.service._patch_waits.wait_s = 0.3
    applied = "Success. Updated the following files:\nM a.py\n"
    try:
        svc.post(BUILD_CALLS[0])  # the rollout shows command ends
        svc.post("p1", "apply_patch", applied)
        svc.post("p2", "apply_patch", applied)
        assert svc.looks.count("p1") > 1 and svc.looks.count("p2") > 1  # waited
        svc.post("p3", "apply_patch", applied)
        assert svc.looks.count("p3") == 1  # two misses: one look, no wait
        svc.post("c9")
        assert svc.looks.count("c9") > 1  # the exit status still waits
    finally:
        svc.close()


def test_reads_the_lines_a_patch_wrote_from_the_real_rollout() -> None:
    # The captured patch rewrote `return 1` as `return 2`: line 3 of src/app.py.
    assert codex_exit.read_patch_lines(ROLLOUT, PATCH_CALL) == {
        "/home/dev/src/proj-codex-buildsh/src/app.py": [(3, 3)]
    }
    assert codex_exit.read_patch_lines(ROLLOUT, BUILD_CALLS[0]) is None  # a shell call
    assert codex_exit.read_patch_lines(ROLLOUT.with_name("absent.jsonl"), PATCH_CALL) is None


def test_a_new_file_is_wholly_written_a_deleted_one_left_out() -> None:
    item = {
        "type": "FileChange",
        "id": "call_p",
        "changes": {
            "/p/new.py": {"type": "add", "content": "x = 1\n"},
            "/p/old.py": {"type": "delete"},
            "/p/a.py": {"type": "update", "unified_diff": "@@ -9,1 +9,2 @@\n x\n+y\n"},
            "/p/b.py": {"type": "update", "unified_diff": ""},
        },
    }
    line = {"type": "event_msg", "payload": {"type": "item_completed", "item": item}}
    assert codex_exit.patch_lines(line, "call_p") == {
        "/p/new.py": [WHOLE_FILE],
        "/p/a.py": [(10, 10)],
        "/p/b.py": None,
    }
    assert codex_exit.patch_lines(line, "call_other") is None


def _stored_patch(live: LiveServer, hooks: list[dict[str, Any]]) -> dict[str, Any]:
    for p in hooks:
        if p.get("tool_use_id") == PATCH_CALL:
            assert live.hook(p, params={"source": "codex", "envelope": "codex"}).status_code == 200
    with live.store.connect() as conn:
        row = conn.execute(
            select(hook_events.c.metadata).where(
                hook_events.c.tool_use_id == PATCH_CALL,
                hook_events.c.event_type == "PostToolUse",
            )
        ).one()
    return dict(json.loads(row[0] or "{}"))


def test_the_stored_patch_event_keeps_the_lines_its_rollout_gives(
    live: LiveServer, tmp_path: Path
) -> None:
    hooks, _ = _rewritten(tmp_path, strip_errors=False)
    assert _stored_patch(live, hooks)[EDITED_LINES] == [[3, 3]]


def test_a_patch_of_two_files_keeps_no_lines(live: LiveServer, tmp_path: Path) -> None:
    # The rules read an event's lines as those of every file it names: with two files
    # the lines would be blamed on both, so they stay unknown.
    hooks, rollout = _rewritten(tmp_path, strip_errors=False)
    lines = rollout.read_text().splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if PATCH_CALL in ln and "FileChange" in ln)
    item = json.loads(lines[at])
    item["payload"]["item"]["changes"]["/elsewhere/b.py"] = {
        "type": "update",
        "unified_diff": "@@ -1 +1 @@\n-a\n+b\n",
    }
    lines[at] = json.dumps(item) + "\n"
    rollout.write_text("".join(lines))
    assert EDITED_LINES not in _stored_patch(live, hooks)
