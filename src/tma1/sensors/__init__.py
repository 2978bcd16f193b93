"""Sensors: the file watcher (external changes, `files.py`) and the transcript tailer
(context occupancy, `transcripts.py`), fed by the hook events the service stores.

`on_event` runs on the hook's critical path: it only updates in-memory attribution
intervals, starts a watcher thread the first time a project is seen, and reads a bounded
slice of a transcript (a larger backlog goes to a background thread); at a `SessionStart`,
also of the transcripts of the project's sessions in a turn (`read_peers`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from tma1.clock import Clock
from tma1.config import Settings
from tma1.counters import Counters
from tma1.engine.bundle import ACTIVE_MS, TURN_ENDED
from tma1.events import HookEvent
from tma1.sensors.files import FileSensor
from tma1.sensors.repos import RepoRecorder
from tma1.sensors.transcripts import TranscriptTailer
from tma1.store import Store
from tma1.store.sessions import session_transcript_path

log = logging.getLogger("tma1.sensors")

REAP_INTERVAL_S = 60.0


class Sensors:
    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        settings: Settings,
        counters: Counters,
        on_project_change: Callable[[str], None],
        on_session_change: Callable[[str], None],
    ) -> None:
        self.settings = settings
        self.counters = counters
        self.files = FileSensor(
            store=store,
            clock=clock,
            settings=settings,
            counters=counters,
            on_project_change=on_project_change,
        )
        self.transcripts = TranscriptTailer(
            store=store, clock=clock, counters=counters, on_session_change=on_session_change
        )
        self.repos = RepoRecorder(store=store, counters=counters)
        self.store = store
        self._stop = threading.Event()
        self._reaper: threading.Thread | None = None

    def on_event(self, event: HookEvent) -> None:
        try:
            self.repos.notice(event)
        except Exception:
            self.counters.inc("errors.sensor")
            log.exception("noting the repository of %s failed", event.session_id)
        if self.settings.watch_files:
            try:
                self.files.on_event(event)
            except Exception:
                self.counters.inc("errors.sensor")
                log.exception("file sensor failed on an event of %s", event.session_id)
        if event.transcript_path:
            try:
                self.transcripts.notice(event.session_id, event.transcript_path, event.agent_source)
            except Exception:
                self.counters.inc("errors.transcripts")
                log.exception("reading transcript %s failed", event.transcript_path)
        # A replay's hooks name no transcript: it feeds the turn ends the tailer would
        # have stored as items of their own (tma1.replay).
        if event.hook_event_name == "SessionStart" and event.project and event.transcript_path:
            try:
                self.read_peers(event.session_id, event.project, event.ts)
            except Exception:
                self.counters.inc("errors.transcripts")
                log.exception("reading the transcripts of %s's peers failed", event.session_id)

    def read_peers(self, session_id: str, project: str, now: int) -> None:
        """Before a session is told who else is active on its project (the bundle, design
        §2.19): read what is new in the transcripts of the sessions whose hooks leave them
        inside a turn. A turn the user interrupted sends no hook; only the transcript says
        it ended (`turn_end` rows), and no hook of that session may ever come to have it
        read. Each read is the hook path's bounded slice."""
        for sid, _ts, agent, last in self.store.project_activity(project, now - ACTIVE_MS, now):
            if sid == session_id or last in TURN_ENDED:
                continue
            path = session_transcript_path(self.store, sid)
            if path:
                self.transcripts.notice(sid, path, agent)

    def start(self) -> None:
        self._stop.clear()
        self.transcripts.start()
        self.repos.start()
        if self.settings.watch_files and self._reaper is None:
            self._reaper = threading.Thread(target=self._reap_loop, name="tma1-reap", daemon=True)
            self._reaper.start()

    def stop(self) -> None:
        self._stop.set()
        if self._reaper is not None:
            self._reaper.join(timeout=5)
            self._reaper = None
        self.files.stop()
        self.transcripts.stop()
        self.repos.stop()

    def _reap_loop(self) -> None:
        while not self._stop.wait(REAP_INTERVAL_S):
            try:
                self.files.reap()
            except Exception:
                log.exception("reaping idle watches failed")

    def health(self) -> dict[str, object]:
        return {
            "watch_files": self.settings.watch_files,
            "files": self.files.health(),
            **self.transcripts.health(),
        }
