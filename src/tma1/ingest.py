"""Hook ingest when the database is slow or gone: a budgeted insert, then a bounded queue.

Policy (docs/reliability.md, "Database slow or gone"):

1. **Normal path.** The insert runs on an ingest worker and the hook waits for its commit,
   at most `budget_ms` (TMA1_HOOK_DB_BUDGET_MS, default 400 ms). Committed in time → the
   engine sees the event and answers; the event is committed before the response is
   written (the invariant of the hook path). Hooks that arrive while a commit runs share
   the next one (group commit); each is still answered only after its own row is
   committed. An HTTP hook (`submit_async`) waits on the event loop, with no thread of
   its own: the worker that committed its row also computes its answer (`after`) and
   hands it back to the loop — one thread hop per hook instead of three
   (docs/benchmarks.md, "Hook ingest").
2. **Slow database.** The budget runs out: the hook answers 200 with an empty body (the
   engine cannot see an event that is not committed). The insert keeps running; if it
   later fails, the event goes to the queue. It is never inserted twice.
3. **Database gone** (a connection or operational error, or the budget ran out): the event
   goes on a bounded in-memory queue (at most `max_events` events and `max_bytes` of
   text). When the queue is full the *newest* event is dropped and counted
   (`ingest.dropped_queue_full`): the queue keeps time order, and the rules read windows
   of time. While the database is known to be down ("breaker open") hooks skip the
   direct attempt and enqueue at once, so they answer in well under a millisecond.
4. **Recovery.** A background thread flushes the queue in batches with exponential
   backoff (50 ms … 2 s). The first successful write closes the breaker: the direct path
   resumes by itself, with no operator action.
5. **Rows the database refuses** (a data error, not an outage) are retried one by one and
   the refused rows dropped and counted (`ingest.rejected_by_db`); one poison event must
   not stall the queue forever. Every event is scrubbed first (tma1.scrub), so the stored
   data is the same on SQLite and PostgreSQL.
6. **Stop.** A graceful stop drains the queue for up to `drain_s` seconds; what is left
   is counted (`ingest.lost_at_shutdown`) and logged — unless a journal keeps it.
7. **Journal** (`tma1 serve`: `ingest-journal.jsonl` in the data dir, tma1.journal). Each
   queued event is also appended to the journal before its hook is answered, and marked
   done once written; on start the journal's pending events go back on the queue. So a
   `kill -9` (or a stop that ran out of time) during an outage loses nothing the queue
   accepted. Without a journal (in-process callers, replay) the queue is memory only.

Every counter is reported by `GET /api/health` under `ingest`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from queue import Empty, SimpleQueue

from sqlalchemy import exc as sa_exc

from tma1.counters import Counters
from tma1.events import HookEvent
from tma1.journal import Journal
from tma1.scrub import scrub
from tma1.store import Store

log = logging.getLogger("tma1.ingest")

# States of a hook waiting on the event loop (`_LoopJob.state`), changed under Ingest._lock:
# the worker's commit and the loop's budget timer race, and exactly one of them wins.
_PENDING, _COMMITTED, _EXPIRED = 0, 1, 2

DEFAULT_BUDGET_MS = 400
DEFAULT_MAX_EVENTS = 10_000
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
MAX_WORKERS = 32
FLUSH_BATCH = 200
GROUP_COMMIT_MAX = 64
BACKOFF_MIN_S = 0.05
BACKOFF_MAX_S = 2.0
DRAIN_S = 10.0

def _size(event: HookEvent) -> int:
    n = 256
    for value in (event.tool_input, event.tool_result, event.tool_command, event.cwd):
        if value:
            n += len(value)
    return n


def _describe(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first[:200]}"


class _SyncJob:
    """A hook whose thread blocks on `fut` (Service.handle_hook, the replay driver)."""

    __slots__ = ("event", "fut")

    def __init__(self, event: HookEvent) -> None:
        self.event = event
        self.fut: Future[int] = Future()


class _LoopJob:
    """A hook awaiting `fut` on the event loop `loop` (an HTTP request).

    `after` runs on the worker once the row is committed and returns the answer; the
    answer reaches the loop through `call_soon_threadsafe`.
    """

    __slots__ = ("after", "event", "fut", "loop", "state")

    def __init__(
        self,
        event: HookEvent,
        loop: asyncio.AbstractEventLoop,
        after: Callable[[HookEvent], str],
    ) -> None:
        self.event = event
        self.loop = loop
        self.fut: asyncio.Future[str] = loop.create_future()
        self.after = after
        self.state = _PENDING


def _set_answers(answers: list[tuple[asyncio.Future[str], str]]) -> None:
    for fut, answer in answers:
        if not fut.done():  # the request may have been cancelled (a server stopping)
            fut.set_result(answer)


def is_transient(exc: BaseException) -> bool:
    """An outage (retry later) as opposed to a row the database refuses (never retry)."""
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return True
    return isinstance(
        exc,
        sa_exc.OperationalError
        | sa_exc.InterfaceError
        | sa_exc.DisconnectionError
        | sa_exc.TimeoutError
        | ConnectionError
        | TimeoutError
        | OSError,
    )


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
        max_bytes: int = DEFAULT_MAX_BYTES,
        drain_s: float = DRAIN_S,
        journal: Journal | None = None,
    ) -> None:
        self.store = store
        self.counters = counters
        self.on_stored = on_stored
        self.budget_s = budget_ms / 1000.0
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.drain_s = drain_s
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._queue: deque[tuple[HookEvent, int]] = deque()
        self._queued_bytes = 0
        self._flushing = 0  # events taken off the queue by the flusher, not yet written
        self._down = False  # the breaker: True while the database is known to be down
        self._down_since: float | None = None
        self._last_error = ""
        self._inflight = 0  # hooks between submit and their answer (insert + `after`)
        self._workers = 0
        self._jobs: SimpleQueue[_SyncJob | list[_LoopJob] | None] = SimpleQueue()
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
        self._flusher: threading.Thread | None = None
        # Queued events' journal numbers, by the event object's id (it stays in the queue).
        self.journal = journal
        self._journal_seq: dict[int, int] = {}
        self._stopping = threading.Event()
        self._stopped = False

    # --- the hook path ----------------------------------------------------------------

    def _admit(self, event: HookEvent) -> bool:
        """Scrub `event` and take a worker slot; False: it went to the queue instead."""
        scrub(event)
        with self._lock:
            direct = not self._down and self._inflight < MAX_WORKERS and not self._stopped
            if direct:
                self._inflight += 1
                if self._workers < self._inflight:
                    self._workers += 1
                    threading.Thread(
                        target=self._work, name=f"tma1-ingest-{self._workers}", daemon=True
                    ).start()
        if not direct:
            self.counters.inc("ingest.bypassed")
            self._enqueue(event)
        return direct

    def submit(self, event: HookEvent) -> bool:
        """True when the event is committed now; False when it was queued or dropped."""
        if not self._admit(event):
            return False
        job = _SyncJob(event)
        self._jobs.put(job)
        fut = job.fut
        try:
            fut.result(timeout=self.budget_s)
            return True
        except FutureTimeout:
            self._over_budget()
            with self._lock:
                self._journal_locked(event)  # answered without a commit: keep it safe
            # The insert keeps going; whoever finishes it decides where the event ends up.
            fut.add_done_callback(lambda f: self._late(event, f))
            return False
        except Exception as exc:
            self._failed(event, exc)
            return False

    async def submit_async(self, event: HookEvent, after: Callable[[HookEvent], str]) -> str:
        """`submit` for a hook on the event loop, and its answer.

        Committed within the budget → `after(event)` (run on the worker) is the answer;
        queued, dropped or over budget → "" (the engine cannot see an uncommitted event).
        """
        if not self._admit(event):
            return ""
        loop = asyncio.get_running_loop()
        job = _LoopJob(event, loop, after)
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
            self._journal_locked(job.event)  # answered without a commit: keep it safe
        self._over_budget()
        if not job.fut.done():
            job.fut.set_result("")

    def _over_budget(self) -> None:
        self.counters.inc("ingest.budget_exceeded")
        self._trip(f"insert took longer than {self.budget_s * 1000:.0f} ms")

    def _work(self) -> None:
        while True:
            jobs: list[_SyncJob | _LoopJob] = []
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
                    while True:
                        if isinstance(item, list):
                            jobs.extend(item)
                        else:
                            jobs.append(item)
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
                if jobs:
                    with self._lock:
                        self._inflight -= len(jobs)
                # Then one hand-back per loop for the whole group: a hook that has its
                # answer is no longer in flight. A closed loop has nobody waiting.
                for loop, batch in answers.items():
                    with contextlib.suppress(RuntimeError):
                        loop.call_soon_threadsafe(_set_answers, batch)
            if stop_after:
                return

    def _commit_group(
        self, jobs: list[_SyncJob | _LoopJob]
    ) -> list[tuple[_SyncJob | _LoopJob, BaseException | None]]:
        """Insert the group's rows; each job with None (committed) or its error."""
        live = [j for j in jobs if isinstance(j, _LoopJob) or j.fut.set_running_or_notify_cancel()]
        if len(live) > 1:
            try:
                self.store.insert_events([j.event for j in live], with_ids=True)
            except Exception:
                pass  # one bad row must not fail its neighbours: retry them one by one
            else:
                self.counters.inc("ingest.commits")
                return [(j, None) for j in live]
        outcomes: list[tuple[_SyncJob | _LoopJob, BaseException | None]] = []
        for j in live:
            try:
                self.store.insert_event(j.event)
                self.counters.inc("ingest.commits")
                outcomes.append((j, None))
            except BaseException as exc:
                outcomes.append((j, exc))
        return outcomes

    def _settle(
        self,
        outcomes: list[tuple[_SyncJob | _LoopJob, BaseException | None]],
        answers: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[str], str]]],
    ) -> None:
        """Hand each committed or failed hook its outcome (outside the write lock); the
        answers of loop hooks are collected in `answers`, for `_work` to hand back."""
        for job, exc in outcomes:
            if isinstance(job, _SyncJob):
                if exc is None:
                    job.fut.set_result(job.event.id or 0)
                else:
                    job.fut.set_exception(exc)
                continue
            with self._lock:
                state = job.state
                if state == _PENDING:
                    job.state = _COMMITTED
            if state == _EXPIRED:  # answered empty already; as `_late` for a sync hook
                if exc is None:
                    self.counters.inc("ingest.late_commits")
                    self._journal_done([job.event])
                    self._recovered()
                    self._stored([job.event])
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

    def _late(self, event: HookEvent, fut: Future[int]) -> None:
        exc = fut.exception()
        if exc is None:
            self.counters.inc("ingest.late_commits")
            self._journal_done([event])
            self._recovered()
            self._stored([event])
        else:
            self._failed(event, exc)

    def _failed(self, event: HookEvent, exc: BaseException) -> None:
        if is_transient(exc):
            self.counters.inc("ingest.db_errors")
            self._trip(_describe(exc))
            self._enqueue(event)
        else:
            self.counters.inc("ingest.rejected_by_db")
            log.error(
                "the database refused an event of session %s (dropped): %s",
                event.session_id,
                exc,
            )

    # --- breaker --------------------------------------------------------------------------

    def _trip(self, reason: str) -> None:
        with self._lock:
            self._last_error = reason
            if self._down:
                return
            self._down = True
            self._down_since = time.monotonic()
        self.counters.inc("ingest.outages")
        log.warning("database unavailable or slow (%s): queueing hook events", reason)

    def _recovered(self) -> None:
        with self._lock:
            if not self._down:
                return
            self._down = False
            since = self._down_since or time.monotonic()
            self._down_since = None
            backlog = len(self._queue)
        log.warning(
            "database back after %.1f s; %d queued events left to flush",
            time.monotonic() - since,
            backlog,
        )

    # --- the queue --------------------------------------------------------------------

    def _enqueue(self, event: HookEvent) -> None:
        size = _size(event)
        with self._lock:
            # Events the flusher holds count too: they are still only in memory.
            pending = len(self._queue) + self._flushing
            full = pending >= self.max_events or self._queued_bytes + size > self.max_bytes
            if not full:
                self._journal_locked(event)  # before the hook is answered
                self._queue.append((event, size))
                self._queued_bytes += size
                self._wake.notify()
                self._ensure_flusher()
        if full:
            self.counters.inc("ingest.dropped_queue_full")
            log.error("ingest queue full: dropped an event of session %s", event.session_id)
        else:
            self.counters.inc("ingest.queued")

    def _ensure_flusher(self) -> None:
        # Called with the lock held; started lazily so a Service that is never started
        # (tests calling handle_hook directly) still recovers.
        if self._flusher is None or not self._flusher.is_alive():
            self._flusher = threading.Thread(
                target=self._flush_loop, name="tma1-ingest-flush", daemon=True
            )
            self._flusher.start()

    def _take(self) -> list[tuple[HookEvent, int]]:
        with self._lock:
            n = min(FLUSH_BATCH, len(self._queue))
            batch = [self._queue.popleft() for _ in range(n)]
            self._flushing += n  # its bytes stay counted until it is written or dropped
            return batch

    def _put_back(self, batch: list[tuple[HookEvent, int]]) -> None:
        with self._lock:
            self._queue.extendleft(reversed(batch))
            self._flushing -= len(batch)

    def _done(self, batch: list[tuple[HookEvent, int]]) -> None:
        with self._lock:
            self._flushing -= len(batch)
            self._queued_bytes -= sum(s for _, s in batch)

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
        batch = self._take()
        if not batch:
            return True
        events = [e for e, _ in batch]
        try:
            self.store.insert_events(events)
        except Exception as exc:
            if is_transient(exc):
                self._put_back(batch)
                with self._lock:
                    self._last_error = _describe(exc)
                return False
            self._done(batch)
            return self._one_by_one(events)
        self._done(batch)
        self._journal_done(events)
        self.counters.inc("ingest.flushed", len(events))
        self._recovered()
        self._stored(events)
        return True

    def _journal_locked(self, event: HookEvent) -> None:
        """Journal `event` once (called with the lock held)."""
        if self.journal is not None and id(event) not in self._journal_seq:
            seq = self.journal.append(event)
            if seq is not None:
                self._journal_seq[id(event)] = seq

    def _journal_done(self, events: Sequence[HookEvent]) -> None:
        if self.journal is None:
            return
        with self._lock:
            seqs = [s for e in events if (s := self._journal_seq.pop(id(e), None)) is not None]
        self.journal.done(seqs)

    def _one_by_one(self, events: list[HookEvent]) -> bool:
        stored: list[HookEvent] = []
        settled = 0  # stored or refused: either way the queue moved on
        for i, ev in enumerate(events):
            try:
                self.store.insert_event(ev)
                stored.append(ev)
                settled += 1
                self._journal_done([ev])
            except Exception as exc:
                if is_transient(exc):
                    with self._lock:
                        for e in reversed(events[i:]):
                            self._queue.appendleft((e, _size(e)))
                            self._queued_bytes += _size(e)
                    break
                settled += 1
                self._journal_done([ev])
                self.counters.inc("ingest.rejected_by_db")
                log.error("the database refused a queued event (dropped): %s", exc)
        if stored:
            self.counters.inc("ingest.flushed", len(stored))
            self._recovered()
            self._stored(stored)
        return settled > 0 or not events

    def _stored(self, events: Sequence[HookEvent]) -> None:
        if self.on_stored is None:
            return
        try:
            self.on_stored(events)
        except Exception:
            log.exception("on_stored callback failed")

    # --- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            self._stopped = False
            self._stopping.clear()
        if self.journal is not None:
            # Events answered during an outage before a crash: back on the queue first.
            recovered = self.journal.recover()
            with self._lock:
                for seq, event in recovered:
                    size = _size(event)
                    self._queue.append((event, size))
                    self._queued_bytes += size
                    self._journal_seq[id(event)] = seq
                if recovered:
                    self._wake.notify()
                    self._ensure_flusher()
            if recovered:
                self.counters.inc("ingest.recovered_from_journal", len(recovered))

    def stop(self) -> int:
        """Drain the queue (and wait for in-flight inserts) for up to `drain_s` seconds.

        Returns the number of events lost (left in the queue when the time ran out).
        """
        self._stopping.set()
        with self._lock:
            self._stopped = True
            self._wake.notify_all()
            flusher = self._flusher
        deadline = time.monotonic() + self.drain_s
        if flusher is not None:
            flusher.join(timeout=self.drain_s)
        backoff = BACKOFF_MIN_S
        while time.monotonic() < deadline:
            with self._lock:
                pending = len(self._queue)
                inflight = self._inflight
            if pending == 0 and inflight == 0:
                break
            if pending and self.flush_once():
                backoff = BACKOFF_MIN_S
                continue
            time.sleep(min(backoff, max(0.0, deadline - time.monotonic())))
            backoff = min(backoff * 2, BACKOFF_MAX_S)
        with self._lock:
            lost = len(self._queue) + self._flushing
            kept = min(lost, len(self._journal_seq))
            self._journal_seq.clear()
            self._queue.clear()
            self._queued_bytes = 0
            for _ in range(self._workers):
                self._jobs.put(None)
            self._workers = 0
        if self.journal is not None:
            self.journal.close()
        lost -= kept
        if kept:
            log.warning(
                "stopping with the database unavailable: %d hook events kept in the journal "
                "(%s), written on the next start",
                kept,
                self.journal.path if self.journal is not None else "",
            )
        if lost:
            self.counters.inc("ingest.lost_at_shutdown", lost)
            log.error("stopping with the database unavailable: %d hook events lost", lost)
        return lost

    def wait_idle(self, timeout: float) -> bool:
        """True once the queue is empty and nothing is in flight (tests, benchmarks)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not self._queue and not self._flushing and not self._inflight:
                    return True
            time.sleep(0.02)
        return False

    def health(self) -> dict[str, object]:
        with self._lock:
            state = {
                "database_available": not self._down,
                "down_for_s": round(time.monotonic() - self._down_since, 3)
                if self._down_since is not None
                else 0.0,
                "queue_depth": len(self._queue) + self._flushing,
                "queue_bytes": self._queued_bytes,
                "queue_max_events": self.max_events,
                "queue_max_bytes": self.max_bytes,
                "inflight": self._inflight,
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
        ):
            state[key] = counts.get(key, 0)
        return state
