"""The outage queue of the hook path (tma1.ingest.commit, policy 3–7): events the database
could not take yet, kept in time order in a bounded deque, written back by a flusher thread
with exponential backoff, and — when there is a journal (tma1.ingest.journal) — kept on disk until
they are written, so a `kill -9` during an outage loses nothing the queue accepted. Past
the deque's bound the journal alone holds them (spilled), read back in order once the
deque has drained: the disk, not memory, bounds an outage.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tma1.counters import Counters
from tma1.events import HookEvent
from tma1.ingest.journal import Journal
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
        outcome = "queued"
        with self._lock:
            journal = self.journal
            # Events the flusher holds count too: they are still only in memory.
            pending = len(self._queue) + self._flushing
            full = pending >= self.max_events or self._queued_bytes + size > self.max_bytes
            if journal is not None and journal.has(event):
                full = False  # journalled already (answered over budget): it stays in memory
            elif journal is not None and (full or journal.spilled()):
                # Full, or spilled events are waiting (time order): on disk only.
                outcome = "spilled" if journal.spill(event) else "dropped_disk_full"
                if outcome == "spilled":
                    self._wake_flusher_locked()
            if outcome == "queued" and full:
                outcome = "dropped_queue_full"
            elif outcome == "queued":
                # Before the hook is answered.
                if journal is not None and not journal.append(event):
                    outcome = "queued_not_durable"
                self._enqueue_locked([(event, size)])
        if outcome == "queued_not_durable":  # in memory, not on disk: a crash loses it
            self.counters.inc("ingest.not_durable")
            outcome = "queued"
        self.counters.inc(f"ingest.{outcome}")
        if outcome.startswith("dropped"):
            n = self.counters.get(f"ingest.{outcome}")
            if n == 1 or n % 1000 == 0:  # a full disk must not fill the log as well
                why = "the data dir's disk is full" if "disk" in outcome else "the queue is full"
                log.error(
                    "%s: dropped an event of session %s (%d dropped so far)",
                    why,
                    event.session_id,
                    n,
                )

    def keep(self, event: HookEvent) -> None:
        """Journal `event` (once): its hook is answered before it is committed."""
        if self.journal is not None and not self.journal.append(event):
            self.counters.inc("ingest.not_durable")

    def written(self, events: Sequence[HookEvent]) -> None:
        """These events are in the database: the journal need not keep them."""
        if self.journal is not None:
            self.journal.done(events)

    def _enqueue_locked(self, batch: list[tuple[HookEvent, int]]) -> None:
        """Queue (event, size) pairs at the back, in order, and wake the flusher (started
        lazily, so an Ingest that is never started — in-process callers — still recovers)."""
        self._queue.extend(batch)
        self._queued_bytes += sum(size for _, size in batch)
        self._wake_flusher_locked()

    def _wake_flusher_locked(self) -> None:
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
                while not self._queue and not self._spilled() and not self._stopping.is_set():
                    self._wake.wait(timeout=1.0)
                if not self._queue and not self._spilled():
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
            if len(self._queue) < FLUSH_BATCH and self._spilled():
                # The deque has drained down: read the oldest spilled events back (behind
                # what it holds, which is older).
                assert self.journal is not None
                lost_before = self.journal.unreadable
                loaded = self.journal.unspill(FLUSH_BATCH)
                if self.journal.unreadable > lost_before:
                    self.counters.inc(
                        "ingest.journal_unreadable", self.journal.unreadable - lost_before
                    )
                self._queue.extend((e, _size(e)) for e in loaded)
                self._queued_bytes += sum(_size(e) for e in loaded)
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

    def _spilled(self) -> int:
        return self.journal.spilled() if self.journal is not None else 0

    def start(self) -> None:
        """Put the journal's pending events (answered during an outage before a crash)
        back on the queue, first: as many as the queue holds, the rest stay spilled."""
        self._stopping.clear()
        if self.journal is None:
            return
        recovered = self.journal.recover(keep_in_memory=self.max_events)
        spilled = self.journal.spilled()
        if self.journal.unreadable:
            self.counters.inc("ingest.journal_unreadable", self.journal.unreadable)
        if recovered or spilled:
            with self._lock:
                self._enqueue_locked([(event, _size(event)) for event in recovered])
            self.counters.inc("ingest.recovered_from_journal", len(recovered) + spilled)

    def stop_flusher(self, timeout: float) -> None:
        """End the flusher (within `timeout`); `flush_once` still writes."""
        self._stopping.set()
        with self._lock:
            self._wake.notify_all()
            flusher = self._flusher
        if flusher is not None:
            flusher.join(timeout=timeout)

    def queued(self) -> int:
        """Events waiting in the queue or spilled (not those the flusher is writing)."""
        with self._lock:
            return len(self._queue) + self._spilled()

    def pending(self) -> int:
        """Events not written yet: queued, spilled or being written."""
        with self._lock:
            return len(self._queue) + self._flushing + self._spilled()

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
                "spilled_pending": self._spilled(),  # on disk only, read back in order
                "queue_bytes": self._queued_bytes,
                "queue_max_events": self.max_events,
                "queue_max_bytes": self.max_bytes,
            }
