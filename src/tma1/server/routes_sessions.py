"""Sessions seen through their hook events: a list, and one session's timeline."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query

from tma1.gates import DAY_MS
from tma1.server import ServiceDep
from tma1.server.scope import ScopeParam, scoped
from tma1.store import emits, sessions

router = APIRouter(tags=["sessions"])


def _agent_of(m: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(agent_id, agent_type) of a sub-agent's event, None for the main agent: from the
    `agent_id`/`agent_type` columns when the store has them, else from the event's
    metadata JSON (where unknown hook fields land). Never raises on odd data."""
    agent_id = m.get("agent_id")
    agent_type = m.get("agent_type")
    if agent_id is None:
        meta: Any = m.get("metadata")
        if isinstance(meta, str) and meta:
            try:
                meta = json.loads(meta)
            except ValueError:
                meta = None
        if isinstance(meta, dict):
            agent_id = meta.get("agent_id")
            agent_type = agent_type or meta.get("agent_type")
    aid = str(agent_id)[:200] if isinstance(agent_id, str | int) and agent_id != "" else None
    atype = str(agent_type)[:100] if isinstance(agent_type, str) and agent_type else None
    return aid, atype if aid else None


def session_timeline(rows: Iterable[Mapping[Any, Any]]) -> list[dict[str, Any]]:
    """Events (sorted) → tool calls (a Pre joined with its Post by tool_use_id) and markers
    for the other events (prompts, stops, compactions). Each item has `agent_id` and
    `agent_type` (None: the main agent; else a sub-agent's lane)."""
    items: list[dict[str, Any]] = []
    open_calls: dict[str, dict[str, Any]] = {}
    for m in rows:
        agent_id, agent_type = _agent_of(m)
        lane = {"agent_id": agent_id, "agent_type": agent_type}
        et = m["event_type"]
        use_id = m["tool_use_id"]
        is_post = et in ("PostToolUse", "PostToolUseFailure")
        item = open_calls.pop(use_id, None) if is_post and use_id else None
        if item is None and (et == "PreToolUse" or is_post):
            item = {
                "type": "tool",
                "id": int(m["id"]),
                "ts": int(m["ts"]),
                "end_ts": None,
                "tool_name": m["tool_name"],
                "file": m["tool_file_path"],
                "command": m["tool_command"],
                "failed": False,
                "failure_kind": None,
                "error": None,
                **lane,
            }
            items.append(item)
            if et == "PreToolUse":
                if use_id:
                    open_calls[use_id] = item
                continue
        if item is None:
            items.append(
                {"type": "event", "id": int(m["id"]), "ts": int(m["ts"]), "event": et, **lane}
            )
            continue
        failed = et == "PostToolUseFailure" or m["failure_kind"] == "masked"
        item["end_ts"] = int(m["ts"])
        item["failed"] = failed
        item["failure_kind"] = m["failure_kind"] if failed else None
        item["error"] = m["tool_error_summary"] if failed else None
    return items


@router.get(
    "/api/sessions",
    summary="Sessions, newest activity first (a page of them; `q` searches)",
    description=(
        "Paging: `offset` sessions are skipped; ask for one more than a page to learn "
        "whether another page follows. `q` matches a part of the session id or of the "
        "project path, case-insensitively and literally. `scope=team`: every machine's "
        "sessions on a shared database (default: this machine's); `repo` keeps one "
        "repository's (as the sessions' `repo` spells it), `machine` one machine's."
    ),
)
def list_sessions(
    svc: ServiceDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    days: Annotated[int | None, Query(ge=1, le=365, description="active in the last N days")] = (
        None
    ),
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    q: Annotated[str | None, Query(max_length=200, description="part of id or project")] = None,
    scope: ScopeParam = "machine",
    repo: Annotated[str | None, Query(max_length=2000, description="one repository")] = None,
    machine: Annotated[str | None, Query(max_length=64, description="one machine id")] = None,
) -> list[dict[str, Any]]:
    since = svc.clock.now_ms() - days * DAY_MS if days else None
    return sessions.list_sessions(
        scoped(svc.store, scope),
        limit=limit,
        since_ts=since,
        offset=offset,
        search=(q or "").strip() or None,
        repo=repo or None,
        machine=machine or None,
    )


@router.get(
    "/api/repos",
    summary="Repositories of the sessions (normalised origin remote), newest first",
    description="`scope=team`: every machine's sessions on a shared database.",
)
def list_repos(
    svc: ServiceDep,
    scope: ScopeParam = "machine",
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> list[dict[str, Any]]:
    return sessions.repo_summary(scoped(svc.store, scope), limit=limit)


@router.get(
    "/api/sessions/{session_id}",
    summary="One session: summary, timeline of tool calls (failures flagged) and its emits",
    responses={404: {"description": "no events for this session"}},
)
def session_detail(
    svc: ServiceDep,
    session_id: Annotated[str, Path(min_length=1, max_length=200)],
    limit: Annotated[int, Query(ge=1, le=20_000, description="newest events to show")] = 2000,
    scope: ScopeParam = "machine",
    machine: Annotated[
        str | None,
        Query(max_length=64, description="the session of this machine (two can share an id)"),
    ] = None,
) -> dict[str, Any]:
    store = svc.store.of_machine(machine) if machine else scoped(svc.store, scope)
    summary = sessions.session_summary(store, session_id)
    if summary is None:
        raise HTTPException(status_code=404, detail=f"no events for session {session_id!r}")
    return {
        "session": summary,
        "timeline": session_timeline(sessions.timeline_rows(store, session_id, limit=limit)),
        "emits": emits.list_emits(store, session_id=session_id, limit=1000),
    }
