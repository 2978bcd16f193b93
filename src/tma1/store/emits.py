"""The emit log and its labels: listing, one emit, labelling, and the gates' counts."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import and_, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from tma1.engine.anomaly import LABEL_SOURCES, LABELS
from tma1.store.db import Store
from tma1.store.events import json_or_default
from tma1.store.schema import anomaly_emits, anomaly_labels

DAY_MS = 86_400_000

Labels = dict[str, dict[str, Any]]  # source → {"label", "note", "ts"}


def _emit_dict(m: Mapping[Any, Any], labels: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    human = labels.get("human")
    agent = labels.get("agent")
    chosen, source = (human, "human") if human else (agent, "agent") if agent else (None, None)
    related = json_or_default(m["related_files"], [])
    return {
        "id": int(m["id"]),
        "ts": int(m["ts"]),
        "session_id": m["session_id"],
        "kind": m["kind"],
        "severity": m["severity"],
        "channel": m["channel"],
        "evidence": m["evidence"],
        "suggestion": m["suggestion"],
        "related_files": [str(v) for v in related] if isinstance(related, list) else [],
        "first_emitted_at": int(m["first_emitted_at"]),
        "stable_key": m["stable_key"],
        "label": chosen["label"] if chosen else None,
        "label_source": source,
        "label_note": chosen["note"] if chosen else None,
        "labels": {k: dict(v) for k, v in labels.items()},
    }


def labels_for(store: Store, ids: Sequence[int]) -> dict[int, Labels]:
    """Each emit's labels, by source."""
    out: dict[int, Labels] = defaultdict(dict)
    if not ids:
        return out
    q = select(anomaly_labels).where(anomaly_labels.c.emit_id.in_(list(ids)))
    for r in store.rows(q):
        out[int(r.emit_id)][r.source] = {"label": r.label, "note": r.note, "ts": int(r.ts)}
    return out


def _with_labels(store: Store, rows: Sequence[Mapping[Any, Any]]) -> list[dict[str, Any]]:
    labels = labels_for(store, [int(m["id"]) for m in rows])
    return [_emit_dict(m, labels.get(int(m["id"]), {})) for m in rows]


def list_emits(
    store: Store,
    *,
    limit: int = 100,
    session_id: str | None = None,
    kind: str | None = None,
    severity: str | None = None,
    since_id: int | None = None,
    since_ts: int | None = None,
    channel: str | None = None,
) -> list[dict[str, Any]]:
    """Newest first, straight from the emit log (never runs rules); the store's machine's
    (a team view's: every machine's)."""
    q = select(anomaly_emits).where(store.mine(anomaly_emits.c.machine_id))
    if session_id:
        q = q.where(anomaly_emits.c.session_id == session_id)
    if kind:
        q = q.where(anomaly_emits.c.kind == kind)
    if severity:
        q = q.where(anomaly_emits.c.severity == severity)
    if channel:
        q = q.where(anomaly_emits.c.channel == channel)
    if since_id is not None:
        q = q.where(anomaly_emits.c.id > since_id)
    if since_ts is not None:
        q = q.where(anomaly_emits.c.ts >= since_ts)
    q = q.order_by(anomaly_emits.c.ts.desc(), anomaly_emits.c.id.desc()).limit(limit)
    rows = [r._mapping for r in store.rows(q)]
    return _with_labels(store, rows)


class ForeignEmit(ValueError):
    """The emit was stored by another machine (or, on a team database, by none known): its
    labels are written where it was emitted. The team scope is read-only."""

    def __init__(self, emit_id: int, machine_id: str | None) -> None:
        self.emit_id = emit_id
        self.machine_id = machine_id
        whose = f"machine {machine_id}" if machine_id else "no known machine (before 0005)"
        super().__init__(
            f"emit {emit_id} was stored by {whose}, not this one: label it on the machine "
            "whose agent it was told to (the team scope is read-only)"
        )


def set_label(
    store: Store,
    emit_id: int,
    label: str,
    *,
    now_ms: int,
    source: str = "human",
    note: str | None = None,
) -> dict[str, Any] | None:
    """Upsert the (emit, source) label; `clear` removes it. None when the emit is unknown;
    ForeignEmit when another machine stored it (a store of no machine labels any)."""
    if label not in (*LABELS, "clear"):
        raise ValueError(f"label must be one of tp, fp, clear (got {label!r})")
    if source not in LABEL_SOURCES:
        raise ValueError(f"source must be one of human, agent (got {source!r})")
    where = and_(anomaly_labels.c.emit_id == emit_id, anomaly_labels.c.source == source)
    for _attempt in range(2):
        try:
            with store.begin() as conn:
                found = conn.execute(
                    select(anomaly_emits.c.machine_id).where(anomaly_emits.c.id == emit_id)
                ).first()
                if found is None:
                    return None
                if not store.owns(found.machine_id):
                    raise ForeignEmit(emit_id, found.machine_id)
                if label == "clear":
                    conn.execute(delete(anomaly_labels).where(where))
                    return {"id": emit_id, "label": None, "source": source}
                changed = conn.execute(
                    update(anomaly_labels).where(where).values(label=label, note=note, ts=now_ms)
                ).rowcount
                if not changed:
                    conn.execute(
                        insert(anomaly_labels).values(
                            emit_id=emit_id, source=source, label=label, note=note, ts=now_ms
                        )
                    )
            return {"id": emit_id, "label": label, "source": source}
        except IntegrityError:
            # Two writers raced to insert the same (emit, source): the second one updates.
            continue
    raise RuntimeError("label upsert kept colliding")


def sample_unlabelled(store: Store, *, n: int, source: str = "human") -> list[dict[str, Any]]:
    """The newest emits without a label from `source`: the next ones to judge."""
    labelled = select(anomaly_labels.c.emit_id).where(anomaly_labels.c.source == source)
    q = (
        select(anomaly_emits)
        .where(anomaly_emits.c.id.not_in(labelled), store.mine(anomaly_emits.c.machine_id))
        .order_by(anomaly_emits.c.ts.desc(), anomaly_emits.c.id.desc())
        .limit(n)
    )
    rows = [r._mapping for r in store.rows(q)]
    return _with_labels(store, rows)


def emit_day_counts(store: Store, since: int) -> list[tuple[str, int, int]]:
    """(kind, UTC day index, emits) since `since`: the budget gate's input."""
    day = (anomaly_emits.c.ts // DAY_MS).label("day")
    q = (
        select(anomaly_emits.c.kind, day, func.count().label("n"))
        .where(anomaly_emits.c.ts >= since, store.mine(anomaly_emits.c.machine_id))
        .group_by(anomaly_emits.c.kind, day)
    )
    return [(str(r.kind), int(r.day), int(r.n)) for r in store.rows(q)]


def labelled_since(store: Store, since: int) -> list[tuple[str, str, str]]:
    """(source, kind, label) of the labelled emits since `since`, newest emit first: the
    precision gate's input."""
    q = (
        select(anomaly_labels.c.source, anomaly_labels.c.label, anomaly_emits.c.kind)
        .select_from(
            anomaly_labels.join(anomaly_emits, anomaly_emits.c.id == anomaly_labels.c.emit_id)
        )
        .where(anomaly_emits.c.ts >= since, store.mine(anomaly_emits.c.machine_id))
        .order_by(anomaly_emits.c.ts.desc(), anomaly_emits.c.id.desc())
    )
    return [(str(r.source), str(r.kind), str(r.label)) for r in store.rows(q)]


def delivered_with(store: Store, emit_id: int) -> list[dict[str, Any]]:
    """The emit-log rows one answer carried together with `emit_id`, in delivery order
    (ids ascending): same session, channel and instant. [] for an unknown id."""
    e, me = anomaly_emits, anomaly_emits.alias("me")
    q = (
        select(e)
        .join(
            me,
            and_(
                me.c.session_id == e.c.session_id,
                me.c.ts == e.c.ts,
                me.c.channel == e.c.channel,
                me.c.machine_id.is_not_distinct_from(e.c.machine_id),
            ),
        )
        .where(me.c.id == emit_id, store.mine(me.c.machine_id))
        .order_by(e.c.id)
    )
    return [dict(r._mapping) for r in store.rows(q)]
