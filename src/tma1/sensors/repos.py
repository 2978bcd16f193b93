"""Each session's repository (tma1.origin.repo) recorded once, off the hook path: `notice` only
queues the session (bounded; a full queue drops it, to be noticed on its next event),
and one thread reads the repository's config and stores the row."""

from __future__ import annotations

import logging
import queue
import threading
from collections import OrderedDict

from tma1.counters import Counters
from tma1.events import HookEvent
from tma1.origin.machine import host_name
from tma1.origin.repo import path_in_repo, repo_of
from tma1.store import Store

log = logging.getLogger("tma1.sensors.repos")

MAX_PENDING = 1_000
MAX_REMEMBERED = 10_000  # sessions known to be recorded (older ones are asked again)


class RepoRecorder:
    def __init__(self, *, store: Store, counters: Counters) -> None:
        self._store = store
        self._counters = counters
        self._host = host_name()
        self._queue: queue.Queue[tuple[str, str, str | None, int] | None] = queue.Queue(MAX_PENDING)
        self._known: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def notice(self, ev: HookEvent) -> None:
        """Cheap: a dict lookup, and a queue put the first time a session is seen."""
        if not ev.project:
            return
        with self._lock:
            if ev.session_id in self._known:
                return
            self._known[ev.session_id] = None
            while len(self._known) > MAX_REMEMBERED:
                self._known.popitem(last=False)
        try:
            self._queue.put_nowait((ev.session_id, ev.project, ev.cwd, ev.ts))
        except queue.Full:
            self._forget(ev.session_id)
            self._counters.inc("dropped.repos")

    def _forget(self, session_id: str) -> None:
        with self._lock:
            self._known.pop(session_id, None)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="tma1-repos", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=5)
            self._thread = None

    def drain(self) -> None:
        """Record what is queued, on the caller's thread (tests and a stopped recorder)."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                self._record(*item)

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            self._record(*item)

    def _record(self, session_id: str, project: str, cwd: str | None, ts: int) -> None:
        try:
            self._store.record_session_repo(
                session_id,
                repo=repo_of(project),
                repo_path=path_in_repo(cwd, project),
                host=self._host,
                ts=ts,
            )
        except Exception:
            self._forget(session_id)  # the database is away: ask again on its next event
            self._counters.inc("errors.repos")
            log.warning("recording the repository of session %s failed", session_id)
