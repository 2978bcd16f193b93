"""Sessions seen through their hook events: a list, and one session's timeline."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Request

from tma1 import gates
from tma1.service import Service

router = APIRouter(tags=["sessions"])


def _service(request: Request) -> Service:
    return request.app.state.service  # type: ignore[no-any-return]


@router.get(
    "/api/sessions",
    summary="Sessions, newest activity first (a page of them; `q` searches)",
    description=(
        "Paging: `offset` sessions are skipped; ask for one more than a page to learn "
        "whether another page follows. `q` matches a part of the session id or of the "
        "project path, case-insensitively and literally."
    ),
)
def list_sessions(
    request: Request,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    days: Annotated[int | None, Query(ge=1, le=365, description="active in the last N days")] = (
        None
    ),
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    q: Annotated[str | None, Query(max_length=200, description="part of id or project")] = None,
) -> list[dict[str, Any]]:
    svc = _service(request)
    since = svc.clock.now_ms() - days * gates.DAY_MS if days else None
    return gates.list_sessions(
        svc.store, limit=limit, since_ts=since, offset=offset, search=(q or "").strip() or None
    )


@router.get(
    "/api/sessions/{session_id}",
    summary="One session: summary, timeline of tool calls (failures flagged) and its emits",
    responses={404: {"description": "no events for this session"}},
)
def session_detail(
    request: Request,
    session_id: Annotated[str, Path(min_length=1, max_length=200)],
    limit: Annotated[int, Query(ge=1, le=20_000, description="newest events to show")] = 2000,
) -> dict[str, Any]:
    detail = gates.session_detail(_service(request).store, session_id, limit=limit)
    if detail is None:
        raise HTTPException(status_code=404, detail=f"no events for session {session_id!r}")
    return detail
