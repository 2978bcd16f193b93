"""The running tma1: store, clock, engine and sensors wired together.

The HTTP layer is thin; everything a hook does happens in `Service.handle_hook_async`, the
one entry path: the server hands it the body it received, a replay the payload it has
already decoded, and either goes through the same steps (decode, parse, mark what was cut,
read what a Codex hook leaves out from its rollout, commit, answer). It never raises: any
failure is logged, counted, and answered with an empty body.

The path runs one way: `Service` parses, the `EventSink` commits, and `Responder` (the
sensors and the engine) answers, on the ingest's worker right after the commit. Where
events are committed and where the engine reads and writes (`tma1.engine.ports`) is handed
in: `build_service` wires the live implementations (`tma1.live`, `tma1.ingest`), a replay
its in-memory ones (`tma1.replay.memory`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tma1 import __version__
from tma1.adapters import agents
from tma1.clock import Clock, SystemClock
from tma1.config import Settings
from tma1.counters import Counters
from tma1.engine.delivery import Delivery
from tma1.engine.ports import EventSink
from tma1.events import (
    HookEvent,
    PayloadError,
    json_text,
    mark_exit_failure,
    note_edited_lines,
    parse_payload,
    was_cut,
)
from tma1.ingest import Ingest
from tma1.ingest.journal import JOURNAL_FILE, SPOOL_DIR, Journal, Spool
from tma1.live.engine import stored_delivery
from tma1.sensors import Sensors, codex_exit
from tma1.store import Store
from tma1.store.connection import database_identity

log = logging.getLogger("tma1.hooks")

# The hard limit of one hook body (docs/hooks.md): anything up to it is stored, its big
# fields cut to the caps in tma1.events and the event marked `truncated` with its
# `original_bytes`; only a larger body is refused (counted as rejected.body_too_large).
MAX_BODY_BYTES = 64 * 1024 * 1024
# Bodies above this are decoded on a worker thread, not on the server's event loop.
LARGE_BODY_BYTES = 1024 * 1024

# The hook events Claude Code and Codex send (docs/agent-protocols.md). Anything else
# ("Banana", a probe, a typo) is refused and counted, never stored: it would make junk
# sessions on the dashboard.
KNOWN_HOOK_EVENTS = frozenset(
    {
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "UserPromptSubmit",
        "Stop",
        "SubagentStart",
        "SubagentStop",
        "SessionStart",
        "SessionEnd",
        "PreCompact",
        "PostCompact",
        "Notification",
        "PermissionRequest",
    }
)
# `?source=` → the agent it names (each AgentSpec's); no parameter is Claude Code.
AGENT_SOURCES = agents.SOURCES
PURGE_INTERVAL_S = 3600.0
_REJECTED = object()  # a body that is no JSON (JSON's own null is a payload, refused later)


@dataclass(frozen=True, slots=True)
class Responder:
    """What follows an event's commit: it is counted, the engine's caches and the sensors
    are told, and (`answer`) the engine says what the agent should hear. The ingest calls
    it on its worker right after the commit (a hook costs one thread hop), and `stored`
    for the events its outage queue writes late (no answer: the hook has had its own)."""

    settings: Settings
    counters: Counters
    delivery: Delivery
    sensors: Sensors

    def answer(self, event: HookEvent, *, envelope: str | None = None) -> str:
        """What the agent hears about a committed event (sensors and engine first)."""
        self.stored([event])
        if self.settings.disable_injection:
            return ""
        return self.delivery.respond(
            event, envelope=agents.envelope_for(envelope, event.agent_source)
        )

    def stored(self, events: Sequence[HookEvent]) -> None:
        """Count committed events and let the engine and the sensors know."""
        for event in events:
            self.counters.inc("events.stored")
            if event.hook_event_name == "SessionEnd":
                self.delivery.forget(event.session_id)  # nothing of it stays cached
            else:
                self.delivery.invalidate(event.session_id)
            self.sensors.on_event(event)  # never raises: it counts and logs its own failures


@dataclass
class Service:
    settings: Settings
    store: Store
    clock: Clock
    counters: Counters
    delivery: Delivery
    sensors: Sensors
    # Where events are committed: the budgeted insert + outage queue (tma1.ingest), or
    # replay's in-memory sink. Either hands each committed event to `responder`.
    ingest: EventSink
    responder: Responder
    started_at: float = field(default_factory=time.monotonic)
    _stop: threading.Event = field(default_factory=threading.Event)
    _purger: threading.Thread | None = None
    # How long a Codex shell PostToolUse waits for its exit status to reach the rollout
    # (tma1.sensors.codex_exit). A replay's payloads name no rollout (the driver takes
    # `transcript_path` out): its converters already carry the status.
    _exit_waits: codex_exit.WaitPolicy = field(default_factory=codex_exit.WaitPolicy)
    # Apart: a Codex that records command ends but no patch diffs (older than 0.17) must
    # not make every patch wait out the bound.
    _patch_waits: codex_exit.WaitPolicy = field(default_factory=codex_exit.WaitPolicy)
    # Where a hook body over LARGE_BODY_BYTES waits on disk from its answer until its event
    # is committed or journalled (`tma1 serve`; None: in-process callers, replay).
    spool: Spool | None = None

    # --- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        self.ingest.start()
        self._take_back_held()
        self.delivery.start()
        self.sensors.start()
        self._purger = threading.Thread(target=self._purge_loop, name="tma1-purge", daemon=True)
        self._purger.start()

    def stop(self) -> None:
        self._stop.set()
        self.ingest.stop()  # drains the outage queue first: its events reach the engine
        self.sensors.stop()
        self.delivery.stop()  # flushes the emit log
        if self._purger:
            self._purger.join(timeout=5)

    def _purge_loop(self) -> None:
        while not self._stop.wait(
            timeout=1.0 if self.counters.get("purge_runs") == 0 else PURGE_INTERVAL_S
        ):
            self.purge_once()

    def purge_once(self) -> dict[str, int]:
        """Apply the TTL, counted back from the newest event (tma1.store.retention): an
        old database opened again keeps everything. Whatever goes is said, with counts."""
        from tma1.store import retention

        try:
            done = retention.purge(self.store, self.settings.data_ttl_seconds * 1000)
        except Exception:
            log.exception("purge failed; will retry in an hour")
            return {}
        finally:
            self.counters.inc("purge_runs")
        if done.total:
            logging.getLogger("tma1.retention").warning(
                "retention: removed %d rows older than %s (TMA1_DATA_TTL counted back from "
                "the newest event): %s; labelled emits and their sessions kept",
                done.total,
                _day(done.cutoff),
                ", ".join(f"{n} {t.removeprefix('tma1_')}" for t, n in done.rows.items() if n),
            )
        return done.rows

    # --- the hook path ---------------------------------------------------------------

    def reject(self, reason: str, detail: str) -> None:
        self.counters.inc(f"rejected.{reason}")
        log.warning("hook payload rejected (%s): %s", reason, detail)

    async def hold_body(self, body: bytes, source: str | None) -> Path | None:
        """Keep a big hook `body` on disk before it is answered (None: no spool, or the
        disk would not take it — counted as `ingest.not_durable`)."""
        if self.spool is None:
            return None
        held = await asyncio.to_thread(self.spool.put, body, source)
        if held is None:
            self.counters.inc("ingest.not_durable")
        return held

    def _take_back_held(self) -> None:
        """The big bodies a killed server had answered but not kept as events: parsed and
        queued (journalled) now, then their files removed."""
        if self.spool is None or not isinstance(self.ingest, Ingest):
            return
        for held in self.spool.held():
            read = self.spool.read(held)
            event = self._event_of(*read) if read is not None else None
            if event is not None:
                self.ingest.take_back(event)
                self.counters.inc("ingest.recovered_from_spool")
            else:
                log.error("a kept hook body could not be read back (lost): %s", held)
            self.spool.remove(held)

    async def handle_hook_async(
        self,
        hook: bytes | object,
        *,
        source: str | None = None,
        envelope: str | None = None,
        held: Path | None = None,
    ) -> str:
        """The one entry path of a hook: store the event, then answer with what the agent
        should hear. `hook` is the body as the agent sent it (the HTTP route; the route has
        refused one over MAX_BODY_BYTES) or its payload already decoded (replay). Awaited on
        an event loop; never raises.

        Parsing runs on the loop; the insert, and once it is committed the sensors and the
        engine (`Responder.answer`), run on the ingest worker
        (tma1.ingest.commit.Ingest.submit_async), so a hook costs one thread hop and the
        event is still committed before the answer.
        """
        self.counters.inc("requests")
        try:
            if isinstance(hook, bytes) and len(hook) > LARGE_BODY_BYTES:
                # Decoding tens of MB would stall every other agent's hook on the loop.
                event = await asyncio.to_thread(self._event_of, hook, source)
            else:
                event = self._event_of(hook, source)
            if event is None:
                return ""
            if codex_exit.wants_exit_status(event) or codex_exit.wants_patch_lines(event):
                await self._from_rollout(event)
            # Committed within the budget, or queued (tma1.ingest): the engine cannot see a
            # queued event, so it gets the empty answer.
            answer = functools.partial(self.responder.answer, envelope=envelope)
            return await self.ingest.submit_async(event, answer)
        except Exception:
            self.counters.inc("errors.internal")
            log.exception("hook handling failed; answering empty")
            return ""
        finally:
            # Committed, journalled or refused by now: the body's copy has done its work.
            if held is not None and self.spool is not None:
                self.spool.remove(held)

    async def _from_rollout(self, event: HookEvent) -> None:
        """What a Codex hook leaves out, read from its rollout (tma1.sensors.codex_exit;
        not found in time: the event stays as the hook gave it). A shell call's exit
        status (design §2.18): a non-zero one makes the event a failure. An apply_patch
        call's lines: kept when the patch changed one file (the rules read an event's lines
        as those of each file it names)."""
        assert event.transcript_path is not None and event.tool_use_id is not None
        path, call = event.transcript_path, event.tool_use_id
        if codex_exit.wants_exit_status(event):
            end = await self._exit_waits.look(codex_exit.read_command_end, path, call)
            self.counters.inc("codex_exit.not_found" if end is None else "codex_exit.found")
            if end is not None and end.failed:
                mark_exit_failure(event, end.exit_code)
            return
        lines = await self._patch_waits.look(codex_exit.read_patch_lines, path, call)
        self.counters.inc("codex_patch.not_found" if lines is None else "codex_patch.found")
        if lines is not None and len(lines) == 1:
            (ranges,) = lines.values()
            if ranges:
                note_edited_lines(event, ranges)

    def _event_of(self, hook: bytes | object, source: str | None) -> HookEvent | None:
        """The event of a hook body or of its decoded payload; None when it is rejected
        (counted and logged). An event whose big fields were cut to the caps is marked
        `truncated`, with the size of what came in (`original_bytes`)."""
        payload = self._decode(hook) if isinstance(hook, bytes) else hook
        if payload is _REJECTED:
            return None
        event = self._event_from_payload(payload, source)
        if event is not None and was_cut(event):
            size = len(hook) if isinstance(hook, bytes) else len(json_text(payload).encode())
            event.metadata["truncated"] = True
            event.metadata["original_bytes"] = size
            self.counters.inc("events.truncated")
        return event

    def _decode(self, body: bytes) -> object:
        """A hook body's JSON; `_REJECTED` when it is not (counted and logged)."""
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.reject("invalid_utf8", str(exc))
            return _REJECTED
        try:
            return json.loads(text)
        except (ValueError, RecursionError) as exc:
            self.reject("invalid_json", str(exc)[:200])
            return _REJECTED

    def _event_from_payload(self, payload: object, source: str | None) -> HookEvent | None:
        agent = AGENT_SOURCES.get(source.strip().lower() if source is not None else "")
        if agent is None:
            # A typo'd or foreign `?source=` is no agent of ours: storing it would make
            # sessions that belong to nobody (refused, counted, answered empty).
            self.reject("unknown_source", f"?source={str(source)[:60]!r} is no agent tma1 knows")
            return None
        try:
            event = parse_payload(
                agents.normalize(payload, agent),  # Gemini's and Copilot's into tma1's shape
                ts=self.clock.now_ms(),
                source=agent,
            )
        except PayloadError as exc:
            self.reject(exc.reason, exc.detail)
            return None
        if event.hook_event_name not in KNOWN_HOOK_EVENTS:
            self.reject(
                "unknown_hook_event",
                f"hook_event_name {event.hook_event_name[:60]!r} is no hook event tma1 uses "
                "(after mapping the agent's own names)",
            )
            return None
        return event

    # --- health ----------------------------------------------------------------------

    def health(self) -> dict[str, object]:
        try:
            rows: dict[str, int] | str = self.store.counts()
            db_ok = True
        except Exception as exc:  # the database is gone: say so, don't fail the probe
            rows, db_ok = f"unavailable: {type(exc).__name__}", False
        ingest = self.ingest.health()
        if not ingest["database_available"]:
            db_ok = False
        # A hook worker that never came back (a read that blocks for good) stops the
        # engine's answers while everything else looks well: not "ok".
        stuck = bool(ingest.get("stuck_workers"))
        return {
            "status": "ok" if db_ok and not stuck else "degraded",
            "version": __version__,
            "database": self.store.dialect,
            # Which data this server keeps (`tma1 doctor` compares it with its own).
            "data_dir": str(self.settings.data_dir.expanduser().absolute()),
            "database_url": database_identity(self.settings.effective_database_url),
            "uptime_s": round(time.monotonic() - self.started_at, 3),
            "rows": rows,
            "requests": self.counters.get("requests"),
            "rejected": self.counters.snapshot("rejected."),
            "errors": self.counters.snapshot("errors."),
            "events_stored": self.counters.get("events.stored"),
            "engine": self.delivery.health(),
            "sensors": self.sensors.health(),
            "injection": not self.settings.disable_injection,
            "retention": {
                "ttl_s": self.settings.data_ttl_seconds,
                "purge_runs": self.counters.get("purge_runs"),
            },
            "ingest": ingest,
        }


def _day(ts_ms: int | None) -> str:
    if ts_ms is None:
        return "?"
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ts_ms / 1000))


def build_service(
    settings: Settings,
    *,
    clock: Clock | None = None,
    store: Store | None = None,
    counters: Counters | None = None,
    delivery: Delivery | None = None,
    ingest: EventSink | None = None,
    journal: bool = False,
) -> Service:
    """Wire the components for `settings` (migrations run here): live, the engine over the
    store (`tma1.live`) and the budgeted ingest (with the outage journal in the
    data dir when `journal`: `tma1 serve`). Replay hands in its engine over in-memory ports
    (`delivery`, with the `counters` they count into) and its `ingest`."""
    clock = clock or SystemClock()
    store = store or Store.open(
        settings.effective_database_url, machine_id=settings.effective_machine_id
    )
    counters = Counters() if counters is None else counters
    delivery = delivery or stored_delivery(store, clock=clock, settings=settings, counters=counters)
    sensors = Sensors(
        store=store,
        clock=clock,
        settings=settings,
        counters=counters,
        on_project_change=delivery.invalidate_project,
        on_session_change=delivery.invalidate,
    )
    responder = Responder(settings=settings, counters=counters, delivery=delivery, sensors=sensors)
    if ingest is None:
        ingest = Ingest(
            store=store,
            counters=counters,
            on_stored=responder.stored,  # the outage queue's late writes
            budget_ms=settings.hook_db_budget_ms,
            max_events=settings.ingest_queue_max,
            journal=Journal(settings.data_dir / JOURNAL_FILE) if journal else None,
        )
    return Service(
        settings=settings,
        store=store,
        clock=clock,
        counters=counters,
        delivery=delivery,
        sensors=sensors,
        ingest=ingest,
        responder=responder,
        spool=Spool(settings.data_dir / SPOOL_DIR) if journal else None,
    )
