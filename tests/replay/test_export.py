"""`export_session` writes payloads from which the parser derives the stored event again —
even when ingest cut the tool input or output — plus the project's file changes in the
session's time range and the session's usage rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tma1.events import FileChange, Usage, parse_payload
from tma1.replay import eventlog
from tma1.replay.export import SessionNotFound, export_session, payload_of
from tma1.replay.formats import read_records
from tma1.replay.model import FILE_CHANGE, HOOK, USAGE
from tma1.store import Store

T = 1_750_000_000_000


def stored(store: Store, payload: dict, ts: int, source: str = "claude-code"):  # type: ignore[no-untyped-def]
    ev = parse_payload(payload, ts=ts, source=source)
    store.insert_event(ev)
    return ev


FIELDS = (
    "session_id", "event_type", "hook_event_name", "agent_source", "tool_name", "tool_use_id",
    "tool_input", "tool_result", "tool_file_path", "tool_files", "tool_command",
    "tool_command_prefix", "tool_success", "failure_kind", "tool_error_summary", "test_ids",
    "cwd", "project", "transcript_path", "permission_mode", "duration_ms",
)  # fmt: skip


def test_exported_payloads_parse_back_to_the_stored_events(store: Store, tmp_path: Path) -> None:
    cwd = str(tmp_path)
    big = "x" * 20_000
    sid = "exp-1"
    originals = [
        {"session_id": sid, "hook_event_name": "SessionStart", "cwd": cwd, "source": "startup",
         "transcript_path": "/t.jsonl", "permission_mode": "default"},
        {"session_id": sid, "hook_event_name": "PreToolUse", "cwd": cwd, "tool_name": "Write",
         "tool_use_id": "w1", "tool_input": {"file_path": f"{cwd}/big.txt", "content": big}},
        {"session_id": sid, "hook_event_name": "PostToolUse", "cwd": cwd, "tool_name": "Bash",
         "tool_use_id": "b1", "tool_input": {"command": "pytest -q"}, "duration_ms": 812,
         "tool_response": {"stdout": "FAILED tests/test_a.py::test_x - assert 0\n1 failed\n"
                           + big, "stderr": "", "interrupted": False}},
        {"session_id": sid, "hook_event_name": "PostToolUse", "cwd": cwd, "tool_name": "Bash",
         "tool_use_id": "b2", "tool_input": {"command": "make"},
         "tool_response": {"stdout": "", "stderr": "boom", "exitCode": 2}},
        {"session_id": sid, "hook_event_name": "PostToolUseFailure", "cwd": cwd,
         "tool_name": "Bash", "tool_use_id": "b3", "tool_input": {"command": "go build ./..."},
         "error": "Exit code 1\n./a.go:1:1: expected 'package'"},
        {"session_id": sid, "hook_event_name": "PostToolUseFailure", "cwd": cwd,
         "tool_name": "Bash", "tool_use_id": "b4", "tool_input": {"command": "rm -rf /"},
         "error": "Bash operation blocked by hook:\n- [x]: no"},
        {"session_id": sid, "hook_event_name": "UserPromptSubmit", "cwd": cwd,
         "prompt": "p" * 9_000},
        {"session_id": sid, "hook_event_name": "Stop", "cwd": cwd, "stop_hook_active": True},
    ]  # fmt: skip
    codex = {"session_id": sid, "hook_event_name": "PreToolUse", "cwd": cwd,
             "tool_name": "apply_patch", "tool_input": {"command": "*** Begin Patch\n"
             "*** Update File: src/a.py\n@@\n-a\n+b\n*** Add File: src/b.py\n+" + big
             + "\n*** End Patch"}}  # fmt: skip
    events = [stored(store, p, T + i * 1_000) for i, p in enumerate(originals)]
    events.append(stored(store, codex, T + 20_000, source="codex"))
    # The cut inputs and outputs are what the export has to rebuild from.
    assert events[1].tool_input and events[1].tool_input.endswith("…[truncated]")
    assert events[-1].tool_input and events[-1].tool_input.endswith("…[truncated]")

    log = tmp_path / "export.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in export_session(store, sid)))
    conv = eventlog.convert(read_records(log))
    assert conv.problems == []
    hooks = [i for i in conv.items if i.kind == HOOK]
    assert len(hooks) == len(events)
    for item, ev in zip(hooks, events, strict=True):
        agent = "codex" if item.source == "codex" else "claude-code"
        again = parse_payload(item.payload, ts=item.ts, source=agent)
        assert again.ts == ev.ts
        for name in FIELDS:
            if name == "tool_input" and ev.tool_input and ev.tool_input.endswith("…[truncated]"):
                continue  # rebuilt from the derived fields, checked below
            assert getattr(again, name) == getattr(ev, name), (ev.hook_event_name, name)
        assert again.stop_hook_active == ev.stop_hook_active
    assert hooks[-1].source == "codex" and hooks[-1].envelope == "codex"


def test_export_carries_the_projects_changes_in_range_and_the_sessions_usage(
    store: Store, tmp_path: Path
) -> None:
    cwd = str(tmp_path)
    stored(store, {"session_id": "exp-2", "hook_event_name": "SessionStart", "cwd": cwd}, T)
    stored(store, {"session_id": "exp-2", "hook_event_name": "Stop", "cwd": cwd}, T + 60_000)
    stored(store, {"session_id": "other", "hook_event_name": "SessionStart", "cwd": cwd}, T)
    for ts, path in ((T - 5_000, "before"), (T + 30_000, "during"), (T + 90_000, "after")):
        store.insert_change(
            FileChange(
                ts=ts,
                project=cwd,
                path=f"{cwd}/{path}.py",
                change="modified",
                writer_session="other",
            )
        )
    store.insert_change(
        FileChange(ts=T + 30_000, project="/elsewhere", path="/elsewhere/x", change="added")
    )
    store.insert_usages(
        [
            Usage(
                ts=T + 10_000,
                session_id="exp-2",
                occupancy=120_000,
                input_tokens=5,
                cache_read_tokens=119_995,
                model="m",
                message_id="msg1",
            ),
            Usage(ts=T + 20_000, session_id="exp-2", occupancy=0, kind="compaction"),
            Usage(ts=T + 10_000, session_id="other", occupancy=1),
        ]
    )
    records = export_session(store, "exp-2")
    kinds = [r.get("type", r.get("hook_event_name")) for r in records]
    assert kinds == ["SessionStart", "usage", "usage", "file_change", "Stop"]
    change = records[3]
    assert change["path"] == f"{cwd}/during.py" and change["session_id"] == "other"
    usage = records[1]
    assert (usage["occupancy"], usage["model"], usage["message_id"]) == (120_000, "m", "msg1")
    assert records[2]["kind"] == "compaction"

    log = tmp_path / "e.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    conv = eventlog.convert(read_records(log))
    assert [i.kind for i in conv.items] == [HOOK, USAGE, USAGE, FILE_CHANGE, HOOK]
    assert conv.items[1].usage is not None and conv.items[1].usage.occupancy == 120_000
    assert conv.items[3].change is not None and conv.items[3].change.writer_session == "other"


def test_exporting_an_unknown_session_says_so(store: Store) -> None:
    with pytest.raises(SessionNotFound):
        export_session(store, "nobody")


def test_payload_of_a_derived_failure_keeps_it_a_failure() -> None:
    ev = parse_payload(
        {"session_id": "s", "hook_event_name": "PostToolUse", "tool_name": "Bash",
         "tool_input": {"command": "make"},
         # (an output with an error in it: one with none has no verdict, design §2.21)
         "tool_response": {"stdout": "app.c:3: error: expected ';'", "exitCode": 2}},
        ts=T,
    )  # fmt: skip
    assert ev.event_type == "PostToolUseFailure" and ev.hook_event_name == "PostToolUse"
    payload = payload_of(ev)
    again = parse_payload({k: v for k, v in payload.items() if k != "ts"}, ts=T)
    assert (again.event_type, again.hook_event_name, again.failure_kind) == (
        "PostToolUseFailure",
        "PostToolUse",
        "exit",
    )
