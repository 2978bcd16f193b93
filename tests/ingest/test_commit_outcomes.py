"""What `Ingest.submit_async` answers for a committed event, an over-budget one (committed
late, once), and a row the database refuses."""

from __future__ import annotations

import pytest
from ingestkit import committed_now, make_ran
from sqlalchemy import exc as sa_exc
from sqlalchemy import select

from tma1.counters import Counters
from tma1.events import HookEvent
from tma1.ingest import Ingest
from tma1.store import Store
from tma1.store.schema import hook_events


def stored(store: Store) -> dict[str, int]:
    with store.connect() as conn:
        rows = conn.execute(select(hook_events.c.tool_use_id, hook_events.c.id))
        return {r[0]: r[1] for r in rows}


def test_a_hook_is_answered_once_the_row_is_committed_the_row_is_committed(store: Store) -> None:
    counters = Counters()
    ingest = Ingest(store=store, counters=counters, budget_ms=30_000)
    ev = make_ran("sync")
    assert committed_now(ingest, ev) is True
    assert ev.id is not None and stored(store) == {"sync": ev.id}
    assert counters.get("ingest.commits") == 1
    assert ingest.stop() == 0


def test_a_row_the_database_refuses_is_not_answered_and_counted(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    counters = Counters()
    ingest = Ingest(store=store, counters=counters, budget_ms=30_000)

    def refuse(ev: HookEvent) -> int:
        raise sa_exc.IntegrityError("INSERT …", {}, Exception("a data error"))

    monkeypatch.setattr(store, "insert_event", refuse)
    assert committed_now(ingest, make_ran("refused")) is False
    assert counters.get("ingest.rejected_by_db") == 1
    assert "refused" not in stored(store)
    assert ingest.health()["queue_depth"] == 0
    assert ingest.stop() == 0
