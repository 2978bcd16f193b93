"""`StoreWindows`, the live `WindowSource` (tma1.engine.ports): a session's window read
from the database, incrementally. Its replay peer is `tma1.replay.memory.MemoryWindows`.

Live, each hook event is committed before the engine may see it, and the window is read
back from the store. The last load of each session is kept: a reload within
`FULL_RELOAD_MS` only fetches rows with a newer id, and the session start and the context
epoch are remembered (design §2.1, §2.17).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from tma1.counters import Counters
from tma1.engine.checkruns import failing_at
from tma1.engine.context import context_threshold
from tma1.engine.window import (
    CHANGES_WINDOW_MS,
    EVENTS_WINDOW_MS,
    MAX_WINDOW_EVENTS,
    PRIOR_RUNS_MS,
    RuleConfig,
    SessionWindow,
)
from tma1.events import HookEvent
from tma1.store import Store

FULL_RELOAD_MS = 10 * 60_000  # a backstop only: hook events are never updated in place
ID_LOOKBACK = 256
_HELD_IDLE_MS = 10 * 60_000
_SWEEP_EVERY_MS = 60_000
# A session's start and epoch are remembered while it may still be detected on (the longest
# window); after that they are read again, as after a restart.
_IDLE_MS = CHANGES_WINDOW_MS
# Context epochs (`_context_epoch`): rows the transcript tailer writes late carry an older ts, so a
# look at what is new reaches this far back; a full look every FULL_RELOAD_MS bounds a miss.
EPOCH_LATE_MS = 10 * 60_000


def _key(e: HookEvent) -> tuple[int, int]:
    return (e.ts, e.id or 0)


@dataclass(slots=True)
class _Held:
    """The last events loaded for a session (replaced, never mutated in place)."""

    events: list[HookEvent]
    ids: set[int]
    max_id: int
    full_at: int
    since: int
    used_at: int = 0


class StoreWindows:
    """A `WindowSource` over `store`. Thread-safe."""

    def __init__(self, store: Store, *, config: RuleConfig, counters: Counters) -> None:
        self.store = store
        self.config = config
        self.counters = counters
        self._lock = threading.Lock()
        self._first_ts: dict[str, tuple[int, int]] = {}  # session → (first ts, last used)
        # session → (the project's checks open at its start, last used): fixed once read
        self._at_start: dict[str, tuple[dict[str, frozenset[str]], int]] = {}
        # session → (newest compaction or None, looked up to, last full look)
        self._epochs: dict[str, tuple[int | None, int, int]] = {}
        self._held: dict[str, _Held] = {}
        self._last_sweep = 0
        # SQLite has one writer at a time, so ids are assigned in commit order.
        self._id_lookback = 0 if store.dialect == "sqlite" else ID_LOOKBACK

    def window(self, session_id: str, now: int) -> SessionWindow:
        """One session's window: its events (incrementally, see `_events`), the project's
        file changes, the latest occupancy, the session start (cached) and, when the
        occupancy is past its threshold, the start of the context epoch."""
        events = self._events(session_id, now)
        project = next((e.project for e in reversed(events) if e.project), None)
        project = project or self.store.session_project(session_id, now)
        changes = (
            self.store.project_changes(project, now - CHANGES_WINDOW_MS, now) if project else []
        )
        usage = self.store.latest_usage(session_id, now)
        epoch = None
        if usage is not None and usage.occupancy >= context_threshold(
            usage, self.config.context_pressure_threshold
        ):
            # Only context_pressure reads the epoch, and only past its threshold.
            epoch = self._context_epoch(session_id, now)
        with self._lock:
            known = self._first_ts.get(session_id)
        first = known[0] if known else self.store.session_first_ts(session_id)
        with self._lock:
            if first is not None:
                self._first_ts[session_id] = (first, now)
            held_start = self._at_start.get(session_id)
        at_start = held_start[0] if held_start else None
        if at_start is None:
            at_start = self._failing_at(session_id, project, first)
        with self._lock:
            self._at_start[session_id] = (at_start, now)
            self._maybe_sweep(now)
        return SessionWindow(
            session_id=session_id,
            project=project,
            events=events,
            changes=changes,
            usage=usage,
            session_start_ts=first,
            epoch_start_ts=epoch,
            failing_at_start=at_start,
        )

    def _failing_at(
        self, session_id: str, project: str | None, first: int | None
    ) -> dict[str, frozenset[str]]:
        """The project's checks open when the session began, by the other sessions' runs
        (one read per session: what came before its start does not change)."""
        if project is None or first is None:
            return {}
        prior = [
            e
            for e in self.store.project_shell_results(project, first - PRIOR_RUNS_MS, first - 1)
            if e.session_id != session_id
        ]
        return failing_at(prior, first, project)

    def _context_epoch(self, session_id: str, now: int) -> int | None:
        """The session's newest compaction at or before `now` (`Store.latest_compaction_ts`).
        The last answer is kept: a later look only reads what is newer (minus
        `EPOCH_LATE_MS`), so a long session's usage rows are not walked on every
        detection; every `FULL_RELOAD_MS` it looks at everything again."""
        with self._lock:
            memo = self._epochs.get(session_id)
        if memo is None or now < memo[1] or not 0 <= now - memo[2] < FULL_RELOAD_MS:
            epoch = self.store.latest_compaction_ts(session_id, now)
            memo = (epoch, now, now)
        else:
            newer = self.store.latest_compaction_ts(
                session_id, now, since_ts=memo[1] - EPOCH_LATE_MS
            )
            epoch = max((t for t in (memo[0], newer) if t is not None), default=None)
            memo = (epoch, now, memo[2])
        with self._lock:
            self._epochs[session_id] = memo
        return epoch

    def _events(self, session_id: str, now: int) -> list[HookEvent]:
        """The session's events in [now - 60 min, now], ts ascending, at most the newest
        `MAX_WINDOW_EVENTS` of them (what is held per session is bounded).

        The last load is kept, and a reload within `FULL_RELOAD_MS` only fetches rows with
        a newer id (on PostgreSQL minus `ID_LOOKBACK`, for transactions that commit out of
        id order; duplicates are dropped by id). An event written late by the ingest outage
        queue gets a new id, so it is found too. Every `FULL_RELOAD_MS` the window is read
        afresh, which bounds any miss to that long.
        """
        since = now - EVENTS_WINDOW_MS
        with self._lock:
            held = self._held.get(session_id)
        if held is None or not 0 <= now - held.full_at < FULL_RELOAD_MS or since < held.since:
            rows = self.store.window_events(session_id, since)
            max_id = max((e.id or 0 for e in rows), default=0)
            rows = rows[-MAX_WINDOW_EVENTS:]  # the session cap: the newest events only
            held = _Held(
                events=rows,
                ids={e.id for e in rows if e.id is not None},
                max_id=max_id,
                full_at=now,
                since=since,
            )
            self.counters.inc("engine.window.full_loads")
        else:
            rows = self.store.window_events(
                session_id, since, after_id=held.max_id - self._id_lookback
            )
            fresh = [e for e in rows if e.id not in held.ids]
            events = held.events
            if fresh or (events and events[0].ts < since):
                events = [e for e in held.events if e.ts >= since] + fresh
                if fresh and held.events and _key(fresh[0]) < _key(held.events[-1]):
                    events.sort(key=_key)
                del events[:-MAX_WINDOW_EVENTS]  # the session cap, as on a full load
            held = _Held(
                events=events,
                ids={e.id for e in events if e.id is not None},
                max_id=max([held.max_id, *(e.id or 0 for e in fresh)]),
                full_at=held.full_at,
                since=since,
            )
        held.used_at = now
        with self._lock:
            self._held[session_id] = held
        if held.events and held.events[-1].ts > now:
            return [e for e in held.events if e.ts <= now]
        return list(held.events)

    def forget(self, session_id: str) -> None:
        """The session ended (SessionEnd): its window, start and epoch are only a cache of
        the store, and holding every ended session's hour until it idles out made memory
        grow with history (issue 31). A resumed session is read afresh."""
        with self._lock:
            self._held.pop(session_id, None)
            self._epochs.pop(session_id, None)
            self._first_ts.pop(session_id, None)
            self._at_start.pop(session_id, None)

    def _maybe_sweep(self, now: int) -> None:
        """Bound what is remembered (called with the lock held)."""
        if now - self._last_sweep < _SWEEP_EVERY_MS:
            return
        self._last_sweep = now
        self._held = {s: h for s, h in self._held.items() if now - h.used_at < _HELD_IDLE_MS}
        self._epochs = {s: e for s, e in self._epochs.items() if now - e[1] < _IDLE_MS}
        self._first_ts = {s: f for s, f in self._first_ts.items() if now - f[1] < _IDLE_MS}
        self._at_start = {s: f for s, f in self._at_start.items() if now - f[1] < _IDLE_MS}

    def health(self) -> dict[str, object]:
        with self._lock:
            return {"held_windows": len(self._held)}
