"""The emit log: asynchronous batched writes, flush, graceful stop, and a bounded queue
that drops (counted) instead of blocking the hook."""

from __future__ import annotations

import json
import threading

from sqlalchemy import text

from tma1.counters import Counters
from tma1.engine.anomaly import Anomaly
from tma1.live.emitlog import EmitLog
from tma1.replay.memory import MemoryEmits
from tma1.store import Store


def f(i: int, session: str = "s") -> Anomaly:
    return Anomaly(
        kind="repeated_failed_build",
        severity="high",
        channel="stop_block",
        evidence=f"failed {i} times",
        suggestion="fix it",
        related_files=("/p/a.go", "/p/b.go"),
        subject=f"cmd {i}",
        last_evidence_ts=1,
        first_emitted_at=100 + i,
        session_id=session,
    )


def test_rows_carry_the_seed_columns_and_the_stable_key(store: Store) -> None:
    log = EmitLog(store=store, counters=Counters())
    log.start()
    log.record([f(1), f(2)], ts=500)
    assert log.flush()
    rows = store.emits_since(0)
    assert [(r["ts"], r["session_id"], r["kind"], r["severity"], r["channel"]) for r in rows] == [
        (500, "s", "repeated_failed_build", "high", "stop_block")
    ] * 2
    assert [r["first_emitted_at"] for r in rows] == [101, 102]
    assert [r["stable_key"] for r in rows] == [
        "repeated_failed_build|high|cmd 1",
        "repeated_failed_build|high|cmd 2",
    ]
    assert json.loads(rows[0]["related_files"]) == ["/p/a.go", "/p/b.go"]
    assert (rows[0]["evidence"], rows[0]["suggestion"]) == ("failed 1 times", "fix it")
    log.stop()


def test_stop_writes_everything_queued(store: Store) -> None:
    counters = Counters()
    log = EmitLog(store=store, counters=counters)
    log.start()
    for i in range(1_234):
        log.record([f(i)], ts=i)
    log.stop()
    assert store.counts()["tma1_anomaly_emits"] == 1_234
    assert counters.get("engine.emits_written") == 1_234 and not log.running


def test_a_full_queue_drops_and_counts_without_blocking(sqlite_store: Store) -> None:
    counters = Counters()
    log = EmitLog(store=sqlite_store, counters=counters, maxsize=3)  # writer not started
    done = threading.Event()

    def hook_path() -> None:
        log.record([f(i) for i in range(10)], ts=1)
        done.set()

    threading.Thread(target=hook_path).start()
    assert done.wait(5)  # never blocks, even with no writer draining the queue
    assert log.health()["emits_dropped"] == 7 and log.health()["emit_queue"] == 3
    assert log.flush()
    assert sqlite_store.counts()["tma1_anomaly_emits"] == 3


def test_a_database_error_is_counted_and_the_writer_survives(sqlite_store: Store) -> None:
    counters = Counters()
    log = EmitLog(store=sqlite_store, counters=counters)
    log.start()
    with sqlite_store.begin() as conn:
        conn.execute(text("ALTER TABLE tma1_anomaly_emits RENAME TO emits_away"))
    log.record([f(1)], ts=1)
    assert log.flush()
    assert counters.get("engine.emit_write_errors") == 1 and log.running
    with sqlite_store.begin() as conn:
        conn.execute(text("ALTER TABLE emits_away RENAME TO tma1_anomaly_emits"))
    log.record([f(2)], ts=2)
    log.stop()
    assert [r["stable_key"] for r in sqlite_store.emits_since(0)] == [
        "repeated_failed_build|high|cmd 2"
    ]


def test_the_memory_emit_log_holds_the_rows_the_store_gives_back(store: Store) -> None:
    """Replay's `MemoryEmits` and the live `EmitLog` are peers: the same findings give the
    same rows (ids, column order, `related_files` as JSON text) and the same counters."""
    live_counters, memory_counters = Counters(), Counters()
    live = EmitLog(store=store, counters=live_counters)
    memory = MemoryEmits(counters=memory_counters)
    for sink in (live, memory):
        sink.start()
        sink.record([f(1), f(2, session="t")], ts=1_000)
        sink.record([f(3)], ts=2_000)
        assert sink.flush()
        sink.stop()
    want = store.emits_since(0)
    assert [list(r) for r in memory.rows_since(0)] == [list(r) for r in want]
    assert memory.rows_since(0) == want
    assert memory.rows_since(2_000) == store.emits_since(2_000) == want[-1:]
    assert memory_counters.snapshot("engine.") == live_counters.snapshot("engine.")
    assert memory.health()["emits_written"] == live.health()["emits_written"] == 3
