"""The emit log, labels and the three validation gates (design §2.13–2.14, §4).

Read-only over the store except the label POST; never runs the rules. The figures come
from `tma1.gates`, the same code `tma1 gates` prints.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Path, Query
from pydantic import BaseModel, Field

from tma1 import gates
from tma1.engine.anomaly import Anomaly, Channel
from tma1.engine.digest import digest, stop_reason
from tma1.engine.rules import SPECS
from tma1.gates import live
from tma1.server import ServiceDep
from tma1.server.scope import ScopeParam, scoped
from tma1.store import Store
from tma1.store import emits as emit_log

router = APIRouter(tags=["anomalies"])

KindParam = StrEnum("KindParam", {k: k for k in gates.KINDS})  # type: ignore[misc]
SeverityParam = StrEnum("SeverityParam", {s: s for s in gates.SEVERITIES})  # type: ignore[misc]
ChannelParam = StrEnum("ChannelParam", {c: c for c in gates.CHANNELS})  # type: ignore[misc]

MAX_ID = 2**63 - 1  # ids are 64-bit in both databases
Days = Annotated[int, Query(ge=1, le=365, description="UTC days back, today included")]


def delivered_text(store: Store, emit_id: int) -> dict[str, Any] | None:
    """The text the agent was given with this emit, rebuilt from the emit log.

    The emit log stores the findings, not the answer, so the answer is rebuilt with the
    very functions delivery used (`digest` for the context channels, `stop_reason` for a
    Stop block) from the rows written for the same answer: same session, channel and
    instant, in id order (the order `EmitLog.record` queued them). None: unknown id."""
    rows = emit_log.delivered_with(store, emit_id)
    if not rows:
        return None
    findings = [
        Anomaly(
            kind=r["kind"],
            severity=r["severity"],
            channel=r["channel"],
            evidence=r["evidence"],
            suggestion=r["suggestion"],
            related_files=tuple(gates.loads_list(r["related_files"])),
            session_id=r["session_id"],
            first_emitted_at=int(r["first_emitted_at"]),
        )
        for r in rows
    ]
    channel = rows[0]["channel"]
    stop = channel == Channel.STOP_BLOCK
    return {
        "id": emit_id,
        "channel": channel,
        "as": "stop_reason" if stop else "digest",
        "text": stop_reason(findings) if stop else digest(findings),
        "delivered_with": [int(r["id"]) for r in rows],
        "reconstructed": True,
    }


class LabelIn(BaseModel):
    label: Literal["tp", "fp", "clear"] = Field(
        description="tp (true positive), fp (false positive) or clear (remove the label)"
    )
    note: str | None = Field(default=None, max_length=4000)
    source: Literal["human", "agent"] = "human"


class LabelOut(BaseModel):
    id: int
    label: Literal["tp", "fp"] | None
    source: Literal["human", "agent"]


@router.get(
    "/api/anomalies/kinds",
    summary="Every rule's kind, in the registry's order, with what its spec declares",
)
def kinds() -> dict[str, Any]:
    """The dashboard's kind filter and gate cards read this: a rule added to
    `engine/rules/` shows there with nothing else changed (docs/rules.md)."""
    return {"kinds": [SPECS[k].describe() for k in gates.KINDS]}


@router.get("/api/anomalies", summary="Newest emits from the emit log (never runs rules)")
def list_anomalies(
    svc: ServiceDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    session_id: Annotated[str | None, Query(max_length=200)] = None,
    kind: KindParam | None = None,
    severity: SeverityParam | None = None,
    channel: ChannelParam | None = None,
    since_id: Annotated[
        int | None, Query(ge=0, le=MAX_ID, description="only emits with a larger id")
    ] = None,
    scope: ScopeParam = "machine",
) -> dict[str, Any]:
    emits = emit_log.list_emits(
        scoped(svc.store, scope),
        limit=limit,
        session_id=session_id or None,
        kind=kind.value if kind else None,
        severity=severity.value if severity else None,
        since_id=since_id,
        channel=channel.value if channel else None,
    )
    return {"emits": emits}


@router.post(
    "/api/anomalies/{emit_id}/label",
    summary="Label an emit TP or FP (or clear it); one label per emit and source",
    response_model=LabelOut,
    responses={
        404: {"description": "no emit with this id"},
        409: {"description": "another machine's emit: label it on that machine"},
    },
)
def label_anomaly(
    svc: ServiceDep,
    body: LabelIn,
    emit_id: Annotated[int, Path(ge=1, le=MAX_ID)],
) -> dict[str, Any]:
    try:
        out = emit_log.set_label(
            svc.store,
            emit_id,
            body.label,
            now_ms=svc.clock.now_ms(),
            source=body.source,
            note=body.note,
        )
    except emit_log.ForeignEmit as exc:
        raise HTTPException(status_code=409, detail=str(exc)) from None
    if out is None:
        raise HTTPException(status_code=404, detail=f"no emit with id {emit_id}")
    return out


@router.get(
    "/api/anomalies/{emit_id}/delivered",
    summary="The text the agent was given with this emit (digest or Stop reason)",
    description=(
        "Rebuilt from the emit log with the functions delivery uses, from every emit of "
        "the same answer (same session, channel and instant); `delivered_with` lists them."
    ),
    responses={404: {"description": "no emit with this id"}},
)
def delivered(svc: ServiceDep, emit_id: Annotated[int, Path(ge=1, le=MAX_ID)]) -> dict[str, Any]:
    out = delivered_text(svc.store, emit_id)
    if out is None:
        raise HTTPException(status_code=404, detail=f"no emit with id {emit_id}")
    return out


@router.get("/api/anomalies/budget", summary="Gate: emits per kind per UTC day vs a budget")
def budget(
    svc: ServiceDep,
    days: Days = gates.DEFAULT_DAYS,
    budget: Annotated[int, Query(ge=0, le=100_000)] = gates.DEFAULT_BUDGET,
    scope: ScopeParam = "machine",
) -> dict[str, Any]:
    return live.budget(
        scoped(svc.store, scope), now_ms=svc.clock.now_ms(), days=days, budget=budget
    )


@router.get(
    "/api/anomalies/follow-rate",
    summary="Gate: share of emits whose follow action came within `window` tool calls",
)
def follow_rate(
    svc: ServiceDep,
    days: Days = gates.DEFAULT_DAYS,
    window: Annotated[int, Query(ge=1, le=100, description="tool calls after the emit")] = (
        gates.DEFAULT_WINDOW
    ),
    scope: ScopeParam = "machine",
) -> dict[str, Any]:
    return live.follow_rate(
        scoped(svc.store, scope), now_ms=svc.clock.now_ms(), days=days, window=window
    )


@router.get(
    "/api/anomalies/precision",
    summary="Gate: TP share over the 50 newest labelled emits, human and agent labels",
)
def precision(
    svc: ServiceDep, days: Days = gates.DEFAULT_DAYS, scope: ScopeParam = "machine"
) -> dict[str, Any]:
    return live.precision(scoped(svc.store, scope), now_ms=svc.clock.now_ms(), days=days)


@router.get("/api/anomalies/sample", summary="The newest emits without a human label")
def sample(
    svc: ServiceDep,
    n: Annotated[int, Query(ge=1, le=500)] = gates.PRECISION_SAMPLE,
    source: Literal["human", "agent"] = "human",
    scope: ScopeParam = "machine",
) -> dict[str, Any]:
    return {"emits": emit_log.sample_unlabelled(scoped(svc.store, scope), n=n, source=source)}
