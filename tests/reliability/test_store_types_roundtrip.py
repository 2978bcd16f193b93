"""The same store on SQLite and PostgreSQL: column types, round trips, migrations."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import inspect, select, text

from tma1.events import HookEvent
from tma1.storable.scrub import scrub
from tma1.store import Store, make_engine, run_migrations
from tma1.store.schema import ALL_TABLES, anomaly_emits, hook_events

# Past 2**31 in ms (2038-01-19 is 2**31 s; epoch ms already need 41 bits).
BIG_TS = 4_102_444_800_000  # 2100-01-01
BIG = 2**62


def _event(**kw: object) -> HookEvent:
    base: dict[str, object] = {
        "ts": BIG_TS,
        "session_id": "s-types",
        "event_type": "PostToolUse",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
    }
    base.update(kw)
    return HookEvent(**base)  # type: ignore[arg-type]


def test_column_types_match_the_design(store: Store) -> None:
    cols = store.column_types("tma1_hook_events")
    assert "BIGINT" in str(cols["ts"]).upper() or store.dialect == "sqlite"
    assert "BOOL" in str(cols["tool_success"]).upper()
    assert "TEXT" in str(cols["tool_result"]).upper()
    if store.dialect == "postgresql":
        # Ids and every epoch-ms column are 64-bit on the team database.
        for table in ALL_TABLES:
            types = {k: v.upper() for k, v in store.column_types(table.name).items()}
            assert types["id"] == "BIGINT", table.name
            if "ts" in types:
                assert types["ts"] == "BIGINT", table.name
        assert store.column_types("tma1_anomaly_emits")["first_emitted_at"].upper() == "BIGINT"


def test_booleans_big_numbers_and_long_text_round_trip(store: Store) -> None:
    long_text = "é" * 200_000 + "\n" + "🙂" * 1000
    ids = [
        store.insert_event(_event(tool_success=True, tool_use_id="t", duration_ms=BIG)),
        store.insert_event(_event(tool_success=False, tool_use_id="f", tool_result=long_text)),
        store.insert_event(_event(tool_success=None, tool_use_id="n")),
    ]
    assert ids == sorted(ids) and len(set(ids)) == 3
    got = {e.tool_use_id: e for e in store.session_events("s-types", since_ts=BIG_TS)}
    assert got["t"].tool_success is True and got["f"].tool_success is False
    assert got["n"].tool_success is None
    assert got["t"].duration_ms == BIG and got["t"].ts == BIG_TS
    assert got["f"].tool_result == long_text
    # The boolean is a real boolean in SQL too (rules may filter on it in the database).
    with store.connect() as conn:
        n = conn.execute(select(hook_events.c.id).where(hook_events.c.tool_success.is_(True))).all()
    assert len(n) == 1


def test_emit_rows_keep_ms_timestamps_and_json(store: Store) -> None:
    row = {
        "ts": BIG_TS,
        "session_id": "s",
        "kind": "repeated_failed_build",
        "severity": "high",
        "channel": "stop_block",
        "evidence": "`make` failed 3×",
        "suggestion": "read the error",
        "related_files": ["a/b.py", "c'd.py"],
        "first_emitted_at": BIG_TS - 1,
        "stable_key": "repeated_failed_build|high|make",
    }
    store.insert_emits([row])
    with store.connect() as conn:
        [got] = [dict(r._mapping) for r in conn.execute(select(anomaly_emits))]
    assert got["ts"] == BIG_TS and got["first_emitted_at"] == BIG_TS - 1
    assert isinstance(got["id"], int)
    assert got["related_files"] == '["a/b.py", "c\'d.py"]'


def test_nul_and_lone_surrogates_are_stored_the_same_everywhere(store: Store) -> None:
    # PostgreSQL text cannot hold NUL and UTF-8 cannot hold a lone surrogate; the hook path
    # scrubs both (tma1.storable.scrub) so one payload stores identically on both backends.
    ev = scrub(
        _event(
            tool_use_id="nul",
            tool_command="echo a\x00b",
            tool_result="x\ud800y",
            metadata={"k\x00": ["v\udfff"]},
        )
    )
    store.insert_event(ev)
    [back] = store.session_events("s-types", since_ts=0)
    assert back.tool_command == "echo a\ufffdb"
    assert back.tool_result == "x\ufffdy"
    assert back.metadata == {"k\ufffd": ["v\ufffd"]}


@pytest.mark.empty_database
def test_concurrent_starters_migrate_once(db_url: str) -> None:
    """Two servers starting on one empty team database at once: both end up at head."""
    errors: list[BaseException] = []
    engines = [make_engine(db_url) for _ in range(3)]

    def migrate(i: int) -> None:
        try:
            run_migrations(engines[i])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=migrate, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        if engines[0].dialect.name == "postgresql":
            assert errors == []
        # SQLite has no advisory locks; a loser may see "table already exists", but the
        # database must still be complete and usable.
        with engines[0].connect() as conn:
            version = conn.execute(text("SELECT version_num FROM alembic_version")).all()
        assert len(version) == 1
        assert {t.name for t in ALL_TABLES} <= set(inspect(engines[0]).get_table_names())
    finally:
        for e in engines:
            e.dispose()


def test_query_parameters_with_nul_do_not_fail(store: Store) -> None:
    """A request's session id with a NUL (a fuzzer's favourite) is a miss, not a 500."""
    store.insert_event(scrub(_event(session_id="a\x00b", tool_use_id="q")))
    assert store.session_events("zz\x00", since_ts=0) == []
    [found] = store.session_events("a\ufffdb", since_ts=0)
    assert found.tool_use_id == "q"
    # PostgreSQL substitutes in parameters too (the same row); SQLite simply misses.
    expected = 1 if store.dialect == "postgresql" else 0
    assert len(store.session_events("a\x00b", since_ts=0)) == expected
