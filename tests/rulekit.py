"""Builders for the rule tests: real hook payloads through the real parser, at chosen times.

Events go through `parse_payload`, so what a rule sees as a failure, a masked failure or a
refusal is exactly what the live server would store.
"""

from __future__ import annotations

from typing import Any

from tma1.clock import MINUTE_MS
from tma1.engine.window import SessionWindow
from tma1.events import FileChange, HookEvent, Usage, parse_payload

T0 = 1_700_000_000_000
SID = "sess-main"
OTHER = "sess-other"
PROJECT = "/nonexistent/tma1-rule-tests/proj"


def at(minutes: float) -> int:
    """Epoch ms `minutes` after T0."""
    return T0 + round(minutes * MINUTE_MS)


def src(rel: str) -> str:
    return f"{PROJECT}/{rel}"


def event(hook: str, ts: int, sid: str = SID, **kw: Any) -> HookEvent:
    return parse_payload({"session_id": sid, "hook_event_name": hook, "cwd": PROJECT, **kw}, ts=ts)


def edit(ts: int, path: str, tool: str = "Edit", tuid: str | None = None) -> HookEvent:
    return event("PreToolUse", ts, tool_name=tool, tool_input={"file_path": path}, tool_use_id=tuid)


def edit_result(
    ts: int, path: str, *, ok: bool = True, tool: str = "Edit", tuid: str | None = None
) -> HookEvent:
    if ok:
        return event(
            "PostToolUse",
            ts,
            tool_name=tool,
            tool_input={"file_path": path},
            tool_response={"filePath": path, "success": True},
            tool_use_id=tuid,
        )
    return event(
        "PostToolUseFailure",
        ts,
        tool_name=tool,
        tool_input={"file_path": path},
        error="String to replace not found in file.",
        tool_use_id=tuid,
    )


def read(ts: int, path: str, hook: str = "PreToolUse", tuid: str | None = None) -> HookEvent:
    kw: dict[str, Any] = {"tool_name": "Read", "tool_input": {"file_path": path}}
    if hook != "PreToolUse":
        kw["tool_response"] = {"type": "text", "file": {"filePath": path, "content": "x"}}
    return event(hook, ts, tool_use_id=tuid, **kw)


def bash_fail(ts: int, cmd: str, output: str = "error: it broke", code: int = 1) -> HookEvent:
    """A native Claude Code failure: `error` begins `Exit code N`."""
    return event(
        "PostToolUseFailure",
        ts,
        tool_name="Bash",
        tool_input={"command": cmd},
        error=f"Exit code {code}\n{output}",
    )


def bash_masked(ts: int, cmd: str, stdout: str) -> HookEvent:
    """A pipeline that exited 0 while the tool inside it failed (design §2.8)."""
    ev = event(
        "PostToolUse",
        ts,
        tool_name="Bash",
        tool_input={"command": cmd},
        tool_response={"stdout": stdout, "stderr": "", "interrupted": False},
    )
    assert ev.failure_kind == "masked", "fixture must be a masked failure"
    return ev


def bash_ok(ts: int, cmd: str, stdout: str = "ok") -> HookEvent:
    return event(
        "PostToolUse",
        ts,
        tool_name="Bash",
        tool_input={"command": cmd},
        tool_response={"stdout": stdout, "stderr": "", "interrupted": False},
    )


def bash_refused(ts: int, cmd: str) -> HookEvent:
    ev = event(
        "PostToolUseFailure",
        ts,
        tool_name="Bash",
        tool_input={"command": cmd},
        error="Bash operation blocked by hook:\n- rm is not allowed here",
    )
    assert not ev.is_failure, "fixture must be a refusal"
    return ev


def change(ts: int, path: str, writer: str | None = None, kind: str = "modified") -> FileChange:
    return FileChange(ts=ts, project=PROJECT, path=path, change=kind, writer_session=writer)


def usage(ts: int, occupancy: int) -> Usage:
    return Usage(ts=ts, session_id=SID, occupancy=occupancy, input_tokens=occupancy)


def window(
    events: list[HookEvent] | tuple[HookEvent, ...] = (),
    changes: list[FileChange] | tuple[FileChange, ...] = (),
    *,
    usage: Usage | None = None,
    start: int | None = T0 - 60 * MINUTE_MS,
) -> SessionWindow:
    return SessionWindow(
        session_id=SID,
        project=PROJECT,
        events=sorted(events, key=lambda e: e.ts),
        changes=sorted(changes, key=lambda c: c.ts),
        usage=usage,
        session_start_ts=start,
    )
