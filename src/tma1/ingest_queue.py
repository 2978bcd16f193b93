"""The outage queue of the hook path (tma1.ingest, policy 3–7): events the database could
not take yet, kept in time order in a bounded deque, written back by a flusher thread with
exponential backoff, and — when there is a journal (tma1.journal) — kept on disk until
they are written, so a `kill -9` during an outage loses nothing the queue accepted.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tma1.counters import Counters
from tma1.events import HookEvent
from tma1.journal import Journal
from tma1.store import Store
from tma1.store.errors import is_transient

log = logging.getLogger("tma1.ingest")

FLUSH_BATCH = 200
BACKOFF_MIN_S = 0.05
BACKOFF_MAX_S = 2.0


def describe(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first[:200]}"


def _size(event: HookEvent) -> int:
    n = 256
    for value in (event.tool_input, event.tool_result, event.tool_command, event.cwd):
        if value:
            n += len(value)
    return n


@dataclass(kw_only=True, eq=False)
class OutageQueue:
    """At most `max_events` events and `max_bytes` of text; full → the newest is dropped
    (counted). `on_written` is called with each batch written; `on_outage` with the
    reason a write failed for want of a database. Thread-safe."""

    store: Store
    counters: Counters
    max_events: int
    max_bytes: int
    journal: Journal | None
    on_written: Callable[[Sequence[HookEvent]], None]
    on_outage: Callable[[str], None]
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _wake: threading.Condition = field(init=False)
    _queue: deque[tuple[HookEvent, int]] = field(default_factory=deque)
    _queued_bytes: int = 0
    _flushing: int = 0  # events taken off the queue by the flusher, not yet written
    _flusher: threading.Thread | None = None
    _stopping: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._wake = threading.Condition(self._lock)

    def put(self, event: HookEvent) -> None:
        size = _size(event)
        with self._lock:
            # Events the flusher holds count too: they are still only in memory.
            pending = len(self._queue) + self._flushing
            full = pending >= self.max_events or self._queued_bytes + size > self.max_bytes
            if not full:
                if self.journal is not None:
                    self.journal.append(event)  # before the hook is answered
                self._enqueue_locked([(event, size)])
        if full:
            self.counters.inc("ingest.dropped_queue_full")
            log.error("ingest queue full: dropped an event of session %s", event.session_id)
        else:
            self.counters.inc("ingest.queued")

    def keep(self, event: HookEvent) -> None:
        """Journal `event` (once): its hook is answered before it is committed."""
        if self.journal is not None:
            self.journal.append(event)

    def written(self, events: Sequence[HookEvent]) -> None:
        """These events are in the database: the journal need not keep them."""
        if self.journal is not None:
            self.journal.done(events)

    def _enqueue_locked(self, batch: list[tuple[HookEvent, int]]) -> None:
        """Queue (event, size) pairs at the back, in order, and wake the flusher (started
        lazily, so an Ingest that is never started — in-process callers — still recovers)."""
        self._queue.extend(batch)
        self._queued_bytes += sum(size for _, size in batch)
        self._wake.notify()
        if self._flusher is None or not self._flusher.is_alive():
            self._flusher = threading.Thread(
                target=self._flush_loop, name="tma1-ingest-flush", daemon=True
            )
            self._flusher.start()

    def _release(self, batch: list[tuple[HookEvent, int]], settled: int) -> None:
        """The first `settled` events of a batch the flusher took are written or refused;
        the rest go back to the front of the queue, in order."""
        with self._lock:
            self._flushing -= len(batch)
            self._queued_bytes -= sum(size for _, size in batch[:settled])
            self._queue.extendleft(reversed(batch[settled:]))

    def _flush_loop(self) -> None:
        backoff = BACKOFF_MIN_S
        while True:
            with self._lock:
                while not self._queue and not self._stopping.is_set():
                    self._wake.wait(timeout=1.0)
                if not self._queue:
                    return
            if self.flush_once():
                backoff = BACKOFF_MIN_S
                continue
            self.counters.inc("ingest.retry_failures")
            if self._stopping.wait(backoff):
                return  # stop() drains what is left itself, within its own deadline
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    def flush_once(self) -> bool:
        """Write one batch from the queue. False on an outage (the batch goes back)."""
        with self._lock:
            n = min(FLUSH_BATCH, len(self._queue))
            batch = [self._queue.popleft() for _ in range(n)]
            self._flushing += n  # its bytes stay counted until it is written or dropped
        if not batch:
            return True
        events = [e for e, _ in batch]
        try:
            self.store.insert_events(events)
        except Exception as exc:
            if is_transient(exc):
                self._release(batch, 0)
                self.on_outage(describe(exc))
                return False
            return self._one_by_one(batch)
        self._release(batch, len(batch))
        self.written(events)
        self.counters.inc("ingest.flushed", len(events))
        self.on_written(events)
        return True

    def _one_by_one(self, batch: list[tuple[HookEvent, int]]) -> bool:
        stored: list[HookEvent] = []
        settled = 0  # stored or refused: either way the queue moved on
        for ev, _ in batch:
            try:
                self.store.insert_event(ev)
                stored.append(ev)
            except Exception as exc:
                if is_transient(exc):
                    break
                self.counters.inc("ingest.rejected_by_db")
                log.error("the database refused a queued event (dropped): %s", exc)
            settled += 1
            self.written([ev])
        self._release(batch, settled)
        if stored:
            self.counters.inc("ingest.flushed", len(stored))
            self.on_written(stored)
        return settled > 0

    def start(self) -> None:
        """Put the journal's pending events (answered during an outage before a crash)
        back on the queue, first."""
        self._stopping.clear()
        if self.journal is None:
            return
        recovered = self.journal.recover()
        if recovered:
            with self._lock:
                self._enqueue_locked([(event, _size(event)) for event in recovered])
            self.counters.inc("ingest.recovered_from_journal", len(recovered))

    def stop_flusher(self, timeout: float) -> None:
        """End the flusher (within `timeout`); `flush_once` still writes."""
        self._stopping.set()
        with self._lock:
            self._wake.notify_all()
            flusher = self._flusher
        if flusher is not None:
            flusher.join(timeout=timeout)

    def queued(self) -> int:
        """Events waiting in the queue (not those the flusher is writing)."""
        with self._lock:
            return len(self._queue)

    def pending(self) -> int:
        """Events only in memory: queued or being written."""
        with self._lock:
            return len(self._queue) + self._flushing

    def discard(self) -> int:
        """Empty the queue and close the journal: the events lost (left, and not journalled)."""
        with self._lock:
            left = len(self._queue) + self._flushing
            self._queue.clear()
            self._queued_bytes = 0
        if self.journal is None:
            return left
        kept = min(left, self.journal.pending())
        self.journal.close()
        if kept:
            log.warning(
                "stopping with the database unavailable: %d hook events kept in the journal "
                "(%s), written on the next start",
                kept,
                self.journal.path,
            )
        return left - kept

    def health(self) -> dict[str, object]:
        with self._lock:
            return {
                "queue_depth": len(self._queue) + self._flushing,
                "queue_bytes": self._queued_bytes,
                "queue_max_events": self.max_events,
                "queue_max_bytes": self.max_bytes,
            }
