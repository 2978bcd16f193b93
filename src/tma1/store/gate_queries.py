"""The reads behind the follow-rate gate: raw rows, judged by tma1.gates.follow.

Every function takes the emits since `since` with an id above `after_id` (the verdict
cache's floor) and a follow window of `window` tool calls. A window ends at `wend`, the ts
of the (`window`+1)-th tool call after the emit (None: not there yet); the window is
everything after the emit and before `wend`, so a compaction right after the 5th call is
still "within 5 calls", and calls sharing the very millisecond of the (`window`+1)-th
call are left out with it. The subqueries are short range scans of
ix_hook_events_session_type_ts (migration 0002).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from sqlalchemy import and_, case, func, or_, select, true
from sqlalchemy.sql.elements import ColumnElement

from tma1.store.db import Store
from tma1.store.schema import anomaly_emits, hook_events, messages

# An emit row: (id, ts, session_id, kind, stable_key, related_files JSON, acted, wend).
EmitRow = tuple[int, int, str, str, str | None, str | None, bool, int | None]
# A tool call in an emit's window: (emit id, ts, id, tool, file path, files JSON (only
# for apply_patch), command, command prefix).
CallRow = tuple[int, int, int, str | None, str | None, str | None, str | None, str | None]

_NO_END = 2**62  # the window end of an emit whose (window+1)-th call has not come yet


def _relevant_call(
    kind: Any, tool_name: Any, tools_by_kind: Mapping[str, Sequence[str]]
) -> ColumnElement[bool]:
    """This tool call can matter to this kind's follow action (fewer rows to fetch; the
    window itself is bounded by `wend`, which counts every tool)."""
    return or_(*(and_(kind == k, tool_name.in_(tools)) for k, tools in tools_by_kind.items()))


def _emit_windows(
    store: Store, since: int, window: int, after_id: int, kind: str | None = None
) -> Any:
    """CTE: the emits with `wend` and `acted` (whether any tool call followed at all)."""
    h = hook_events.alias("h")
    a = anomaly_emits.alias("a")

    def calls_after(session_id: Any, ts: Any) -> ColumnElement[bool]:
        return and_(
            h.c.session_id == session_id,
            h.c.event_type == "PreToolUse",
            h.c.ts > ts,
            store.mine(h.c.machine_id),
        )

    window_end = (
        select(h.c.ts)
        .where(calls_after(a.c.session_id, a.c.ts))
        # ts alone: the index order, and ties among calls do not change the ts found.
        .order_by(h.c.ts)
        .limit(1)
        .offset(window)
        .correlate(a)
        .scalar_subquery()
    )
    q = select(
        a.c.id,
        a.c.ts,
        a.c.session_id,
        a.c.kind,
        a.c.stable_key,
        a.c.related_files,
        window_end.label("wend"),
    ).where(a.c.ts >= since, a.c.id > after_id, store.mine(a.c.machine_id))
    if kind is not None:
        q = q.where(a.c.kind == kind)
    # MATERIALIZED: otherwise SQLite flattens the CTE into the join and, without table
    # statistics, may drive the join from a full scan of the events.
    w = q.cte("w").prefix_with("MATERIALIZED")
    # `acted`: a closed window had calls; only an open one is looked up again (one index
    # probe less for nearly every emit of a week: bench/bench_team_gates.py).
    anything = select(h.c.id).where(calls_after(w.c.session_id, w.c.ts)).correlate(w).exists()
    # Columns in EmitRow's order.
    m = select(
        w.c.id,
        w.c.ts,
        w.c.session_id,
        w.c.kind,
        w.c.stable_key,
        w.c.related_files,
        case((w.c.wend.is_not(None), true()), else_=anything).label("acted"),
        func.coalesce(w.c.wend, _NO_END).label("wend"),
    )
    return m.cte("m").prefix_with("MATERIALIZED")


def _end(wend: int | None) -> int | None:
    return None if wend is None or wend == _NO_END else int(wend)


def follow_rows(
    store: Store,
    since: int,
    window: int,
    after_id: int,
    tools_by_kind: Mapping[str, Sequence[str]],
) -> tuple[list[EmitRow], list[CallRow]]:
    """The emits, and the tool calls inside their windows of the tools that can matter to
    their kind (`tools_by_kind`): one pass over an outer join of the emits (with their
    window end) and the calls inside the window. Rows are unpacked as plain tuples: this
    is the gate's hot loop (10,000 emits in the benchmark)."""
    e = hook_events.alias("e")
    m = _emit_windows(store, since, window, after_id)
    q = select(
        *m.c,
        e.c.id,
        e.c.ts,
        e.c.tool_name,
        e.c.tool_file_path,
        # tool_files says more than tool_file_path only for multi-file patches.
        case((e.c.tool_name == "apply_patch", e.c.tool_files), else_=None),
        e.c.tool_command,
        e.c.tool_command_prefix,
    ).select_from(
        m.outerjoin(
            e,
            and_(
                e.c.session_id == m.c.session_id,
                e.c.event_type == "PreToolUse",
                e.c.ts > m.c.ts,
                e.c.ts < m.c.wend,
                _relevant_call(m.c.kind, e.c.tool_name, tools_by_kind),
                store.mine(e.c.machine_id),
            ),
        )
    )
    emits: dict[int, EmitRow] = {}
    calls: list[CallRow] = []
    for row in store.rows(q):
        emit_id, ts, sid, kind, key, related, acted, wend, ev_id, *call = row
        if emit_id not in emits:
            emits[emit_id] = (emit_id, ts, sid, kind, key, related, bool(acted), _end(wend))
        if ev_id is not None:
            ev_ts, *rest = call
            calls.append((emit_id, ev_ts, ev_id, *rest))
    return list(emits.values()), calls


def marker_rows(
    store: Store, since: int, window: int, after_id: int, kind: str, event_types: Collection[str]
) -> list[tuple[int, int, int, str, str | None]]:
    """(emit id, event id, ts, event type, metadata JSON) of the events of `event_types`
    inside the windows of the emits of `kind`."""
    e = hook_events.alias("e")
    cp = _emit_windows(store, since, window, after_id, kind)
    q = select(cp.c.id, e.c.id, e.c.ts, e.c.event_type, e.c.metadata).select_from(
        cp.join(
            e,
            and_(
                e.c.session_id == cp.c.session_id,
                e.c.event_type.in_(sorted(event_types)),
                e.c.ts > cp.c.ts,
                e.c.ts < cp.c.wend,
                store.mine(e.c.machine_id),
            ),
        )
    )
    return [(int(a), int(b), int(c), str(d), m) for a, b, c, d, m in store.rows(q)]


def compaction_rows(store: Store, since: int, after_id: int, kind: str) -> list[tuple[str, int]]:
    """(session, ts) of the transcript compactions after `since` in the sessions of the
    emits of `kind`."""
    sessions = select(anomaly_emits.c.session_id).where(
        anomaly_emits.c.ts >= since,
        anomaly_emits.c.id > after_id,
        anomaly_emits.c.kind == kind,
        store.mine(anomaly_emits.c.machine_id),
    )
    q = select(messages.c.session_id, messages.c.ts).where(
        messages.c.kind == "compaction",
        messages.c.ts > since,
        messages.c.session_id.in_(sessions),
        store.mine(messages.c.machine_id),
    )
    return [(str(sid), int(ts)) for sid, ts in store.rows(q)]


def failure_rows(
    store: Store, since: int, after_id: int, kind: str, lookback_ms: int
) -> list[tuple[int, str | None, str | None, str | None]]:
    """(emit id, stable key, command prefix, test ids JSON) of the failures in the
    `lookback_ms` up to each emit of `kind`, in its session. Failures are the rows with a
    failure_kind (exit or masked; design §2.8), read through the partial index
    ix_hook_events_session_failures_ts."""
    a = anomaly_emits.alias("a")
    e = hook_events.alias("e")
    q = (
        select(a.c.id, a.c.stable_key, e.c.tool_command_prefix, e.c.test_ids)
        .select_from(
            a.join(
                e,
                and_(
                    e.c.session_id == a.c.session_id,
                    e.c.failure_kind.is_not(None),
                    e.c.ts >= a.c.ts - lookback_ms,
                    e.c.ts <= a.c.ts,
                    store.mine(e.c.machine_id),
                ),
            )
        )
        .where(a.c.ts >= since, a.c.id > after_id, a.c.kind == kind, store.mine(a.c.machine_id))
    )
    return [(int(i), k, p, t) for i, k, p, t in store.rows(q)]


def count_emits(store: Store, since: int, up_to_id: int) -> int:
    q = (
        select(func.count())
        .select_from(anomaly_emits)
        .where(
            anomaly_emits.c.ts >= since,
            anomaly_emits.c.id <= up_to_id,
            store.mine(anomaly_emits.c.machine_id),
        )
    )
    return int(store.scalar(q))
