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

from tma1.clock import Clock
from tma1.counters import Counters
from tma1.engine.anomaly import Anomaly
from tma1.engine.ports import WindowSource
from tma1.engine.rules import RULES, SPECS
from tma1.engine.spec import Rule
from tma1.engine.window import CHANGES_WINDOW_MS, RuleConfig, SessionWindow

log = logging.getLogger("tma1.engine")

CACHE_TTL_MS = 30_000
# How long an invalidation mark must outlive any detection that was running when it came.
_DROP_MARK_TTL_MS = 5 * 60_000
_SWEEP_EVERY_MS = 60_000
# Past the longest window (a project's changes: 90 min) nothing of an idle session is read.
_IDLE_MS = CHANGES_WINDOW_MS


@dataclass(frozen=True, slots=True)
class Detection:
    window: SessionWindow
    candidates: tuple[Anomaly, ...]  # of every rule run so far on this window
    computed_at: int
    cached: bool = False
    by_kind: Mapping[str, tuple[Anomaly, ...]] = field(default_factory=dict)


def rule_serves(kind: str, channel: str | None) -> bool:
    """A delivery on one channel only needs the rules whose `RuleSpec` declares it: a Stop
    runs two rules, a PostToolUse none of the six. A rule without a spec (one a test or a
    plugin registers) runs for every channel. The candidate cache is per rule, so the
    preview (all rules) and later deliveries reuse whatever already ran on the same window."""
    spec = SPECS.get(kind)
    return channel is None or spec is None or channel in spec.channels


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
    """Runs the rules over the windows `source` gives (live: the store; replay: memory)."""

    def __init__(
        self,
        *,
        source: WindowSource,
        clock: Clock,
        config: RuleConfig,
        counters: Counters,
        rules: Mapping[str, Rule] | None = None,
    ) -> None:
        self.source = source
        self.clock = clock
        self.config = config
        self.counters = counters
        self.rules = dict(rules if rules is not None else RULES)
        # channel → whether any rule serves it: every hook asks (replay: 50,000 times a
        # month), and asking every rule each time was ~3 % of a month's replay.
        self._serves: dict[str, bool] = {}
        self._lock = threading.Lock()
        self._cache: dict[str, Detection] = {}
        self._epoch = 0
        self._dropped: dict[str, tuple[int, int]] = {}  # session → (epoch, clock ms)
        self._session_project: dict[str, tuple[str, int]] = {}  # session → (project, last used)
        self._last_sweep = 0

    def set_rules(self, rules: Mapping[str, Rule]) -> None:
        """Replace the rule set (tests register extra rules; replay may pick a subset)."""
        with self._lock:
            self.rules = dict(rules)
            self._serves.clear()
            self._cache.clear()

    def _rule_failed(self, kind: str, exc: BaseException) -> None:
        self.counters.inc(f"engine.rule_errors.{kind}")
        log.error("rule %s failed; skipped", kind, exc_info=exc)

    def serves(self, channel: str) -> bool:
        """Whether any rule can produce findings for `channel` (else skip detection)."""
        hit = self._serves.get(channel)
        if hit is None:
            hit = self._serves[channel] = any(rule_serves(k, channel) for k in self.rules)
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
            window, at, by_kind = self.source.window(session_id, now), now, {}
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
                self._session_project[session_id] = (window.project, now)
            self._maybe_sweep(now)
        return det

    def invalidate(self, session_id: str) -> None:
        with self._lock:
            self._epoch += 1
            self._cache.pop(session_id, None)
            self._dropped[session_id] = (self._epoch, self.clock.now_ms())

    def forget(self, session_id: str) -> None:
        """The session ended: nothing of it stays cached here or in the window source (a
        detection still running may not cache its result either, as after `invalidate`)."""
        self.invalidate(session_id)
        with self._lock:
            self._session_project.pop(session_id, None)
        self.source.forget(session_id)

    def invalidate_project(self, project: str) -> None:
        with self._lock:
            sessions = [s for s, (p, _) in self._session_project.items() if p == project]
        for s in sessions:
            self.invalidate(s)

    def _maybe_sweep(self, now: int) -> None:
        """Bound the bookkeeping (called with the lock held)."""
        if now - self._last_sweep < _SWEEP_EVERY_MS:
            return
        self._last_sweep = now
        self._cache = {s: d for s, d in self._cache.items() if now - d.computed_at < CACHE_TTL_MS}
        self._dropped = {s: d for s, d in self._dropped.items() if now - d[1] < _DROP_MARK_TTL_MS}
        self._session_project = {
            s: v for s, v in self._session_project.items() if now - v[1] < _IDLE_MS
        }

    def health(self) -> dict[str, object]:
        with self._lock:
            return {
                "rules": sorted(self.rules),
                "cached_sessions": len(self._cache),
                "known_projects": len({p for p, _ in self._session_project.values()}),
            } | self.source.health()
