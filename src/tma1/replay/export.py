"""`tma1 export`: a stored session as tma1's event log (design §4), for `tma1 replay`.

Written: the session's hook events with their stored `ts`, rebuilt as the payloads the
agent posted (enough of them that the parser derives the same fields again); the file
changes of the session's project(s) within the session's time range; the session's usage
rows. Ordered by time; at the same millisecond file changes and usage come before hook
events (the watcher and the tailer store what a hook then reacts to).

What the store does not keep cannot be exported: tool input beyond 8 KB and tool output
beyond 16 KB were cut at ingest, so an exported payload carries the cut text (the rules
only ever saw that), and a cut tool input is rebuilt from the derived file path / command.
"""

from __future__ import annotations

import json
from typing import Any

from tma1.events import HookEvent
from tma1.store import Store
from tma1.store.sessions import usage_rows

_RANK_CHANGE, _RANK_USAGE, _RANK_HOOK = 0, 1, 2
_USAGE_KEYS = (
    "ts",
    "session_id",
    "input_tokens",
    "cache_read_tokens",
    "cache_creation_tokens",
    "output_tokens",
    "occupancy",
    "kind",
)
_USAGE_OPTIONAL = ("model", "context_window", "message_id")  # written when set


class SessionNotFound(LookupError):
    pass


def _tool_input(ev: HookEvent) -> Any:
    """The stored tool_input back as the object the agent sent (or the string it sent)."""
    text = ev.tool_input
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return value
    if not text.lstrip().startswith("{"):
        return text  # the agent sent a string (e.g. a bare command)
    # Cut at ingest: rebuild what the parser derives from.
    rebuilt: dict[str, Any] = {"_truncated": True}
    if ev.tool_name == "apply_patch":
        lines = [f"*** Update File: {f}" for f in ev.tool_files]
        rebuilt["command"] = "\n".join(["*** Begin Patch", *lines, "*** End Patch"])
    elif ev.tool_command is not None:
        rebuilt["command"] = ev.tool_command
    if ev.tool_file_path and ev.tool_name != "apply_patch":
        rebuilt["file_path"] = ev.tool_file_path
    return rebuilt


def payload_of(ev: HookEvent) -> dict[str, Any]:
    """The hook payload that makes `parse_payload` give back `ev` (plus our `ts`)."""
    p: dict[str, Any] = {"ts": ev.ts}
    if ev.agent_source == "codex":
        p["agent_source"] = "codex"
    p["session_id"] = ev.session_id
    p["hook_event_name"] = ev.hook_event_name
    for key in ("cwd", "transcript_path", "permission_mode", "tool_name", "tool_use_id"):
        value = getattr(ev, key)
        if value is not None:
            p[key] = value
    if ev.duration_ms is not None:
        p["duration_ms"] = ev.duration_ms
    tool_input = _tool_input(ev)
    if tool_input is not None:
        p["tool_input"] = tool_input
    if ev.hook_event_name == "PostToolUseFailure":
        if ev.tool_result is not None:
            p["error"] = ev.tool_result
    elif ev.hook_event_name == "PostToolUse" and ev.tool_result is not None:
        resp: dict[str, Any] = {"stdout": ev.tool_result}
        if ev.event_type == "PostToolUseFailure":
            resp["is_error"] = True  # a failure derived from the response's markers
        p["tool_response"] = resp
    for key, value in ev.metadata.items():
        p.setdefault(key, value)
    return p


def export_session(store: Store, session_id: str) -> list[dict[str, Any]]:
    """The event-log records of one stored session, in replay order."""
    events = store.session_events(session_id, 0)
    if not events:
        raise SessionNotFound(session_id)
    first, last = events[0].ts, events[-1].ts
    rows = [(ev.ts, _RANK_HOOK, ev.id or 0, payload_of(ev)) for ev in events]
    for project in dict.fromkeys(e.project for e in events if e.project):
        for ch in store.project_changes(project, first, last):
            rec: dict[str, Any] = {
                "type": "file_change",
                "ts": ch.ts,
                "project": ch.project,
                "path": ch.path,
                "change": ch.change,
                "session_id": ch.writer_session,
            }
            if ch.size is not None:
                rec["size"] = ch.size
            if ch.content_hash is not None:
                rec["content_hash"] = ch.content_hash
            rows.append((ch.ts, _RANK_CHANGE, ch.id or 0, rec))
    for u in usage_rows(store, session_id):
        rec = {"type": "usage", **{k: u[k] for k in _USAGE_KEYS}}
        rec.update({k: u[k] for k in _USAGE_OPTIONAL if u[k]})
        rows.append((u["ts"], _RANK_USAGE, u["id"], rec))
    rows.sort(key=lambda r: r[:3])
    return [r[3] for r in rows]
