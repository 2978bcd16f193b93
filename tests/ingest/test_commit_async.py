"""The HTTP hook path's ingest (`Ingest.submit_async`) and the driver-level event insert,
on a real SQLite file and a real PostgreSQL."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading

import pytest
from conftest import writers_blocked
from sqlalchemy import select

from tma1.counters import Counters
from tma1.events import HookEvent, parse_payload
from tma1.ingest import Ingest
from tma1.store import Store
from tma1.store.events import _EVENT_COLUMNS, event_values
from tma1.store.schema import hook_events


def event(marker: str, **extra: object) -> HookEvent:
    return parse_payload(
        {
            "session_id": "s-async",
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_use_id": marker,
            "tool_input": {"command": "pytest -q tests/test_a.py::test_x"},
            "tool_response": {
                "stdout": "FAILED tests/test_a.py::test_x - assert 1 == 2\n1 failed",
                "exitCode": 1,
            },
            "cwd": "/repo",
            **extra,
        },
        ts=1_000,
    )


def stored(store: Store) -> dict[str, int]:
    with store.connect() as conn:
        rows = conn.execute(select(hook_events.c.tool_use_id, hook_events.c.id))
        return {r[0]: r[1] for r in rows}


def test_event_values_follow_the_table_columns() -> None:
    # event_values is written out by hand in the table's column order: each column must
    # carry the field of its own name (lists and dicts as JSON text). Every string and
    # number field gets a value of its own, so two swapped columns cannot agree.
    base = event("r", brand_new={"k": "v"})
    assert base.test_ids and base.metadata and base.tool_success is False
    distinct: dict[str, object] = {}
    for n, f in enumerate(dataclasses.fields(HookEvent)):
        value = getattr(base, f.name)
        if isinstance(value, str):
            distinct[f.name] = f"{f.name}-value"
        elif isinstance(value, int) and not isinstance(value, bool):
            distinct[f.name] = 1_000 + n
    rich = dataclasses.replace(base, **distinct)
    bare = parse_payload({"session_id": "s", "hook_event_name": "Stop"}, ts=2)
    for ev in (rich, bare):
        for name, value in zip(_EVENT_COLUMNS, event_values(ev, "m-1"), strict=True):
            if name == "machine_id":  # the store's, not the event's
                assert value == "m-1"
                continue
            field = getattr(ev, name)
            if isinstance(field, (list, dict)):
                assert json.loads(value) == field if value is not None else not field, name
            else:
                assert value == field, name


def test_insert_events_sets_the_ids_of_the_stored_rows(store: Store) -> None:
    store.insert_events([event("before")])  # without ids: stored all the same
    group = [event(f"g{i}") for i in range(5)]
    store.insert_events(group, with_ids=True)
    single = event("single")
    single_id = store.insert_event(single)
    ids = stored(store)
    assert set(ids) == {"before", "single", *(e.tool_use_id for e in group)}
    assert [e.id for e in group] == [ids[e.tool_use_id] for e in group]  # type: ignore[index]
    assert single.id == single_id == ids["single"]
    with store.connect() as conn:
        row = conn.execute(
            select(hook_events.c.tool_success, hook_events.c.test_ids).where(
                hook_events.c.tool_use_id == "g0"
            )
        ).one()
    assert row.tool_success is False and row.test_ids == '["tests/test_a.py::test_x"]'


def test_a_loop_hook_is_answered_by_after_once_its_row_is_committed(store: Store) -> None:
    counters = Counters()
    ingest = Ingest(store=store, counters=counters, budget_ms=30_000)
    seen: dict[str, tuple[str, int | None]] = {}

    def after(ev: HookEvent) -> str:
        # Runs on the worker that committed the row: another connection already sees it.
        with store.connect() as conn:
            row_id = conn.execute(
                select(hook_events.c.id).where(hook_events.c.tool_use_id == ev.tool_use_id)
            ).scalar()
        seen[ev.tool_use_id or ""] = (threading.current_thread().name, row_id)
        return f"answer {ev.tool_use_id}"

    events = [event(f"m{i}") for i in range(24)]

    async def post_all() -> list[str]:
        return await asyncio.gather(*(ingest.submit_async(ev, after) for ev in events))

    answers = asyncio.run(post_all())
    assert answers == [f"answer {ev.tool_use_id}" for ev in events]
    ids = stored(store)
    for ev in events:
        thread, row_id = seen[ev.tool_use_id or ""]
        assert thread.startswith("tma1-ingest-")
        assert row_id == ev.id == ids[ev.tool_use_id or ""]
    assert ingest.health()["inflight"] == 0 and counters.get("ingest.budget_exceeded") == 0
    assert ingest.stop() == 0


def test_an_answer_that_fails_is_empty_and_counted_the_event_stays(store: Store) -> None:
    counters = Counters()
    ingest = Ingest(store=store, counters=counters, budget_ms=30_000)

    def after(ev: HookEvent) -> str:
        raise RuntimeError("engine bug")

    answer = asyncio.run(ingest.submit_async(event("boom"), after))
    assert answer == "" and counters.get("errors.internal") == 1
    assert "boom" in stored(store)
    assert ingest.stop() == 0


def test_over_budget_loop_hook_answers_empty_then_commits_late_once(
    store: Store, db_url: str
) -> None:
    counters = Counters()
    late: list[str] = []
    ingest = Ingest(
        store=store,
        counters=counters,
        budget_ms=100,
        on_stored=lambda evs: late.extend(e.tool_use_id or "" for e in evs),
    )
    answered: list[str] = []

    def after(ev: HookEvent) -> str:
        answered.append(ev.tool_use_id or "")
        return "never heard"

    async def post_blocked() -> tuple[str, str]:
        with writers_blocked(db_url):
            first = await ingest.submit_async(event("slow"), after)
            # The breaker is open now: the next hook goes straight to the queue.
            second = await ingest.submit_async(event("queued"), after)
        return first, second

    assert asyncio.run(post_blocked()) == ("", "")
    assert ingest.wait_idle(30)
    assert counters.get("ingest.budget_exceeded") == 1
    assert counters.get("ingest.late_commits") == 1
    assert counters.get("ingest.bypassed") == 1
    # Neither was answered by the engine; both reached it once stored (on_stored).
    assert answered == [] and sorted(late) == ["queued", "slow"]
    ids = stored(store)
    assert set(ids) == {"queued", "slow"}
    assert ingest.health()["database_available"] is True
    assert ingest.stop() == 0


@pytest.mark.parametrize("n", [1, 8])
def test_stop_waits_for_loop_hooks_in_flight(sqlite_store: Store, n: int) -> None:
    ingest = Ingest(store=sqlite_store, counters=Counters(), budget_ms=30_000)
    release = threading.Event()

    def after(ev: HookEvent) -> str:
        release.wait(5)
        return "ok"

    async def post_and_stop() -> list[str]:
        loop = asyncio.get_running_loop()
        pending = [
            asyncio.ensure_future(ingest.submit_async(event(f"f{i}"), after)) for i in range(n)
        ]
        await asyncio.sleep(0.05)
        assert ingest.health()["inflight"] == n  # committed, still being answered
        stopping = loop.run_in_executor(None, ingest.stop)
        await asyncio.sleep(0.05)
        assert not stopping.done()
        release.set()
        assert await stopping == 0
        return list(await asyncio.gather(*pending))

    assert asyncio.run(post_and_stop()) == ["ok"] * n
    assert len(stored(sqlite_store)) == n
