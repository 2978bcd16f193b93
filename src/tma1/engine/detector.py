"""The Detector: load a `SessionWindow`, run every rule, cache the candidates (design §2.1, §2.5).

The candidate set is what the rules say *before* suppression. It is cached 30 s (clock
time) per session and dropped on every event of the session and on every file change in
its project. A rule that raises is logged, counted (`engine.rule_errors.<kind>`) and
skipped: one broken rule never silences the others.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from tma1.clock import Clock
from tma1.counters import Counters
from tma1.engine.anomaly import Anomaly
from tma1.engine.context import context_threshold
from tma1.engine.window import (
    CHANGES_WINDOW_MS,
    EVENTS_WINDOW_MS,
    MAX_WINDOW_EVENTS,
    RuleConfig,
    SessionWindow,
)
from tma1.events import HookEvent
from tma1.store import Store

log = logging.getLogger("tma1.engine")

Rule = Callable[[SessionWindow, int, RuleConfig], list[Anomaly]]


class WindowSource(Protocol):
    """Where windows come from when not from the store: replay keeps every session in
    memory (`tma1.replay.memory`) and hands the Detector the same `SessionWindow` the
    store would have given at `now`."""

    def window(self, session_id: str, now: int) -> SessionWindow: ...


CACHE_TTL_MS = 30_000
FULL_RELOAD_MS = 10 * 60_000  # a backstop only: hook events are never updated in place
ID_LOOKBACK = 256
_HELD_IDLE_MS = 10 * 60_000
# How long an invalidation mark must outlive any detection that was running when it came.
_DROP_MARK_TTL_MS = 5 * 60_000
_SWEEP_EVERY_MS = 60_000
_IDLE_MS = 24 * 3600_000
# Context epochs (`_context_epoch`): rows the transcript tailer writes late carry an older ts, so a
# look at what is new reaches this far back; a full look every FULL_RELOAD_MS bounds a miss.
EPOCH_LATE_MS = 10 * 60_000


def load_default_rules() -> dict[str, Rule]:
    """The six rules of `tma1.engine.rules`, or none (logged) when that module is unusable."""
    try:
        from tma1.engine.rules import RULES
    except Exception:
        log.exception("the rule set (tma1.engine.rules) could not be imported; no rules run")
        return {}
    return dict(RULES)


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


@dataclass(frozen=True, slots=True)
class Detection:
    window: SessionWindow
    candidates: tuple[Anomaly, ...]  # of every rule run so far on this window
    computed_at: int
    cached: bool = False
    by_kind: Mapping[str, tuple[Anomaly, ...]] = field(default_factory=dict)


# The channels each rule can deliver on (its `RuleSpec`). A delivery on one channel only
# needs the rules that can produce findings for it: a Stop runs two rules, a PostToolUse
# none of the six. A rule without a spec (one a test or a plugin registers) runs for
# every channel. The candidate cache is per rule, so the preview (all rules) and later
# deliveries reuse whatever already ran on the same window.
def _rule_channels() -> dict[str, frozenset[str]]:
    try:
        from tma1.engine.rules import SPECS
    except Exception:
        return {}  # load_default_rules logs it; every rule then serves every channel
    return {kind: spec.channels for kind, spec in SPECS.items()}


RULE_CHANNELS: dict[str, frozenset[str]] = _rule_channels()


def rule_serves(kind: str, channel: str | None) -> bool:
    declared = RULE_CHANNELS.get(kind)
    return channel is None or declared is None or channel in declared


def run_rule(
    kind: str,
    rule: Rule,
    window: SessionWindow,
    now: int,
    config: RuleConfig,
    *,
    on_error: Callable[[str, BaseException], None] | None = None,
) -> tuple[Anomaly, ...]:
    """One rule over one window; a failing rule is reported and yields nothing."""
    try:
        found = rule(window, now, config)
        for a in found:
            if not isinstance(a, Anomaly):
                raise TypeError(f"rule {kind} returned {type(a).__name__}, not Anomaly")
    except Exception as exc:
        if on_error is not None:
            on_error(kind, exc)
        return ()
    return tuple(a if a.session_id else replace(a, session_id=window.session_id) for a in found)


def run_rules(
    rules: Mapping[str, Rule],
    window: SessionWindow,
    now: int,
    config: RuleConfig,
    *,
    on_error: Callable[[str, BaseException], None] | None = None,
) -> list[Anomaly]:
    """Every rule over one window; a failing rule is reported and skipped."""
    out: list[Anomaly] = []
    for kind, rule in rules.items():
        out.extend(run_rule(kind, rule, window, now, config, on_error=on_error))
    return out


class Detector:
    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        config: RuleConfig,
        counters: Counters,
        rules: Mapping[str, Rule] | None = None,
        source: WindowSource | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.config = config
        self.counters = counters
        self.source = source
        self._rules: dict[str, Rule] | None = dict(rules) if rules is not None else None
        # Per rule set (a new set replaces the dict): channel → whether any rule serves it.
        self._serves: tuple[dict[str, Rule], dict[str, bool]] | None = None
        self._lock = threading.Lock()
        self._cache: dict[str, Detection] = {}
        self._epoch = 0
        self._dropped: dict[str, tuple[int, int]] = {}  # session → (epoch, clock ms)
        self._projects: dict[str, set[str]] = {}
        self._session_project: dict[str, str] = {}
        self._first_ts: dict[str, tuple[int, int]] = {}  # session → (first ts, last used)
        # session → (newest compaction or None, looked up to, last full look)
        self._epochs: dict[str, tuple[int | None, int, int]] = {}
        self._held: dict[str, _Held] = {}
        self._last_sweep = 0
        # SQLite has one writer at a time, so ids are assigned in commit order.
        self._id_lookback = 0 if store.dialect == "sqlite" else ID_LOOKBACK

    # --- rules ------------------------------------------------------------------------

    @property
    def rules(self) -> dict[str, Rule]:
        if self._rules is None:
            self._rules = load_default_rules()
        return self._rules

    def set_rules(self, rules: Mapping[str, Rule]) -> None:
        """Replace the rule set (tests register extra rules; replay may pick a subset)."""
        with self._lock:
            self._rules = dict(rules)
            self._cache.clear()

    def _rule_failed(self, kind: str, exc: BaseException) -> None:
        self.counters.inc(f"engine.rule_errors.{kind}")
        log.error("rule %s failed; skipped", kind, exc_info=exc)

    # --- loading ----------------------------------------------------------------------

    def load_window(self, session_id: str, now: int) -> SessionWindow:
        """One session's window: its events (incrementally, see `_events`), the project's
        file changes, the latest occupancy, the session start (cached) and, when the
        occupancy is past its threshold, the start of the context epoch."""
        if self.source is not None:
            return self.source.window(session_id, now)
        events = self._events(session_id, now)
        project = next((e.project for e in reversed(events) if e.project), None)
        if project is None:
            project = self.store.session_project(session_id, now)
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
        first = known[0] if known else None
        if first is None:
            first = self.store.session_first_ts(session_id)
        if first is not None:
            with self._lock:
                self._first_ts[session_id] = (first, now)
        return SessionWindow(
            session_id=session_id,
            project=project,
            events=events,
            changes=changes,
            usage=usage,
            session_start_ts=first,
            epoch_start_ts=epoch,
        )

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
            known = memo[0]
            epoch = newer if known is None or (newer is not None and newer > known) else known
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

    # --- detection --------------------------------------------------------------------

    def serves(self, channel: str) -> bool:
        """Whether any rule can produce findings for `channel` (else skip detection)."""
        rules = self.rules
        known = self._serves
        if known is None or known[0] is not rules:
            known = self._serves = (rules, {})
        hit = known[1].get(channel)
        if hit is None:
            hit = known[1][channel] = any(rule_serves(k, channel) for k in rules)
        return hit

    def detect(
        self, session_id: str, now: int | None = None, *, channel: str | None = None
    ) -> Detection:
        """Candidates for `session_id` from the rules that serve `channel` (None: all),
        from the cache when it is fresh and those rules already ran on it."""
        now = self.clock.now_ms() if now is None else now
        rules = self.rules
        wanted = [k for k in rules if rule_serves(k, channel)]
        with self._lock:
            hit = self._cache.get(session_id)
            if hit is not None and not 0 <= now - hit.computed_at < CACHE_TTL_MS:
                hit = None
            if hit is not None and all(k in hit.by_kind for k in wanted):
                self.counters.inc("engine.detect.warm")
                return replace(hit, cached=True)
            start_epoch = self._epoch
        self.counters.inc("engine.detect.cold")
        if hit is not None:
            # Same window, same `now` as the rules that already ran on it.
            window, at, by_kind = hit.window, hit.computed_at, dict(hit.by_kind)
        else:
            window, at, by_kind = self.load_window(session_id, now), now, {}
        for kind in wanted:
            if kind not in by_kind:
                by_kind[kind] = run_rule(
                    kind, rules[kind], window, at, self.config, on_error=self._rule_failed
                )
        candidates = tuple(a for k in rules if k in by_kind for a in by_kind[k])
        det = Detection(window=window, candidates=candidates, computed_at=at, by_kind=by_kind)
        with self._lock:
            dropped = self._dropped.get(session_id)
            # An invalidation that arrived while we were loading means our window may
            # miss that event: use the result once, but don't cache it.
            if dropped is None or dropped[0] <= start_epoch:
                self._cache[session_id] = det
            if window.project:
                old = self._session_project.get(session_id)
                if old != window.project:
                    if old is not None:
                        self._projects.get(old, set()).discard(session_id)
                    self._session_project[session_id] = window.project
                    self._projects.setdefault(window.project, set()).add(session_id)
            self._maybe_sweep(now)
        return det

    def invalidate(self, session_id: str) -> None:
        with self._lock:
            self._epoch += 1
            self._cache.pop(session_id, None)
            self._dropped[session_id] = (self._epoch, self.clock.now_ms())

    def invalidate_project(self, project: str) -> None:
        with self._lock:
            sessions = list(self._projects.get(project, ()))
        for s in sessions:
            self.invalidate(s)

    def sessions_of(self, project: str) -> set[str]:
        with self._lock:
            return set(self._projects.get(project, ()))

    def _maybe_sweep(self, now: int) -> None:
        """Bound the bookkeeping (called with the lock held)."""
        if now - self._last_sweep < _SWEEP_EVERY_MS:
            return
        self._last_sweep = now
        for s in [s for s, d in self._cache.items() if now - d.computed_at >= CACHE_TTL_MS]:
            del self._cache[s]
        for s in [s for s, h in self._held.items() if now - h.used_at >= _HELD_IDLE_MS]:
            del self._held[s]
        for s in [s for s, (_, t) in self._dropped.items() if now - t >= _DROP_MARK_TTL_MS]:
            del self._dropped[s]
        for s in [s for s, (_, seen, _) in self._epochs.items() if now - seen >= _IDLE_MS]:
            del self._epochs[s]
        for s in [s for s, (_, used) in self._first_ts.items() if now - used >= _IDLE_MS]:
            del self._first_ts[s]
            project = self._session_project.pop(s, None)
            if project is not None:
                members = self._projects.get(project)
                if members is not None:
                    members.discard(s)
                    if not members:
                        del self._projects[project]

    def health(self) -> dict[str, object]:
        with self._lock:
            return {
                "rules": sorted(self._rules) if self._rules is not None else "not loaded",
                "cached_sessions": len(self._cache),
                "held_windows": len(self._held),
                "known_projects": len(self._projects),
            }
