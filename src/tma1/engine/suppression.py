"""Suppression with resolution (seed's four cases; design §2.3–2.5).

State is kept per (session, stable key). `decide` is the pure decision step:

1. **Fresh key** → emit, stamping `first_emitted_at = now`.
2. **Same key, within 10 min of the last emit, no resolution since** → silent.
3. **Same key, resolution observed since the last emit** → the emit state is reset; the
   finding emits again (fresh `first_emitted_at`) only when its `last_evidence_ts` is newer
   than the resolving event, otherwise it stays silent until such evidence arrives.
4. **Same key, 10 min or more after the last emit** → emit, keeping `first_emitted_at` —
   except a `stop_block` finding with no evidence newer than its last emit (issue 15,
   pattern 7: a Stop block repeated 10 minutes later with stale evidence re-tells the
   agent what it already knows; it re-blocks only on a newer failure).

Besides the four cases: `context_pressure` is one-shot per stable key — its subject names
the context epoch, so once per epoch (design §2.17); and (design §2.7) new
external file changes since the last time we told the agent about external changes are
something new, so an `external_modified_during_session` finding whose evidence is newer
than its last emit is delivered even inside the 10-minute window.

Resolution checks (`resolution.py`) read the session window only, and run outside the
lock: `evaluate` snapshots the state under the lock, checks and decides outside it, and
`commit` re-decides under the lock any key another delivery changed in between.
"Emitted means delivered": only `commit` advances state, and only for the findings the
caller hands to the agent; `evaluate` alone (the preview) never changes anything.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tma1.clock import MINUTE_MS
from tma1.engine.anomaly import SEVERITY_RANK, Anomaly, Channel, Severity, stable_key
from tma1.engine.rules import SPECS
from tma1.engine.window import SessionWindow

SUPPRESSION_WINDOW_MS = 10 * MINUTE_MS  # a constant on purpose: config must never disable it
IDLE_EVICT_MS = 24 * 60 * MINUTE_MS
REBUILD_HORIZON_MS = 24 * 60 * MINUTE_MS
# Read from the rules' specs (design §5): a rule declares these once.
ONE_SHOT_KINDS = frozenset(k for k, spec in SPECS.items() if spec.one_shot)
NOVEL_EVIDENCE_KINDS = frozenset(k for k, spec in SPECS.items() if spec.novel_evidence)


@dataclass(frozen=True, slots=True)
class KeyState:
    last_emit_ts: int | None = None  # None after a resolution reset
    first_emitted_at: int | None = None
    resolved_at: int | None = None  # the resolving event; evidence must be newer
    version: int = 0


@dataclass(frozen=True, slots=True)
class Decision:
    finding: Anomaly  # first_emitted_at filled with what an emit would stamp
    emit: bool
    reason: str  # fresh | resolved_new_evidence | window_elapsed | new_evidence |
    # suppressed | resolved | one_shot | stale | told
    resolution_ts: int | None  # a resolution observed since the last emit (to record)
    outstanding_since: int | None  # when the agent was first told, if it still stands
    version: int  # of the state this decision was made on


def decide(
    finding: Anomaly, state: KeyState | None, resolution_ts: int | None, now: int
) -> Decision:
    """The pure decision step for one candidate. A one-shot kind is never resolved, so any
    state of its key means it was told."""
    version = state.version if state else 0

    def out(emit: bool, reason: str, first: int | None, outstanding: int | None) -> Decision:
        return Decision(
            finding=replace(finding, first_emitted_at=first or 0),
            emit=emit,
            reason=reason,
            resolution_ts=resolution_ts,
            outstanding_since=outstanding,
            version=version,
        )

    if finding.kind in ONE_SHOT_KINDS and state is not None:
        return out(False, "one_shot", state.first_emitted_at, state.first_emitted_at)
    if state is None or state.last_emit_ts is None:
        if (
            state is not None
            and state.resolved_at is not None
            and finding.last_evidence_ts <= state.resolved_at
        ):
            return out(False, "resolved", None, None)
        return out(True, "fresh", now, None)
    if resolution_ts is not None:
        if finding.last_evidence_ts > resolution_ts:
            return out(True, "resolved_new_evidence", now, None)
        return out(False, "resolved", None, None)
    if now - state.last_emit_ts < SUPPRESSION_WINDOW_MS:
        if finding.kind in NOVEL_EVIDENCE_KINDS and finding.last_evidence_ts > state.last_emit_ts:
            return out(True, "new_evidence", state.first_emitted_at, state.first_emitted_at)
        return out(False, "suppressed", state.first_emitted_at, state.first_emitted_at)
    if (
        finding.channel == Channel.STOP_BLOCK.value
        and finding.last_evidence_ts <= state.last_emit_ts
    ):
        # A Stop block is re-told only with evidence newer than the last block: the same
        # stale failure 10 minutes later tells the agent what it already knows (pattern 7).
        return out(False, "stale", state.first_emitted_at, state.first_emitted_at)
    return out(True, "window_elapsed", state.first_emitted_at, state.first_emitted_at)


# Kinds that report the same thing about one subject, as the rules declare them
# (`RuleSpec.family`; a failing check: design §2.15, the subject is the check's identity).
_FAMILIES: dict[str, tuple[str, ...]] = {
    kind: tuple(k for k, s in SPECS.items() if s.family == spec.family)
    for kind, spec in SPECS.items()
    if spec.family is not None
}


def _siblings(finding: Anomaly) -> list[str]:
    """Keys that tell the agent the same thing at the same or a higher severity: the same
    kind at a higher one (a build_broken that blocked a Stop as high, falling back to
    medium after it), and the other kind of its family at the same or a higher one (a
    build_broken block, then repeated_failed_build on the same failures). A climb stays
    news: a medium told at a prompt, then the agent stopping with it still broken, blocks."""
    rank = SEVERITY_RANK.get(finding.severity, 9)
    family = _FAMILIES.get(finding.kind, (finding.kind,))
    return [
        stable_key(kind, sev.value, finding.subject)
        for kind in family
        for sev in Severity
        if SEVERITY_RANK[sev] < rank or (kind != finding.kind and SEVERITY_RANK[sev] == rank)
    ]


@dataclass(slots=True)
class _Session:
    keys: dict[str, KeyState] = field(default_factory=dict)
    last_seen: int = 0


class Suppression:
    """Thread-safe suppression state for every session."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}
        self._version = 0

    def evaluate(
        self, session_id: str, candidates: Sequence[Anomaly], window: SessionWindow, now: int
    ) -> list[Decision]:
        """Decide every candidate without changing anything (the preview is this call)."""
        keys = {c.stable_key for c in candidates} | {k for c in candidates for k in _siblings(c)}
        with self._lock:
            sess = self._sessions.get(session_id)
            states = {k: sess.keys[k] for k in keys if k in sess.keys} if sess else {}
        decisions = []
        for cand in candidates:
            st = states.get(cand.stable_key)
            spec = SPECS.get(cand.kind)  # a kind without a spec never resolves
            res = None
            if st is not None and st.last_emit_ts is not None and spec is not None:
                res = spec.resolution(cand, window, st.last_emit_ts)
            d = decide(cand, st, res, now)
            # A sibling delivered after the newest evidence told the agent this already
            # (issue 15, pattern 7).
            told = (states[k].last_emit_ts for k in _siblings(cand) if k in states)
            if d.emit and any(t is not None and t >= cand.last_evidence_ts for t in told):
                d = replace(d, emit=False, reason="told")
            decisions.append(d)
        return decisions

    def state(self, session_id: str, key: str) -> KeyState | None:
        with self._lock:
            sess = self._sessions.get(session_id)
            return sess.keys.get(key) if sess else None

    def commit(
        self, session_id: str, decisions: Sequence[Decision], now: int, *, limit: int
    ) -> list[Anomaly]:
        """Emit at most `limit` findings (in the order given) and record observed resolutions.

        Returns the emitted findings with their `first_emitted_at`; the caller must hand
        exactly these to the agent.
        """
        emitted: list[Anomaly] = []
        with self._lock:
            sess = self._sessions.setdefault(session_id, _Session())
            sess.last_seen = max(sess.last_seen, now)
            for d in decisions:
                key = d.finding.stable_key
                current = sess.keys.get(key)
                if (current.version if current else 0) != d.version:
                    # Another delivery changed this key since `evaluate`: its resolution
                    # result is stale, so decide again on the new state without it.
                    d = decide(d.finding, current, None, now)
                if d.emit and len(emitted) < limit:
                    self._version += 1
                    first = d.finding.first_emitted_at or now
                    sess.keys[key] = KeyState(
                        last_emit_ts=now, first_emitted_at=first, version=self._version
                    )
                    emitted.append(d.finding)
                elif d.reason == "resolved" and d.resolution_ts is not None and current:
                    self._version += 1
                    sess.keys[key] = KeyState(resolved_at=d.resolution_ts, version=self._version)
        return emitted

    def restore(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Rebuild from emit-log rows (ts ascending): the last emit of each key wins."""
        n = 0
        with self._lock:
            for r in rows:
                sess = self._sessions.setdefault(str(r["session_id"]), _Session())
                self._version += 1
                sess.keys[str(r["stable_key"])] = KeyState(
                    last_emit_ts=int(r["ts"]),
                    first_emitted_at=int(r["first_emitted_at"]),
                    version=self._version,
                )
                sess.last_seen = max(sess.last_seen, int(r["ts"]))
                n += 1
        return n

    def touch(self, session_id: str, now: int) -> None:
        with self._lock:
            sess = self._sessions.get(session_id)
            if sess is not None:
                sess.last_seen = max(sess.last_seen, now)

    def evict_idle(self, now: int) -> int:
        """Forget sessions idle for 24 h (their findings' evidence is long out of window)."""
        with self._lock:
            idle = [s for s, st in self._sessions.items() if now - st.last_seen >= IDLE_EVICT_MS]
            for s in idle:
                del self._sessions[s]
        return len(idle)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)
