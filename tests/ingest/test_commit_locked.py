"""A SQLite file whose write lock another connection holds (a backup, a long `sqlite3`
session: tests/reliability/test_db_outage_under_load.py) is an outage, never a refusal.

Everything here is real: a SQLite file, a second connection holding `BEGIN EXCLUSIVE`,
and the exceptions SQLite and SQLAlchemy raise when an insert waits out the busy timeout.
Only that timeout is shortened (10 s in `make_engine`), so a test waits it out in 0.2 s.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import writers_blocked
from ingestkit import committed_now
from ingestkit import make_ran as event
from ingestkit import markers_in as stored
from sqlalchemy import event as sa_event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine

from tma1.counters import Counters
from tma1.events import HookEvent
from tma1.ingest import Ingest
from tma1.store import Store, make_engine, run_migrations
from tma1.store.errors import is_transient

BUSY_TIMEOUT_MS = 200


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'tma1.db'}"


@pytest.fixture
def locked_engine(url: str) -> Engine:
    """An engine on `url` whose writers give up on a held lock after BUSY_TIMEOUT_MS."""
    engine = make_engine(url)

    @sa_event.listens_for(engine, "connect")
    def _short_busy_timeout(dbapi_conn: Any, _record: Any) -> None:
        # Runs after make_engine's own pragmas (listeners run in order), so it wins.
        dbapi_conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")

    run_migrations(engine)
    return engine


@pytest.fixture
def locked_store(locked_engine: Engine) -> Iterator[Store]:
    st = Store(locked_engine)
    yield st
    st.close()


@pytest.mark.parametrize(
    "insert",
    [
        pytest.param(lambda st: st.insert_event(event("one")), id="insert_event"),
        pytest.param(
            lambda st: st.insert_events([event("a"), event("b")], with_ids=True), id="group"
        ),
        pytest.param(lambda st: st.insert_events([event("a"), event("b")]), id="flush-batch"),
    ],
)
def test_an_insert_that_waits_out_a_held_lock_raises_an_outage(
    locked_store: Store, url: str, insert: Callable[[Store], object]
) -> None:
    with writers_blocked(url), pytest.raises(sa_exc.OperationalError) as raised:
        insert(locked_store)
    assert "database is locked" in str(raised.value)
    assert is_transient(raised.value)
    assert stored(locked_store) == set()  # and the store still works once the lock is gone
    insert(locked_store)
    assert stored(locked_store)


@pytest.mark.parametrize(
    "budget_ms",
    [
        pytest.param(30_000, id="fails-within-budget"),
        pytest.param(50, id="fails-after-budget"),  # the late path: `_settle`
    ],
)
def test_hooks_during_a_held_lock_are_queued_and_stored_once_it_is_released(
    locked_store: Store, url: str, budget_ms: int
) -> None:
    counters = Counters()
    ingest = Ingest(store=locked_store, counters=counters, budget_ms=budget_ms)
    with writers_blocked(url):
        first = committed_now(ingest, event("first"))
        # The breaker is open now: this one goes to the queue, whose flusher then waits
        # out the lock too, more than once.
        second = committed_now(ingest, event("queued"))
        deadline = time.monotonic() + 5
        while counters.get("ingest.retry_failures") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert first is False and second is False
    assert ingest.wait_idle(30)
    health = ingest.health()
    assert health["rejected_by_db"] == 0, health
    assert health["retry_failures"] >= 2, health
    assert stored(locked_store) == {"first", "queued"}
    assert health["database_available"] is True
    assert ingest.stop() == 0


class CountingStore(Store):
    """The real store, counting the single-row inserts the ingest falls back to."""

    singles = 0

    def insert_event(self, ev: HookEvent) -> int:
        self.singles += 1
        return super().insert_event(ev)


def test_a_group_that_meets_a_held_lock_is_queued_whole_not_retried_row_by_row(
    locked_engine: Engine, url: str
) -> None:
    """Every row of a group fails alike on an outage: a row-by-row retry would wait out the
    lock once per row (the busy timeout each), holding a worker for the group's length."""
    st = CountingStore(locked_engine)
    counters = Counters()
    ingest = Ingest(store=st, counters=counters, budget_ms=30_000)

    async def group_of_three() -> list[str]:
        # Submitted in one turn of the loop: handed to the worker as one group.
        return await asyncio.gather(
            *(ingest.submit_async(event(m), lambda _ev: "answered") for m in ("a", "b", "c"))
        )

    with writers_blocked(url):
        answers = asyncio.run(group_of_three())
        assert counters.get("ingest.db_errors") == 3
    assert answers == ["", "", ""]  # queued, answered empty
    assert st.singles == 0
    assert ingest.wait_idle(30)
    assert stored(st) == {"a", "b", "c"}
    assert ingest.health()["rejected_by_db"] == 0
    assert ingest.stop() == 0


def test_a_group_insert_that_rolls_back_leaves_no_ids_behind(store: Store) -> None:
    """Rows inserted before a failing one get ids inside a transaction that then rolls
    back: an event that goes on to the queue must not carry an id that names no row."""
    good, bad, later = event("good"), event("bad"), event("later")
    bad.session_id = None  # type: ignore[assignment]  # NOT NULL: the database refuses it
    with pytest.raises(sa_exc.IntegrityError):
        store.insert_events([good, bad, later], with_ids=True)
    assert (good.id, bad.id, later.id) == (None, None, None)
    assert stored(store) == set()
