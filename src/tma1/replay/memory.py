"""Replay's in-memory ports for the engine (tma1.engine.ports), peers of the live ones in
`tma1.live`: every session kept in memory.

Live, each hook event is committed before the engine may see it and the Detector reads
its window back from the database. A replay knows every event in advance, so it commits
them here (`MemoryEvents`, an `EventSink`) and the engine reads its windows and the
bundle's inputs from here (`MemoryWindows`, a `WindowSource` and `BundleReads`). The
engine sees exactly what the store would have handed it at each `now`:

- events of the last 60 minutes, ts ascending, with the ids SQLite gives them in a
  fresh database (one per event, in order), and in the store's lean form
  (`tma1.store.events.lean`, derived, as `Store.window_events`, from `HookEvent`'s fields);
- the project's file changes of the last 90 minutes, the latest usage, the first event
  of the session; the project falls back to the newest one the session ever named;
- the newest turn end the transcript tailer would have stored (a `turn_end` usage row:
  the user interrupted the turn), for the session bundle's peers.

Emits are kept as the emit-log table holds them (`MemoryEmits`, an `EmitSink`).

Items arrive in time order and the virtual clock never goes back, so every item held is
at or before `now`: appending keeps each list sorted by ts, and a window is a slice found
by bisection.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import Any

from tma1.counters import Counters
from tma1.engine.anomaly import Anomaly
from tma1.engine.checkruns import failing_at
from tma1.engine.emitlog import emit_health, emit_row
from tma1.engine.window import (
    CHANGES_WINDOW_MS,
    EVENTS_WINDOW_MS,
    MAX_WINDOW_EVENTS,
    PRIOR_RUNS_MS,
    SessionWindow,
)
from tma1.events import TURN_END, FileChange, HookEvent, Usage, is_compaction_hook, json_text
from tma1.storable.scrub import scrub
from tma1.store.events import lean

_TS = attrgetter("ts")


class MemoryWindows:
    """A `WindowSource` and the bundle's `BundleReads` (tma1.engine.ports) over what the
    replay has fed so far."""

    def __init__(self) -> None:
        self._events: dict[str, list[HookEvent]] = {}
        self._project: dict[str, str] = {}
        self._changes: dict[str, list[FileChange]] = {}
        self._usage: dict[str, Usage] = {}
        # For the session bundle (`BundleReads`, tma1.engine.bundle): the project's events
        # in feed order.
        self._by_project: dict[str, list[HookEvent]] = {}
        self._compacted: dict[str, int] = {}  # session → its newest compaction row's ts
        self._turn_end: dict[str, int] = {}  # session → its newest turn-end row's ts
        # session → the project's checks open at its start (`SessionWindow.failing_at_start`)
        self._at_start: dict[str, dict[str, frozenset[str]]] = {}

    def add_event(self, ev: HookEvent) -> None:
        self._events.setdefault(ev.session_id, []).append(ev)
        if ev.project:
            self._project[ev.session_id] = ev.project
            self._by_project.setdefault(ev.project, []).append(ev)

    def add_change(self, ch: FileChange) -> None:
        self._changes.setdefault(ch.project, []).append(ch)

    def add_usage(self, u: Usage) -> None:
        if u.kind == TURN_END:
            # Not a context size (`Store.latest_usage` passes it over): the peers' evidence.
            self._turn_end[u.session_id] = max(u.ts, self._turn_end.get(u.session_id, u.ts))
            return
        self._usage[u.session_id] = u
        if u.kind == "compaction":
            self.add_compaction(u.session_id, u.ts)

    def add_compaction(self, session_id: str, ts: int) -> None:
        """A compaction (usage row or hook): the start of a context epoch, as
        `Store.latest_compaction_ts` finds it."""
        self._compacted[session_id] = max(ts, self._compacted.get(session_id, ts))

    def window(self, session_id: str, now: int) -> SessionWindow:
        events = self._events.get(session_id, [])
        lo = bisect_left(events, now - EVENTS_WINDOW_MS, key=_TS)
        lo = max(lo, len(events) - MAX_WINDOW_EVENTS)  # the live engine's session cap
        project = self._project.get(session_id)
        changes = self.project_changes(project, now - CHANGES_WINDOW_MS) if project else []
        return SessionWindow(
            session_id=session_id,
            project=project,
            events=events[lo:],
            changes=changes,
            usage=self._usage.get(session_id),
            session_start_ts=events[0].ts if events else None,
            # Whatever the occupancy (the store loads it only past the threshold, the one
            # time the rule reads it: the findings are the same).
            epoch_start_ts=self._compacted.get(session_id),
            failing_at_start=self._failing_at(session_id, project, events),
        )

    def _failing_at(
        self, session_id: str, project: str | None, events: list[HookEvent]
    ) -> dict[str, frozenset[str]]:
        """As `StoreWindows._failing_at`: the other sessions' runs before this one began."""
        if session_id not in self._at_start:
            if project is None or not events:
                return {}
            first = events[0].ts
            prior = [
                e
                for e in self.project_shell_results(project, first - PRIOR_RUNS_MS, first - 1)
                if e.session_id != session_id
            ]
            self._at_start[session_id] = failing_at(prior, first, project)
        return self._at_start[session_id]

    def forget(self, session_id: str) -> None:
        pass  # these events are the replay's store, not a cache of it

    def health(self) -> dict[str, object]:
        return {"held_windows": len(self._events)}

    # --- the session bundle's reads, as `Store` answers them (tma1.engine.bundle) --------

    def _project_events(self, project: str, since_ts: int, until_ts: int) -> list[HookEvent]:
        held = self._by_project.get(project, [])
        return held[bisect_left(held, since_ts, key=_TS) : bisect_right(held, until_ts, key=_TS)]

    def project_shell_results(
        self, project: str, since_ts: int, until_ts: int, *, limit: int = 1_000
    ) -> list[HookEvent]:
        # Held lean (`store.events.lean`): every failure keeps its output, as the store's.
        found = [
            e
            for e in self._project_events(project, since_ts, until_ts)
            if e.event_type in ("PostToolUse", "PostToolUseFailure") and e.tool_command is not None
        ]
        return found[-limit:]

    def project_file_creations(
        self, project: str, since_ts: int, until_ts: int, *, limit: int = 1_000
    ) -> list[HookEvent]:
        found = [
            e
            for e in self._project_events(project, since_ts, until_ts)
            if e.event_type == "PostToolUse"
            and e.tool_name == "Write"
            and e.tool_success is not False
        ]
        return found[-limit:]

    def project_activity(
        self, project: str, since_ts: int, until_ts: int
    ) -> list[tuple[str, int, str, str]]:
        newest: dict[str, HookEvent] = {}
        for e in self._project_events(project, since_ts, until_ts):  # ts ascending
            newest[e.session_id] = e
        return [(sid, e.ts, e.agent_source, e.hook_event_name or "") for sid, e in newest.items()]

    def session_last_ts(self, session_id: str, before_ts: int) -> int | None:
        events = self._events.get(session_id, [])
        i = bisect_left(events, before_ts, key=_TS)
        return events[i - 1].ts if i else None

    def latest_compaction_ts(self, session_id: str, until_ts: int | None = None) -> int | None:
        return self._compacted.get(session_id)  # fed in time order: never after `now`

    def latest_turn_end_ts(self, session_id: str, until_ts: int) -> int | None:
        return self._turn_end.get(session_id)  # fed in time order: never after `now`

    def project_changes(
        self, project: str, since_ts: int, until_ts: int | None = None
    ) -> list[FileChange]:
        held = self._changes.get(project, [])
        hi = len(held) if until_ts is None else bisect_right(held, until_ts, key=_TS)
        return held[bisect_left(held, since_ts, key=_TS) : hi]

    def session_project(self, session_id: str, until_ts: int | None = None) -> str | None:
        return self._project.get(session_id)


class MemoryEvents:
    """Replay's `EventSink` (tma1.engine.ports): every event is committed at once, into
    memory. Events are scrubbed as live ingest does, numbered as a fresh database numbers
    them, handed to `windows` in lean form, and kept whole (with the file changes and
    usage fed) for the summary and for a database to keep."""

    def __init__(self, windows: MemoryWindows) -> None:
        self.windows = windows
        self.events: list[HookEvent] = []
        self.changes: list[FileChange] = []
        self.usages: list[Usage] = []

    async def submit_async(self, event: HookEvent, after: Callable[[HookEvent], str]) -> str:
        """Commit `event` at once, then answer `after(event)` (nothing to wait for: a replay
        awaits this without ever yielding to its loop)."""
        scrub(event)
        event.id = len(self.events) + 1
        self.events.append(event)
        self.windows.add_event(lean(event))
        if is_compaction_hook(event.hook_event_name, event.metadata.get("source")):
            self.windows.add_compaction(event.session_id, event.ts)
        return after(event)

    def add_change(self, ch: FileChange) -> None:
        self.changes.append(ch)
        self.windows.add_change(ch)

    def add_usage(self, u: Usage) -> None:
        self.usages.append(u)
        self.windows.add_usage(u)

    def start(self) -> None:
        pass

    def stop(self) -> int:
        return 0

    def health(self) -> dict[str, object]:
        return {"database_available": True, "events": len(self.events)}

    def sessions(self) -> dict[str, list[HookEvent]]:
        """Every event fed, by session, in the order fed (ts, then id)."""
        out: dict[str, list[HookEvent]] = {}
        for ev in self.events:
            out.setdefault(ev.session_id, []).append(ev)
        return out


class MemoryEmits:
    """The emit log of a replay: rows as the table holds them (ids 1, 2, … in the order
    recorded, `related_files` as JSON text). Nothing is queued and no thread runs; the
    counters move as the database writer moves them."""

    def __init__(self, *, counters: Counters) -> None:
        self.counters = counters
        self.rows: list[dict[str, Any]] = []

    def record(self, findings: Iterable[Anomaly], *, ts: int) -> None:
        for f in findings:
            row = emit_row(f, ts=ts)
            row["related_files"] = json_text(row["related_files"])
            self.rows.append({"id": len(self.rows) + 1, **row})
            self.counters.inc("engine.emits_queued")
            self.counters.inc("engine.emits_written")

    def rows_since(self, ts: int) -> list[dict[str, Any]]:
        # Recorded as the clock goes, which never goes back: already in (ts, id) order.
        return [r for r in self.rows if r["ts"] >= ts]

    def start(self) -> None:
        pass

    def stop(self, timeout: float = 10.0) -> None:
        pass

    def flush(self, timeout: float = 10.0) -> bool:
        return True

    def health(self) -> dict[str, object]:
        return emit_health(self.counters, queue=0, maxsize=0)
