"""Hook ingest when the database is slow or gone: a budgeted insert with group commit, then
a bounded outage queue (tma1.ingest.outage, journalled by tma1.ingest.journal) behind a
breaker.
docs/reliability.md ("Database slow or gone") gives the policy step by step, and
docs/benchmarks.md ("Hook ingest") how an HTTP hook waits on the event loop with no thread
of its own. `GET /api/health` reports every counter under `ingest`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from queue import Empty, SimpleQueue

from tma1.counters import Counters
from tma1.events import HookEvent
from tma1.ingest.journal import Journal
from tma1.ingest.outage import BACKOFF_MAX_S, BACKOFF_MIN_S, OutageQueue, describe
from tma1.storable.scrub import scrub
from tma1.store import Store
from tma1.store.errors import is_transient

log = logging.getLogger("tma1.ingest")

# States of a hook waiting on the event loop (`_LoopJob.state`), changed under Ingest._lock:
# the worker's commit and the loop's budget timer race, and exactly one of them wins.
_PENDING, _COMMITTED, _EXPIRED = 0, 1, 2

DEFAULT_BUDGET_MS = 400
DEFAULT_MAX_EVENTS = 10_000
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
MAX_WORKERS = 32
GROUP_COMMIT_MAX = 64
DRAIN_S = 10.0
# A worker on one group of hooks for longer than this is stuck (a read that never
# returns): `health` says so, and the server's status is no longer "ok". Nothing on the
# path legitimately takes this long: the database's own waits end within 10 s (SQLite's
# busy timeout) or time out; PostgreSQL's statement timeout is 60 s but the pool's
# connect timeout is 10 s.
STUCK_AFTER_S = 30.0


@dataclass(slots=True, eq=False)
class _LoopJob:
    """A hook awaiting `fut` on the event loop `loop` (an HTTP request, or `submit`'s own).

    `after` runs on the worker once the row is committed and returns the answer; the
    answer reaches the loop through `call_soon_threadsafe`.
    """

    event: HookEvent
    loop: asyncio.AbstractEventLoop
    after: Callable[[HookEvent], str]
    fut: asyncio.Future[str]
    state: int = _PENDING


def _set_answers(answers: list[tuple[asyncio.Future[str], str]]) -> None:
    for fut, answer in answers:
        if not fut.done():  # the request may have been cancelled (a server stopping)
            fut.set_result(answer)


class Ingest:
    """Budgeted inserts for the hook path, with a bounded retry queue. Thread-safe."""

    def __init__(
        self,
        *,
        store: Store,
        counters: Counters,
        on_stored: Callable[[Sequence[HookEvent]], None] | None = None,
        budget_ms: int = DEFAULT_BUDGET_MS,
        max_events: int = DEFAULT_MAX_EVENTS,
        journal: Journal | None = None,
    ) -> None:
        self.store = store
        self.counters = counters
        self.on_stored = on_stored
        self.budget_s = budget_ms / 1000.0
        self._lock = threading.Lock()
        self.queue = OutageQueue(
            store=store,
            counters=counters,
            max_events=max_events,
            max_bytes=DEFAULT_MAX_BYTES,
            journal=journal,
            on_written=self._written,
            on_outage=self._outage,
        )
        # The breaker: when the database went down (monotonic s); None while it is up.
        self._down_since: float | None = None
        self._last_error = ""
        self._inflight = 0  # hooks between submit and their answer (insert + `after`)
        self._workers = 0
        # Worker thread id -> when it took its current group (monotonic s).
        self._busy: dict[int, float] = {}
        self._jobs: SimpleQueue[list[_LoopJob] | None] = SimpleQueue()
        # Hooks submitted on an event loop in one turn of it, handed to the workers
        # together (one wake-up of a worker, not one per hook): loop -> jobs.
        self._handover: dict[asyncio.AbstractEventLoop, list[_LoopJob]] = {}
        # SQLite takes one writer at a time, and a writer that finds the file locked
        # sleeps in SQLite's busy handler (1, 2, 5, 10 … ms) instead of waking when the
        # lock is free. Workers queue on this lock instead (see `_work`): the next one
        # starts the moment the last commit ends, with every hook that arrived meanwhile.
        self._write_lock: contextlib.AbstractContextManager[object] = (
            threading.Lock() if store.dialect == "sqlite" else contextlib.nullcontext()
        )
        self._stopped = False

    # --- the hook path ----------------------------------------------------------------

    def _admit(self, event: HookEvent) -> bool:
        """Scrub `event` and take a worker slot; False: it went to the queue instead."""
        scrub(event)
        if event.metadata.get("truncated"):  # cut by the parser or by scrub, never dropped
            self.counters.inc("ingest.fields_cut")
        with self._lock:
            direct = self._down_since is None and self._inflight < MAX_WORKERS and not self._stopped
            if direct:
                self._inflight += 1
                if self._workers < self._inflight:
                    self._workers += 1
                    threading.Thread(
                        target=self._work, name=f"tma1-ingest-{self._workers}", daemon=True
                    ).start()
        if not direct:
            self.counters.inc("ingest.bypassed")
            self.queue.put(event)
        return direct

    def take_back(self, event: HookEvent) -> None:
        """Queue (and journal) an event answered by a process that died before keeping it
        (`Service`'s spool of big bodies): the flusher writes it."""
        scrub(event)
        self.queue.put(event)

    async def submit_async(self, event: HookEvent, after: Callable[[HookEvent], str]) -> str:
        """Commit `event` for a hook on the event loop, and return its answer.

        Committed within the budget → `after(event)` (run on the worker) is the answer;
        queued, dropped or over budget → "" (the engine cannot see an uncommitted event).
        """
        if not self._admit(event):
            return ""
        loop = asyncio.get_running_loop()
        job = _LoopJob(event, loop, after, loop.create_future())
        with self._lock:
            batch = self._handover.get(loop)
            if batch is None:
                self._handover[loop] = [job]
                loop.call_soon(self._hand_over, loop)
            else:
                batch.append(job)
        timer = loop.call_later(self.budget_s, self._expire, job)
        try:
            return await job.fut
        finally:
            timer.cancel()

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            batch = self._handover.pop(loop)
        self._jobs.put(batch)

    def _expire(self, job: _LoopJob) -> None:
        """The budget ran out for a hook on the loop (runs on the loop)."""
        with self._lock:
            if job.state != _PENDING:
                return  # committed in time: its answer is on the way
            job.state = _EXPIRED
            # Answered without a commit: keep it safe — under the lock, so that a commit
            # settling now finds it journalled and marks it done (else it stayed pending
            # and was replayed at every start).
            self.queue.keep(job.event)
        self.counters.inc("ingest.budget_exceeded")
        self._trip(f"insert took longer than {self.budget_s * 1000:.0f} ms")
        if not job.fut.done():
            job.fut.set_result("")

    def _work(self) -> None:
        while True:
            jobs: list[_LoopJob] = []
            answers: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[str], str]]] = {}
            stop_after = False
            try:
                with self._write_lock:
                    # Group commit. On SQLite one worker at a time takes hooks off the
                    # queue and commits them: hooks that arrive during a commit wait in
                    # the queue, and the next worker takes them all as one group. Each is
                    # still answered only after its own row is committed.
                    item = self._jobs.get()
                    if item is None:
                        return
                    with self._lock:
                        self._busy[threading.get_ident()] = time.monotonic()
                    while True:
                        jobs.extend(item)
                        if len(jobs) >= GROUP_COMMIT_MAX:
                            break
                        try:
                            item = self._jobs.get_nowait()
                        except Empty:
                            break
                        if item is None:
                            stop_after = True
                            break
                    outcomes = self._commit_group(jobs)
                # The answers (sensors, engine) are computed outside the lock, while the
                # next worker commits the next group.
                self._settle(outcomes, answers)
            except BaseException:  # never leave the in-flight count wrong
                log.exception("ingest worker failed on a group of %d hooks", len(jobs))
            finally:
                with self._lock:
                    self._busy.pop(threading.get_ident(), None)
                    self._inflight -= len(jobs)
                # Then one hand-back per loop for the whole group: a hook that has its
                # answer is no longer in flight. A closed loop has nobody waiting.
                for loop, batch in answers.items():
                    with contextlib.suppress(RuntimeError):
                        loop.call_soon_threadsafe(_set_answers, batch)
            if stop_after:
                return

    def _commit_group(self, jobs: list[_LoopJob]) -> list[tuple[_LoopJob, BaseException | None]]:
        """Insert the group's rows; each job with None (committed) or its error."""
        if len(jobs) > 1:
            try:
                self.store.insert_events([j.event for j in jobs], with_ids=True)
            except Exception as exc:
                if is_transient(exc):
                    # An outage fails every row alike: retrying them one by one would wait
                    # out the lock (or the connect timeout) once per row. They go to the
                    # queue together (`_settle` → `_failed`).
                    return [(j, exc) for j in jobs]
                # One bad row must not fail its neighbours: retry them one by one.
            else:
                self.counters.inc("ingest.commits")
                return [(j, None) for j in jobs]
        outcomes: list[tuple[_LoopJob, BaseException | None]] = []
        for j in jobs:
            try:
                self.store.insert_event(j.event)
                self.counters.inc("ingest.commits")
                outcomes.append((j, None))
            except BaseException as exc:
                outcomes.append((j, exc))
        return outcomes

    def _settle(
        self,
        outcomes: list[tuple[_LoopJob, BaseException | None]],
        answers: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[str], str]]],
    ) -> None:
        """Hand each committed or failed hook its outcome (outside the write lock); the
        answers of loop hooks are collected in `answers`, for `_work` to hand back."""
        for job, exc in outcomes:
            with self._lock:
                state = job.state
                if state == _PENDING:
                    job.state = _COMMITTED
            if state == _EXPIRED:  # answered empty already: the insert outlived the budget
                if exc is None:
                    self.counters.inc("ingest.late_commits")
                    self.queue.written([job.event])
                    self._written([job.event])
                else:
                    self._failed(job.event, exc)
                continue
            answer = ""
            try:
                if exc is None:
                    answer = job.after(job.event)
                else:
                    self._failed(job.event, exc)  # queued (or counted) before the answer
            except Exception:
                self.counters.inc("errors.internal")
                log.exception("answering a stored hook failed; answering empty")
            finally:
                answers.setdefault(job.loop, []).append((job.fut, answer))

    def _failed(self, event: HookEvent, exc: BaseException) -> None:
        if is_transient(exc):
            self.counters.inc("ingest.db_errors")
            self._trip(describe(exc))
            self.queue.put(event)
        else:
            self.counters.inc("ingest.rejected_by_db")
            self.queue.written([event])  # journalled when it outlived its budget: done
            log.error(
                "the database refused an event of session %s (dropped): %s",
                event.session_id,
                exc,
            )

    # --- breaker --------------------------------------------------------------------------

    def _trip(self, reason: str) -> None:
        with self._lock:
            self._last_error = reason
            if self._down_since is not None:
                return
            self._down_since = time.monotonic()
        self.counters.inc("ingest.outages")
        log.warning("database unavailable or slow (%s): queueing hook events", reason)

    def _recovered(self) -> None:
        with self._lock:
            since = self._down_since
            if since is None:
                return
            self._down_since = None
        backlog = self.queue.pending()
        log.warning(
            "database back after %.1f s; %d queued events left to flush",
            time.monotonic() - since,
            backlog,
        )

    # --- the outage queue's outcomes ------------------------------------------------------

    def _written(self, events: Sequence[HookEvent]) -> None:
        self._recovered()
        if self.on_stored is None:
            return
        try:
            self.on_stored(events)
        except Exception:
            log.exception("on_stored callback failed")

    def _outage(self, reason: str) -> None:
        with self._lock:
            self._last_error = reason

    # --- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            self._stopped = False
        self.queue.start()

    def stop(self) -> int:
        """Drain the queue (and wait for in-flight inserts) for up to `DRAIN_S` seconds.

        Returns the number of events lost (left in the queue when the time ran out).
        """
        with self._lock:
            self._stopped = True
        deadline = time.monotonic() + DRAIN_S
        self.queue.stop_flusher(DRAIN_S)
        backoff = BACKOFF_MIN_S
        while time.monotonic() < deadline:
            with self._lock:
                inflight = self._inflight
            pending = self.queue.queued()
            if pending == 0 and inflight == 0:
                break
            if pending and self.queue.flush_once():
                backoff = BACKOFF_MIN_S
                continue
            time.sleep(min(backoff, max(0.0, deadline - time.monotonic())))
            backoff = min(backoff * 2, BACKOFF_MAX_S)
        lost = self.queue.discard()
        with self._lock:
            for _ in range(self._workers):
                self._jobs.put(None)
            self._workers = 0
        if lost:
            self.counters.inc("ingest.lost_at_shutdown", lost)
            log.error("stopping with the database unavailable: %d hook events lost", lost)
        return lost

    def wait_idle(self, timeout: float) -> bool:
        """True once the queue is empty and nothing is in flight (tests, benchmarks)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            # In-flight first: a hook that fails leaves the queue holding it before it
            # stops counting as in flight.
            with self._lock:
                inflight = self._inflight
            if not inflight and not self.queue.pending():
                return True
            time.sleep(0.02)
        return False

    def health(self) -> dict[str, object]:
        queue = self.queue.health()
        now = time.monotonic()
        with self._lock:
            busy = [now - t for t in self._busy.values()]
            state = {
                "database_available": self._down_since is None,
                "down_for_s": 0.0
                if self._down_since is None
                else round(time.monotonic() - self._down_since, 3),
                **queue,
                "inflight": self._inflight,
                "workers": self._workers,
                "stuck_workers": sum(1 for b in busy if b > STUCK_AFTER_S),
                "longest_busy_s": round(max(busy, default=0.0), 3),
                "budget_ms": round(self.budget_s * 1000),
                "last_error": self._last_error,
            }
        counts = self.counters.snapshot("ingest.")
        for key in (
            "commits",  # transactions of the direct path (a group commit is one)
            "queued",
            "flushed",
            "bypassed",
            "budget_exceeded",
            "late_commits",
            "db_errors",
            "retry_failures",
            "outages",
            "dropped_queue_full",
            "rejected_by_db",
            "lost_at_shutdown",
            "recovered_from_journal",
            "fields_cut",  # events with a field cut to its cap (stored, marked `truncated`)
            "spilled",  # queued on disk only: the in-memory queue was full
            "dropped_disk_full",  # neither memory nor the journal could take it
            "not_durable",  # answered while the journal could not be written (kept in memory)
            "journal_unreadable",  # journal lines found cut at start (their events lost)
            "recovered_from_spool",  # big bodies answered, then written after a restart
        ):
            state[key] = counts.get(key, 0)
        return state
