"""The three gates over a store: the inputs come from tma1.store, the figures from the
pure modules beside this one, so `tma1 gates`, the dashboard and a replay that keeps its
database compute them with the same code.

The follow-rate keeps the verdicts of emits whose window has closed (`_FollowCache`): the
dashboard polls the gate every 10 s inside the daemon that also answers hooks."""

from __future__ import annotations

import threading
import weakref
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from tma1.engine.following import FAR_FUTURE, MARKER_EVENTS, Call, EmitRef
from tma1.gates.budget import budget_report
from tma1.gates.common import (
    DAY_MS,
    DEFAULT_BUDGET,
    DEFAULT_DAYS,
    DEFAULT_WINDOW,
    PRECISION_SAMPLE,
    loads_list,
    since_for_days,
)
from tma1.gates.follow import (
    MARKER_KINDS,
    TEST_LOOKBACKS,
    TOOLS_BY_KIND,
    FollowInputs,
    emit_ref,
    follow_report,
    judge,
    test_commands_from_rows,
)
from tma1.gates.precision import precision_report
from tma1.store import Store
from tma1.store.emits import emit_day_counts, labelled_since
from tma1.store.gate_queries import (
    compaction_rows,
    count_emits,
    failure_rows,
    follow_rows,
    marker_rows,
)

# Follow-rate verdicts of emits this old are final even if their window never filled up.
SETTLE_MS = DAY_MS


def budget(
    store: Store, *, now_ms: int, days: int = DEFAULT_DAYS, budget: int = DEFAULT_BUDGET
) -> dict[str, Any]:
    since = since_for_days(now_ms, days)
    rows = emit_day_counts(store, since)
    return budget_report(rows, since=since, now_ms=now_ms, days=days, budget=budget)


def precision(
    store: Store, *, now_ms: int, days: int = DEFAULT_DAYS, sample: int = PRECISION_SAMPLE
) -> dict[str, Any]:
    since = since_for_days(now_ms, days)
    rows = labelled_since(store, since)
    return precision_report(rows, since=since, now_ms=now_ms, days=days, sample=sample)


def judge_stored(
    store: Store, since: int, window: int, after_id: int = 0
) -> list[tuple[EmitRef, bool]]:
    """(emit, followed) of the stored emits since `since` with an id above `after_id`."""
    emit_rows, call_rows = follow_rows(store, since, window, after_id, TOOLS_BY_KIND)
    out = FollowInputs()
    for emit_id, ts, sid, kind, key, related, acted, wend in emit_rows:
        end = FAR_FUTURE if wend is None else wend
        out.emits.append(
            emit_ref(emit_id, ts, sid, kind, key, related, acted=acted, window_end=end)
        )
    calls: dict[int, list[Call]] = defaultdict(list)
    for emit_id, ts, ev_id, tool, path, files, command, prefix in call_rows:
        paths = tuple(loads_list(files)) if files else ()
        calls[emit_id].append(Call(ts, ev_id, "PreToolUse", tool, path, paths, command, prefix))
    # The other inputs, for the kinds whose follow action needs them (`RuleSpec.follow`).
    compactions: dict[str, list[int]] = defaultdict(list)
    for kind in MARKER_KINDS:
        for emit_id, ev_id, ts, event_type, meta in marker_rows(
            store, since, window, after_id, kind, MARKER_EVENTS
        ):
            calls[emit_id].append(Call(ts, ev_id, event_type, metadata=meta))
        for sid, ts in compaction_rows(store, since, after_id, kind):
            compactions[sid].append(ts)
    out.calls = dict(calls)
    out.compactions = {sid: sorted(seen) for sid, seen in compactions.items()}
    failures = [
        row
        for kind, lookback in TEST_LOOKBACKS.items()
        for row in failure_rows(store, since, after_id, kind, lookback)
    ]
    out.test_commands = test_commands_from_rows(failures)
    return judge(out, window)


@dataclass
class _FollowCache:
    """Verdicts of emits whose window has closed, per store and (days, window).

    A closed window (its (window+1)-th tool call exists) cannot change: events arrive
    with the server's clock, after everything already stored. An emit older than
    SETTLE_MS whose session went quiet is settled too (a session resumed a day later could
    in principle still follow it; we accept that). `floor`: every emit with a larger id
    may still be open.
    """

    floor: int = 0
    verdicts: dict[int, tuple[int, str, bool]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


_FOLLOW_CACHES: weakref.WeakKeyDictionary[Store, dict[tuple[int, int], _FollowCache]] = (
    weakref.WeakKeyDictionary()
)
_CACHES_LOCK = threading.Lock()
_MAX_CACHES_PER_STORE = 8


def _follow_cache(store: Store, days: int, window: int) -> _FollowCache:
    with _CACHES_LOCK:
        per_store = _FOLLOW_CACHES.setdefault(store, {})
        cache = per_store.pop((days, window), None) or _FollowCache()
        per_store[(days, window)] = cache  # most recently used last
        while len(per_store) > _MAX_CACHES_PER_STORE:
            del per_store[next(iter(per_store))]  # parameters nobody asks for any more
        return cache


def follow_rate(
    store: Store,
    *,
    now_ms: int,
    days: int = DEFAULT_DAYS,
    window: int = DEFAULT_WINDOW,
    use_cache: bool = True,
) -> dict[str, Any]:
    since = since_for_days(now_ms, days)
    # Without the cache: an empty one, dropped after this call (every emit judged afresh).
    cache = _follow_cache(store, days, window) if use_cache else _FollowCache()
    with cache.lock:
        cached = [(kind, ok) for ts, kind, ok in cache.verdicts.values() if ts >= since]
        if cache.floor and count_emits(store, since, cache.floor) != len(cached):
            # Rows under the floor went away (purge) or appeared (an import): start over.
            cache.floor, cache.verdicts, cached = 0, {}, []
        judged = judge_stored(store, since, window, cache.floor)
        # Advance the floor over the leading run of closed windows (ids ascending).
        settled_before = now_ms - SETTLE_MS
        for ref, ok in sorted(judged, key=lambda j: j[0].id):
            if not (ref.window_closed or ref.ts < settled_before):
                break
            cache.verdicts[ref.id] = (ref.ts, ref.kind, ok)
            cache.floor = ref.id
        for emit_id in [i for i, v in cache.verdicts.items() if v[0] < since]:
            del cache.verdicts[emit_id]  # fell out of the range for good
        fresh = [(r.kind, ok) for r, ok in judged]
    return follow_report(cached + fresh, since=since, now_ms=now_ms, days=days, window=window)


def all_gates(
    store: Store,
    *,
    now_ms: int,
    days: int = DEFAULT_DAYS,
    budget_per_day: int = DEFAULT_BUDGET,
    window: int = DEFAULT_WINDOW,
) -> dict[str, Any]:
    return {
        "budget": budget(store, now_ms=now_ms, days=days, budget=budget_per_day),
        "follow_rate": follow_rate(store, now_ms=now_ms, days=days, window=window),
        "precision": precision(store, now_ms=now_ms, days=days),
    }
