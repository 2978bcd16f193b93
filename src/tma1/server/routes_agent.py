"""Read-only routes the MCP server (`tma1 mcp`) needs beyond the dashboard's: resolve a
working directory to its session, a session's state, the file changes behind it, and a
preview of its SessionStart bundle (design §2.19). Plain reads of the store, except that
the bundle preview runs the rules (as the anomalies preview does); nothing is written.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from datetime import datetime
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Path, Query

from tma1.clock import MINUTE_MS
from tma1.engine.context import context_threshold
from tma1.events import WRITE_TOOLS
from tma1.live.service import Service
from tma1.server import ServiceDep
from tma1.store import sessions as stored

router = APIRouter(prefix="/api/agent", tags=["agent"])

FAILURE_WINDOW_MS = 30 * MINUTE_MS  # the rules' window (seed): what the agent should know now
RECENT_EDITS_LIMIT = 20
RECENT_FAILURES_LIMIT = 10
CHANGES_LIMIT = 200
MAX_DEPTH = 257  # `/` and 256 directories below it
RESOLVE_SCAN = 500  # newest events looked at to rank the sessions of a project
_ERROR_CAP = 400

SessionId = Annotated[str, Path(min_length=1, max_length=200)]


# --- pure helpers ------------------------------------------------------------------------


def ancestors(path: str) -> list[str]:
    """`path` and every directory above it, deepest first (`/a/b` → `/a/b`, `/a`, `/`).

    A project contains `cwd` exactly when it is one of these, so resolution is one indexed
    `project IN (...)` query instead of a scan of every project ever seen.
    """
    p = PurePosixPath(path.rstrip("/") or "/")
    return [str(p), *(str(parent) for parent in p.parents)]


def parse_time(raw: str) -> int:
    """Epoch milliseconds, epoch seconds (≤ 10 digits) or ISO-8601 → epoch ms."""
    text = raw.strip()
    if text.isdigit() and len(text) <= 16:
        value = int(text)
        return value * 1000 if value < 10**11 else value
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"since={raw!r} is not a time; use epoch milliseconds or ISO-8601 "
            "(for example 2026-01-31T12:00:00Z)"
        ) from None
    if dt.tzinfo is None:
        raise ValueError(f"since={raw!r} has no time zone; add Z or an offset like +02:00")
    return max(0, int(dt.timestamp() * 1000))


def _check_text(name: str, value: str) -> None:
    # NUL cannot be stored or compared in PostgreSQL text: a clear 422, not a 500.
    if "\x00" in value:
        raise HTTPException(422, f"{name} contains a NUL character")


def _clip(text: str | None, limit: int = _ERROR_CAP) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def _files(row: Any) -> list[str]:
    try:
        loaded = json.loads(row.tool_files) if row.tool_files else []
    except ValueError:
        loaded = []
    files = [f for f in loaded if isinstance(f, str) and f] if isinstance(loaded, list) else []
    return files or ([row.tool_file_path] if row.tool_file_path else [])


def recent_edits(rows: Sequence[Any], limit: int = RECENT_EDITS_LIMIT) -> list[dict[str, Any]]:
    """Distinct files from write-tool results, with how often each was edited. The rows
    come newest first, so each file's first row is its last edit and the order is kept."""
    seen: dict[str, dict[str, Any]] = {}
    for row in rows:
        for path in _files(row):
            entry = seen.setdefault(path, {"path": path, "last_edit_at": row.ts, "edits": 0})
            entry["edits"] += 1
    return list(seen.values())[:limit]


# --- queries -------------------------------------------------------------------------------


def _session_bounds(service: Service, session_id: str) -> tuple[int, int, str | None, str | None]:
    """(first ts, last ts, newest project, agent source), or 404 for a session never seen."""
    _check_text("session_id", session_id)
    bounds = stored.session_bounds(service.store, session_id)
    if bounds is None:
        raise HTTPException(404, f"no events recorded for session {session_id!r}")
    return bounds


@router.get("/resolve", summary="The newest session whose project contains `cwd`")
def resolve(service: ServiceDep, cwd: str = Query(min_length=1, max_length=4096)) -> dict[str, Any]:
    _check_text("cwd", cwd)
    if not cwd.startswith("/"):
        raise HTTPException(422, f"cwd={cwd!r} is not an absolute path")
    candidates = ancestors(cwd)
    if len(candidates) > MAX_DEPTH:  # keeps the IN list far below any bind-parameter limit
        raise HTTPException(422, f"cwd is {len(candidates) - 1} directories deep; at most 256")
    real = os.path.realpath(cwd)
    if real != cwd:  # a symlinked checkout: the hook may have reported either spelling
        candidates.extend(c for c in ancestors(real) if c not in candidates)
    # The newest events in those projects, newest first: their sessions in order of first
    # appearance are the sessions by last activity.
    rows = stored.newest_in_projects(service.store, candidates, limit=RESOLVE_SCAN)
    last_seen: dict[str, int] = {}
    for sid, ts in rows:
        last_seen.setdefault(sid, ts)
    if not last_seen:
        raise HTTPException(
            404,
            f"no session recorded in a project containing {cwd}; are the tma1 hooks installed "
            "(tma1 install) and has the agent run a tool there yet?",
        )
    ranked = list(last_seen.items())
    best_id, best_last = ranked[0]
    started, _, project, source = _session_bounds(service, best_id)
    return {
        "session_id": best_id,
        "project": project,
        "agent_source": source,
        "started_at": started,
        "last_event_at": best_last,
        "cwd": cwd,
        "others": [{"session_id": sid, "last_event_at": ts} for sid, ts in ranked[1:5]],
    }


@router.get("/sessions/{session_id}/state", summary="What a session has done, in numbers")
def session_state(service: ServiceDep, session_id: SessionId) -> dict[str, Any]:
    now = service.clock.now_ms()
    started, last, project, source = _session_bounds(service, session_id)
    per_tool = stored.tool_result_counts(service.store, session_id)
    fail_count, fail_rows = stored.recent_failures(
        service.store, session_id, now - FAILURE_WINDOW_MS, limit=RECENT_FAILURES_LIMIT
    )
    edit_rows = stored.recent_writes(service.store, session_id, sorted(WRITE_TOOLS), limit=500)
    usage = service.store.latest_usage(session_id)
    by_tool = {
        (tool or "?"): {"calls": calls, "failures": failures}
        for tool, calls, failures in sorted(per_tool, key=lambda r: (-r[1], r[0] or ""))
    }
    occupancy = usage.occupancy if usage else None
    threshold = context_threshold(usage, service.settings.context_pressure_threshold)
    return {
        "session_id": session_id,
        "project": project,
        "agent_source": source,
        "now": now,
        "started_at": started,
        "last_event_at": last,
        "tool_calls": {
            "total": sum(v["calls"] for v in by_tool.values()),
            "failures": sum(v["failures"] for v in by_tool.values()),
            "by_tool": by_tool,
        },
        "failures_last_30_min": {
            "count": int(fail_count),
            "window_ms": FAILURE_WINDOW_MS,
            "newest": [
                {
                    "ts": int(r.ts),
                    "tool_name": r.tool_name,
                    "command": _clip(r.tool_command, 200),
                    "file_path": r.tool_file_path,
                    "error": _clip(r.tool_error_summary),
                    "failure_kind": r.failure_kind,
                    "test_ids": json.loads(r.test_ids) if r.test_ids else [],
                }
                for r in fail_rows
            ],
        },
        "recent_edits": recent_edits(edit_rows),
        "context": {
            "occupancy": occupancy,
            "threshold": threshold,
            "ratio": round(occupancy / threshold, 4) if occupancy is not None else None,
            "over_threshold": occupancy is not None and occupancy >= threshold,
            "measured_at": usage.ts if usage else None,
            "model": usage.model if usage else None,
        },
    }


@router.get(
    "/sessions/{session_id}/external-changes",
    summary="Files changed behind this session, and who changed them",
)
def session_external_changes(
    service: ServiceDep,
    session_id: SessionId,
    since: Annotated[str | None, Query(max_length=64)] = None,
) -> dict[str, Any]:
    now = service.clock.now_ms()
    started, _, project, _ = _session_bounds(service, session_id)
    try:
        since_ms = parse_time(since) if since else started
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    total, rows = (
        stored.changes_behind(service.store, project, since_ms, session_id, limit=CHANGES_LIMIT)
        if project is not None
        else (0, [])
    )
    return {
        "session_id": session_id,
        "project": project,
        "since": since_ms,
        "now": now,
        "total": int(total),
        "truncated": int(total) > len(rows),
        "changes": [
            {
                "ts": int(r.ts),
                "path": r.path,
                "change": r.change,
                # None: no session we know wrote it (an editor, git, a build tool, a human).
                "changed_by": r.writer_session,
            }
            for r in rows
        ],
    }


BundleSource = Literal["startup", "resume", "clear", "compact"]


@router.get(
    "/sessions/{session_id}/bundle",
    summary="The session bundle a SessionStart would get now (a preview: nothing is emitted)",
)
def session_bundle(
    service: ServiceDep,
    session_id: SessionId,
    source: Annotated[
        BundleSource, Query(description="the SessionStart source to preview for")
    ] = "resume",
) -> dict[str, Any]:
    _session_bounds(service, session_id)  # 404 for a session tma1 never saw
    return service.delivery.preview_bundle(session_id, source=source)
