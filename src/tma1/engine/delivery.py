"""Delivery: turn a stored hook event into the body the agent receives (design §2.6–2.7).

`Delivery` composes the Detector (candidates, cached), the suppression state, the session
bundle and the emit log: UserPromptSubmit gets the digest, Stop a Stop block (none when
`stop_hook_active` is set: the loop guard), PostToolUse context, SessionStart the bundle,
Claude Code's PreCompact summary instructions naming what is still open (nothing emitted:
the summariser is not the agent); anything else "".

Only the findings actually put into the answer are committed to suppression and written
to the emit log ("emitted means delivered", design §2.3). `preview` answers what the next
delivery would say without changing anything.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tma1.clock import MINUTE_MS, Clock
from tma1.config import Settings
from tma1.counters import Counters
from tma1.engine.anomaly import Anomaly, Channel, delivery_order, one_per_subject
from tma1.engine.bundle import (
    ACTIVE_MS,
    CHANGES_HORIZON_MS,
    CHECKS_HORIZON_MS,
    SESSION_START,
    BundleInput,
    BundleMemory,
    Peer,
    build_bundle,
    compact_instructions,
    epoch_start,
    unresolved,
)
from tma1.engine.detector import Detector
from tma1.engine.digest import (
    DIGEST_MAX_FINDINGS,
    POST_TOOL_USE_MAX_FINDINGS,
    STOP_MAX_FINDINGS,
    Envelope,
    digest,
    stop_reason,
)
from tma1.engine.mutes import NO_MUTES
from tma1.engine.ports import BundleReads, EmitSink, MuteSource, WindowSource
from tma1.engine.spec import Rule
from tma1.engine.suppression import REBUILD_HORIZON_MS, Suppression
from tma1.engine.window import RuleConfig
from tma1.events import HookEvent

log = logging.getLogger("tma1.engine")

CHANNEL_FOR_HOOK: dict[str, Channel] = {
    "UserPromptSubmit": Channel.USER_PROMPT_SUBMIT,
    "Stop": Channel.STOP_BLOCK,
    "PostToolUse": Channel.POST_TOOL_USE,
    "PostToolUseFailure": Channel.POST_TOOL_USE,
    "SessionStart": Channel.SESSION_START,  # the bundle (`session_start`, not `deliver`)
}
CHANNEL_LIMIT: dict[str, int] = {
    Channel.USER_PROMPT_SUBMIT: DIGEST_MAX_FINDINGS,
    Channel.STOP_BLOCK: STOP_MAX_FINDINGS,
    Channel.POST_TOOL_USE: POST_TOOL_USE_MAX_FINDINGS,
}
_EVICT_EVERY_MS = MINUTE_MS


def _finding_json(f: Anomaly) -> dict[str, Any]:
    return {
        "kind": str(f.kind),
        "severity": str(f.severity),
        "channel": str(f.channel),
        "evidence": f.evidence,
        "suggestion": f.suggestion,
        "related_files": list(f.related_files),
        "subject": f.subject,
        "stable_key": f.stable_key,
    }


class Delivery:
    """The engine of the hook path, over its ports (`tma1.engine.ports`): windows for the
    rules, the session bundle's reads, and the emit log."""

    def __init__(
        self,
        *,
        windows: WindowSource,
        reads: BundleReads,
        emits: EmitSink,
        clock: Clock,
        settings: Settings,
        counters: Counters,
        rules: Mapping[str, Rule] | None = None,
        mutes: MuteSource = NO_MUTES,
    ) -> None:
        self.reads = reads
        self.clock = clock
        self.counters = counters
        self.config = RuleConfig.from_settings(settings)
        self.detector = Detector(
            source=windows, clock=clock, config=self.config, counters=counters, rules=rules
        )
        self.suppression = Suppression()
        self.bundles = BundleMemory()
        self.emitlog = emits
        # Muted kinds (design §2.20): still computed, never delivered.
        self.mutes = mutes
        self._evict_lock = threading.Lock()
        self._last_evict = 0
        self.restored_rows = 0

    def respond(self, event: HookEvent, *, envelope: Envelope) -> str:
        """The body for this (already stored) event, in the form of the agent's `envelope`.
        Never raises: errors answer ""."""
        try:
            return self._respond(event, envelope=envelope)
        except Exception:
            self.counters.inc("errors.delivery")
            log.exception("delivery failed for session %s; answering empty", event.session_id)
            return ""

    def _respond(self, event: HookEvent, *, envelope: Envelope) -> str:
        hook = event.hook_event_name
        if hook == "SessionStart":
            return self.session_start(event, envelope=envelope)
        if hook == "PreCompact":
            return self.pre_compact(event, envelope=envelope)
        channel = CHANNEL_FOR_HOOK.get(hook)
        if channel is None:
            return ""
        if channel == Channel.STOP_BLOCK and event.stop_hook_active:
            return ""  # loop guard: never block a Stop that a block already caused
        emitted = self.deliver(event.session_id, channel)
        if not emitted:
            return ""
        if channel == Channel.STOP_BLOCK:
            return envelope.stop_block(stop_reason(emitted))
        return envelope.context(hook, digest(emitted))

    def deliver(self, session_id: str, channel: str) -> list[Anomaly]:
        """Decide, commit and log the findings one answer on `channel` carries."""
        now = self.clock.now_ms()
        self._maybe_evict(now)
        if not self.detector.serves(channel):
            return []  # e.g. PostToolUse: none of the six rules delivers there
        det = self.detector.detect(session_id, now, channel=channel)
        project = det.window.project
        # One finding per subject, the first in delivery order, before suppression: the
        # one left out is never delivered, so never emitted (design §2.3), and while the
        # first stays a candidate it never becomes the check's second word.
        candidates = one_per_subject(
            delivery_order(
                [
                    c
                    for c in det.candidates
                    if c.channel == channel and not self.mutes.muted(c.kind, project, now)
                ]
            )
        )
        if not candidates:
            self.suppression.touch(session_id, now)
            return []
        decisions = self.suppression.evaluate(session_id, candidates, det.window, now)
        if channel != Channel.STOP_BLOCK:
            # A bundle just told these (design §2.19): the digest does not repeat them.
            decisions = [
                d for d in decisions if not (d.emit and self.bundles.recently_told(d.finding, now))
            ]
        emitted = self.suppression.commit(
            session_id, decisions, now, limit=CHANNEL_LIMIT.get(channel, 1)
        )
        if emitted:
            self.counters.inc(f"engine.delivered.{channel}", len(emitted))
            self.emitlog.record(emitted, ts=now)
        return emitted

    def session_start(self, event: HookEvent, *, envelope: Envelope) -> str:
        """Answer a SessionStart with the bundle, commit what it told, emit its findings."""
        now = self.clock.now_ms()
        self._maybe_evict(now)
        source = event.metadata.get("source")
        bundle = build_bundle(
            self._bundle_input(
                event.session_id,
                source=source if isinstance(source, str) else None,
                now=now,
                before_ts=event.ts,
                project=event.project,
            )
        )
        if not bundle.text:
            return ""
        self.bundles.record(event.session_id, bundle.keys, now)
        if bundle.findings:
            self.counters.inc(f"engine.delivered.{SESSION_START}", len(bundle.findings))
            self.emitlog.record(
                [
                    replace(f, channel=SESSION_START, first_emitted_at=f.first_emitted_at or now)
                    for f in bundle.findings
                ],
                ts=now,
            )
        self.counters.inc("engine.bundles")
        return envelope.context("SessionStart", bundle.text)

    def pre_compact(self, event: HookEvent, *, envelope: Envelope) -> str:
        """Claude Code appends a PreCompact hook's plain stdout to the compaction prompt:
        ask the summary to keep what is still open. Only where the envelope says so
        (`compact`: Claude Code's command hook); the others get nothing."""
        if not envelope.compact:
            return ""
        now = self.clock.now_ms()
        inp = self._bundle_input(
            event.session_id, source="compact", now=now, before_ts=event.ts, project=event.project
        )
        text = compact_instructions(inp)
        if text:
            self.counters.inc("engine.compact_instructions")
        return text

    def _bundle_input(
        self,
        session_id: str,
        *,
        source: str | None,
        now: int,
        before_ts: int | None = None,
        project: str | None = None,
    ) -> BundleInput:
        """Load what `build_bundle` looks at (a few indexed reads; the rules via the
        detector's cache). Changes nothing."""
        before = now if before_ts is None else before_ts
        store = self.reads
        det = self.detector.detect(session_id, now)
        project = project or det.window.project or store.session_project(session_id, now)
        decisions = self.suppression.evaluate(
            session_id, delivery_order(list(det.candidates)), det.window, now
        )
        start = epoch_start(
            store.latest_compaction_ts(session_id, now), det.window.session_start_ts
        )
        last = store.session_last_ts(session_id, before)
        runs: list[HookEvent] = []
        changes = []
        peers: list[Peer] = []
        if project:
            runs = store.project_shell_results(project, now - CHECKS_HORIZON_MS, now)
            # The scripts sessions wrote whole: their scratch, never the project's checks.
            if created := store.project_file_creations(project, now - CHECKS_HORIZON_MS, now):
                runs = sorted([*runs, *created], key=lambda e: e.ts)
            if last is not None:
                changes = store.project_changes(project, max(last, now - CHANGES_HORIZON_MS), now)
            peers = [
                Peer(session_id=sid, agent=agent, last_ts=ts, last_event=last_event)
                for sid, ts, agent, last_event in store.project_activity(
                    project, now - ACTIVE_MS, now
                )
                if sid != session_id
            ]
            # Only a peer in a turn can have ended it unseen by the hooks: one read each.
            peers = [
                replace(p, turn_end_ts=store.latest_turn_end_ts(p.session_id, now))
                if p.active(now)
                else p
                for p in peers
            ]
        return BundleInput(
            session_id=session_id,
            project=project,
            source=source,
            now=now,
            epoch_start=start,
            told=self.bundles.told(session_id),
            runs=runs,
            # A muted kind is never delivered (design §2.20): nor re-told.
            findings=[
                f for f in unresolved(decisions) if self.mutes.muted(f.kind, project, now) is None
            ],
            last_event_ts=last,
            changes=changes,
            peers=peers,
        )

    def preview_bundle(self, session_id: str, source: str | None = "resume") -> dict[str, Any]:
        """What a SessionStart of `source` would be told now (MCP, dashboards). Read-only:
        no epoch memory, no suppression state, no emit-log row."""
        now = self.clock.now_ms()
        b = build_bundle(self._bundle_input(session_id, source=source, now=now))
        return {
            "session_id": session_id,
            "now": now,
            "source": source,
            "text": b.text,
            "chars": len(b.text),
            "parts": list(b.parts),
            "findings": [_finding_json(f) for f in b.findings],
        }

    def preview(self, session_id: str) -> dict[str, Any]:
        """What the next delivery on each channel would say. Changes no suppression state
        and writes no emit-log row (dashboards, MCP and the CLI call this).

        Per finding: `would_deliver` (passes suppression and fits its channel's cap),
        `decision` (why: fresh | suppressed | window_elapsed | resolved |
        resolved_new_evidence | new_evidence | one_shot | muted), `muted` (its kind is
        muted for this project: computed and shown, never delivered; with `muted_until`,
        None for until unmuted, and `muted_project`, None for every project),
        `first_emitted_at` (what a delivery now would stamp: now for a fresh finding, the
        original time when the finding is re-told, None when it would stay silent without
        having been told),
        and `outstanding_since` (when the agent was first told of it, if it was and the
        finding has not been resolved since; else None)."""
        now = self.clock.now_ms()
        det = self.detector.detect(session_id, now)
        candidates = delivery_order(list(det.candidates))
        decisions = self.suppression.evaluate(session_id, candidates, det.window, now)
        taken: dict[str, int] = {}
        findings = []
        for d in decisions:
            channel = str(d.finding.channel)
            mute = self.mutes.muted(d.finding.kind, det.window.project, now)
            would = (
                mute is None and d.emit and taken.get(channel, 0) < CHANNEL_LIMIT.get(channel, 1)
            )
            if would:
                taken[channel] = taken.get(channel, 0) + 1
            out = {
                **_finding_json(d.finding),
                "last_evidence_ts": d.finding.last_evidence_ts,
                "first_emitted_at": d.finding.first_emitted_at or None,
                "outstanding_since": d.outstanding_since,
                "would_deliver": would,
                "decision": d.reason,
                "muted": mute is not None,
            }
            if mute is not None:
                out["decision"] = "muted"
                out["muted_until"] = mute.until_ms
                out["muted_project"] = mute.project
            findings.append(out)
        return {"session_id": session_id, "now": now, "findings": findings}

    def invalidate(self, session_id: str) -> None:
        self.detector.invalidate(session_id)

    def forget(self, session_id: str) -> None:
        """The session ended (SessionEnd): drop its cached window and detection. Its
        suppression and bundle state stay (small, and a resumed session must not be told
        again what it was told; they idle out after 24 h)."""
        self.detector.forget(session_id)

    def invalidate_project(self, project: str) -> None:
        self.detector.invalidate_project(project)

    def start(self) -> None:
        """Rebuild suppression from the emit log (last 24 h), then start the writer."""
        now = self.clock.now_ms()
        try:
            rows = self.emitlog.rows_since(now - REBUILD_HORIZON_MS)
            # Bundle rows re-tell; they never advance suppression (design §2.19).
            self.restored_rows = self.suppression.restore(
                r for r in rows if r["channel"] != SESSION_START
            )
            self.bundles.restore(rows)
        except Exception:
            self.counters.inc("errors.engine_restore")
            log.exception("could not rebuild suppression state from the emit log")
        self.emitlog.start()

    def stop(self) -> None:
        self.emitlog.stop()

    def flush(self) -> bool:
        """Write every queued emit-log row now (tests, replay)."""
        return self.emitlog.flush()

    def _maybe_evict(self, now: int) -> None:
        with self._evict_lock:
            if now - self._last_evict < _EVICT_EVERY_MS:
                return
            self._last_evict = now
        evicted = self.suppression.evict_idle(now)
        self.bundles.evict_idle(now)
        if evicted:
            self.counters.inc("engine.sessions_evicted", evicted)

    def health(self) -> dict[str, object]:
        return {
            **self.emitlog.health(),
            **self.detector.health(),
            "tracked_sessions": len(self.suppression),
            "restored_emits": self.restored_rows,
            "delivered": self.counters.snapshot("engine.delivered."),
            "rule_errors": self.counters.snapshot("engine.rule_errors."),
            "detections": {
                "cold": self.counters.get("engine.detect.cold"),
                "warm": self.counters.get("engine.detect.warm"),
            },
        }
