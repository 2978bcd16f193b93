"""`GET /api/anomalies/preview`: what the next hook would deliver, without delivering it;
`GET /api/mutes`: the kinds muted now.

The emit-log listing (`GET /api/anomalies`) and labels live in routes_gates.py.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from starlette.concurrency import run_in_threadpool

from tma1.server import ServiceDep

router = APIRouter()


@router.get(
    "/api/anomalies/preview",
    summary="Findings the next hook of a session would deliver (read-only)",
    description=(
        "Runs the rules for the session and the suppression decision without committing "
        "it: no suppression state changes and no emit-log row is written. Each finding "
        "carries `would_deliver` and `decision` (fresh, suppressed, resolved, "
        "window_elapsed, resolved_new_evidence, new_evidence, one_shot)."
    ),
)
async def preview(
    service: ServiceDep,
    session_id: Annotated[str, Query(min_length=1, max_length=200)],
) -> dict[str, Any]:
    return await run_in_threadpool(service.delivery.preview, session_id)


@router.get(
    "/api/mutes",
    summary="Kinds muted now (read-only view of mutes.json)",
    description=(
        "The live entries of `mutes.json` (design §2.20), as the daemon reads them: expired "
        "timed mutes are left out. `project` null is every project; `until` null is until "
        "`tma1 unmute`; times are epoch ms. Change them with `tma1 mute` / `tma1 unmute`."
    ),
)
def mutes(service: ServiceDep) -> dict[str, Any]:
    delivery = service.delivery
    now = delivery.clock.now_ms()
    live = [m.as_json() for m in delivery.mutes.current() if m.until_ms is None or now < m.until_ms]
    return {"now": now, "mutes": live}
