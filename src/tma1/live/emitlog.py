"""`EmitLog`, the live `EmitSink` (tma1.engine.ports): every delivered finding becomes a
`tma1_anomaly_emits` row (`tma1.engine.emitlog.emit_row`), written asynchronously. Its
replay peer is `tma1.replay.memory.MemoryEmits`.

The hook path only enqueues (`record`, never blocks: a full queue drops the row and counts
it). A background thread writes batches. `stop()` writes everything queued before it
returns (graceful shutdown); `flush()` does the same without stopping (tests).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterable
from typing import Any

from tma1.counters import Counters
from tma1.engine.anomaly import Anomaly
from tma1.engine.emitlog import emit_health, emit_row
from tma1.store import Store

log = logging.getLogger("tma1.engine.emitlog")  # the name operators filter on

QUEUE_MAX = 10_000
BATCH_MAX = 500


_STOP = object()  # queued by stop(); a queued threading.Event is a flush() marker


class EmitLog:
    def __init__(self, *, store: Store, counters: Counters, maxsize: int = QUEUE_MAX) -> None:
        self.store = store
        self.counters = counters
        self._q: queue.Queue[Any] = queue.Queue(maxsize=maxsize)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # serialises writers (worker vs. inline flush)

    def record(self, findings: Iterable[Anomaly], *, ts: int) -> None:
        """Queue one row per finding. Never blocks; drops (counted) when the queue is full."""
        for f in findings:
            try:
                self._q.put_nowait(emit_row(f, ts=ts))
                self.counters.inc("engine.emits_queued")
            except queue.Full:
                self.counters.inc("engine.emits_dropped")
                log.warning("emit log queue full; dropped %s for session %s", f.kind, f.session_id)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self.running:
            return
        self._thread = threading.Thread(target=self._run, name="tma1-emitlog", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Write everything queued, then end the worker."""
        thread = self._thread
        if thread is not None and thread.is_alive():
            try:
                # Shutdown may wait for room in the queue; rows are never dropped here.
                self._q.put(_STOP, timeout=timeout)
                thread.join(timeout)
            except queue.Full:
                log.error("emit log writer is stuck; draining what is queued inline")
        self._thread = None
        self._drain_inline()

    def flush(self, timeout: float = 10.0) -> bool:
        """Block until every row queued before this call is in the database."""
        if not self.running:
            self._drain_inline()
            return True
        marker = threading.Event()  # set once every row queued before it is written
        try:
            self._q.put(marker, timeout=timeout)
        except queue.Full:
            return False
        return marker.wait(timeout)

    def rows_since(self, ts: int) -> list[dict[str, Any]]:
        """Rows written with `ts` at or after `ts`, ordered by (ts, id)."""
        return self.store.emits_since(ts)

    def _run(self) -> None:
        while self._write_batch(self._q.get()):
            pass

    def _drain_inline(self) -> None:
        while True:
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                return
            self._write_batch(item)

    def _write_batch(self, item: Any) -> bool:
        """Write `item` and the rows queued after it, up to `BATCH_MAX`, then release the
        flush markers among them; False when the batch ended at `stop()`'s sentinel."""
        batch: list[dict[str, Any]] = []
        markers: list[threading.Event] = []
        while item is not _STOP:
            if isinstance(item, threading.Event):
                markers.append(item)
            else:
                batch.append(item)
            if len(batch) >= BATCH_MAX:
                break
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                break
        try:
            if batch:
                with self._lock:
                    self.store.insert_emits(batch)
                self.counters.inc("engine.emits_written", len(batch))
        except Exception:
            self.counters.inc("engine.emit_write_errors")
            self.counters.inc("engine.emits_lost", len(batch))
            log.exception("could not write %d emit-log rows; they are lost", len(batch))
        finally:  # a waiting flush() must never hang on a failed write
            for m in markers:
                m.set()
        return item is not _STOP

    def health(self) -> dict[str, object]:
        return emit_health(self.counters, queue=self._q.qsize(), maxsize=self._q.maxsize) | {
            "emit_writer_running": self.running
        }
