"""The hook path when the database is slow or refuses rows (tma1.ingest), on both backends.

"Slow" is a real lock held by another connection: SQLite `BEGIN EXCLUSIVE` (WAL readers
still read), PostgreSQL `LOCK TABLE … IN EXCLUSIVE MODE` (blocks writers, not readers).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from conftest import LiveServer, start_live_server, writers_blocked
from ingestkit import make_payload as payload
from sqlalchemy import create_engine, select, text

from tma1.clock import ManualClock
from tma1.config import Settings
from tma1.store.schema import hook_events


def add_poison_rule(db_url: str) -> None:
    """Make the database refuse rows whose tool_use_id is 'poison' (a data error)."""
    engine = create_engine(db_url)
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            conn.execute(
                text(
                    "CREATE TRIGGER poison BEFORE INSERT ON tma1_hook_events "
                    "WHEN NEW.tool_use_id = 'poison' BEGIN SELECT RAISE(ABORT, 'poison'); END"
                )
            )
        else:
            conn.execute(
                text(
                    "ALTER TABLE tma1_hook_events ADD CONSTRAINT poison "
                    "CHECK (tool_use_id IS NULL OR tool_use_id <> 'poison')"
                )
            )
    engine.dispose()


def markers(live: LiveServer) -> Counter[str]:
    with live.store.connect() as conn:
        return Counter(r[0] for r in conn.execute(select(hook_events.c.tool_use_id)))


@pytest.fixture
def slow_live(settings: Settings, clock: ManualClock) -> Iterator[LiveServer]:
    srv = start_live_server(settings.with_overrides(hook_db_budget_ms=150), clock=clock)
    yield srv
    srv.stop()


def test_slow_database_answers_within_budget_queues_and_recovers(
    slow_live: LiveServer, db_url: str
) -> None:
    live = slow_live
    assert live.hook(payload("before")).status_code == 200
    sent = [f"m{i}" for i in range(20)]
    with writers_blocked(db_url):
        for m in sent:
            r = live.hook(payload(m))
            # The engine cannot see an uncommitted event: 200, empty body.
            assert (r.status_code, r.text) == (200, "")
        h = live.client().get("/api/health").json()
        ingest = h["ingest"]
        assert h["status"] == "degraded" and ingest["database_available"] is False
        assert ingest["budget_exceeded"] >= 1
        # The breaker opened at the first timeout: the rest skipped the direct attempt.
        assert ingest["bypassed"] >= len(sent) - ingest["budget_exceeded"]
        assert ingest["queue_depth"] + ingest["inflight"] >= len(sent) - 1
        assert markers(live)["m0"] == 0  # nothing got past the lock
    assert live.service.ingest is not None
    assert live.service.ingest.wait_idle(30)
    got = markers(live)
    # Every event once: the in-flight insert that outlived its budget is never re-queued.
    assert all(got[m] == 1 for m in sent), got
    h = live.client().get("/api/health").json()
    assert h["status"] == "ok" and h["ingest"]["database_available"] is True
    assert h["events_stored"] == len(sent) + 1
    assert h["ingest"]["dropped_queue_full"] == 0
    # Recovered by itself: the next hook is committed before its answer again.
    live.hook(payload("after"))
    assert markers(live)["after"] == 1
    assert live.service.ingest.health()["queue_depth"] == 0


def test_full_queue_drops_newest_and_counts(
    settings: Settings, clock: ManualClock, db_url: str
) -> None:
    live = start_live_server(
        settings.with_overrides(hook_db_budget_ms=150, ingest_queue_max=5), clock=clock
    )
    try:
        sent = [f"d{i}" for i in range(12)]
        with writers_blocked(db_url):
            for m in sent:
                assert live.hook(payload(m)).status_code == 200
            dropped = live.client().get("/api/health").json()["ingest"]["dropped_queue_full"]
        assert live.service.ingest is not None and live.service.ingest.wait_idle(30)
        got = markers(live)
        stored = [m for m in sent if got[m]]
        # One insert was in flight, five waited in the queue, the rest were counted drops;
        # the survivors are the oldest (time order kept).
        assert dropped == len(sent) - len(stored) == 6
        assert stored == sent[: len(stored)]
    finally:
        live.stop()


def test_rows_the_database_refuses_are_dropped_not_retried(
    slow_live: LiveServer, db_url: str
) -> None:
    live = slow_live
    add_poison_rule(db_url)
    r = live.hook(payload("poison"))
    assert (r.status_code, r.text) == (200, "")
    assert live.service.ingest is not None
    assert live.service.ingest.health()["rejected_by_db"] == 1
    # The same refusal from the queue must not stall it: neighbours get through.
    with writers_blocked(db_url):
        for m in ("q1", "poison", "q2"):
            assert live.hook(payload(m)).status_code == 200
    assert live.service.ingest.wait_idle(30)
    got = markers(live)
    assert got["q1"] == 1 and got["q2"] == 1 and got["poison"] == 0
    h = live.service.ingest.health()
    assert h["rejected_by_db"] == 2 and h["database_available"] is True
    assert h["queue_depth"] == 0


def test_values_longer_than_their_column_are_cut_on_both_backends(live: LiveServer) -> None:
    long_session = "s" * 300
    r = live.hook({**payload("x" * 250, session=long_session), "permission_mode": "p" * 100})
    assert r.status_code == 200
    with live.store.connect() as conn:
        [row] = conn.execute(select(hook_events)).all()
    assert row.session_id == "s" * 200 and row.tool_use_id == "x" * 200
    assert row.permission_mode == "p" * 64


def test_budget_and_queue_settings_come_from_the_environment() -> None:
    from tma1.config import ConfigError, load_settings

    s = load_settings({"TMA1_HOOK_DB_BUDGET_MS": "250", "TMA1_INGEST_QUEUE_MAX": "5"})
    assert (s.hook_db_budget_ms, s.ingest_queue_max) == (250, 5)
    assert load_settings({}).hook_db_budget_ms == 400
    with pytest.raises(ConfigError, match="TMA1_HOOK_DB_BUDGET_MS"):
        load_settings({"TMA1_HOOK_DB_BUDGET_MS": "5"})
    with pytest.raises(ConfigError, match="TMA1_INGEST_QUEUE_MAX"):
        load_settings({"TMA1_INGEST_QUEUE_MAX": "lots"})
