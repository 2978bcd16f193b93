"""Retention (design §3) on a real SQLite file and a real PostgreSQL: the TTL counts back
from the newest event, labelled emits keep their evidence, each purge says what it
removed, and rows go in bounded batches."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from gateseed import Session
from sqlalchemy import event

from tma1.clock import ManualClock
from tma1.config import Settings
from tma1.live.service import build_service
from tma1.store import Store, retention
from tma1.store.emits import list_emits, set_label

DAY_MS = 86_400_000
NOW = 400 * DAY_MS
TTL_MS = 60 * DAY_MS


def _ids(store: Store, session: str) -> list[int]:
    return [e.id for e in store.session_events(session, 0) if e.id is not None]


def test_an_old_database_keeps_everything(store: Store) -> None:
    # The newest event is 90 days old: nothing is older than the TTL counted back from it.
    Session(store, "a", ts=NOW - 120 * DAY_MS).read("/repo/a.py").flush()
    Session(store, "b", ts=NOW - 90 * DAY_MS).read("/repo/b.py").emit("stale_file_view").flush()
    before = store.counts()
    done = retention.purge(store, TTL_MS)
    assert done.newest_ts is not None and done.cutoff == done.newest_ts - TTL_MS
    assert done.total == 0
    assert store.counts() == before


def test_a_labelled_emit_keeps_its_label_and_its_sessions_events(store: Store) -> None:
    old = NOW - 100 * DAY_MS
    Session(store, "kept", ts=old).read("/repo/a.py").emit("stale_file_view").flush()
    Session(store, "gone", ts=old).read("/repo/b.py").emit("stale_file_view").flush()
    Session(store, "new", ts=NOW).read("/repo/c.py").flush()
    emits = {e["session_id"]: e["id"] for e in list_emits(store, limit=10)}
    assert set_label(store, emits["kept"], "fp", now_ms=old, note="flaky") is not None
    kept_events = _ids(store, "kept")

    done = retention.purge(store, TTL_MS)

    assert done.rows["tma1_hook_events"] == 2 and done.rows["tma1_anomaly_emits"] == 1
    assert _ids(store, "kept") == kept_events and _ids(store, "gone") == []
    left = list_emits(store, limit=10)
    assert [(e["session_id"], e["labels"]["human"]["label"]) for e in left] == [("kept", "fp")]
    assert store.counts()["tma1_anomaly_labels"] == 1


def test_purge_deletes_in_bounded_batches(store: Store) -> None:
    s = Session(store, "old", ts=NOW - 100 * DAY_MS)
    for i in range(5):
        s.bash(f"make {i}")  # 10 events
    s.flush()
    Session(store, "new", ts=NOW).read("/repo/c.py").flush()
    deletes: list[str] = []
    engine = store._engine

    def count(_conn: object, _cur: object, statement: str, *_rest: object) -> None:
        if statement.lstrip().upper().startswith("DELETE"):
            deletes.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    try:
        done = retention.purge(store, TTL_MS, batch=3)
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert done.rows["tma1_hook_events"] == 10
    assert len(deletes) == 4  # 3 + 3 + 3 + 1, each its own transaction
    assert _ids(store, "old") == [] and len(_ids(store, "new")) == 2


def test_preview_counts_what_purge_removes(store: Store) -> None:
    Session(store, "gone", ts=NOW - 100 * DAY_MS).read("/repo/b.py").emit("test_stuck").flush()
    Session(store, "new", ts=NOW).read("/repo/c.py").flush()
    seen = retention.preview(store, TTL_MS)
    assert seen.rows["tma1_hook_events"] == 2 and seen.rows["tma1_anomaly_emits"] == 1
    assert retention.purge(store, TTL_MS).rows == seen.rows
    assert retention.preview(store, TTL_MS).total == 0
    size = retention.database_bytes(store)
    assert size is not None and size > 0


def test_each_purge_logs_a_warning_with_its_counts(
    db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=db_url,
        watch_files=False,
        data_ttl_seconds=TTL_MS // 1000,
    )
    service = build_service(settings, clock=ManualClock(start_ms=NOW))
    try:
        Session(service.store, "gone", ts=NOW - 100 * DAY_MS).bash("make").flush()
        Session(service.store, "new", ts=NOW).read("/repo/c.py").flush()
        with caplog.at_level(logging.INFO, logger="tma1"):
            removed = service.purge_once()
            assert removed["tma1_hook_events"] == 2
            again = service.purge_once()  # nothing left to remove: nothing said
        assert sum(again.values()) == 0
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1
        assert "removed 2 rows" in warnings[0].getMessage()
        assert "2 hook_events" in warnings[0].getMessage()
    finally:
        service.store.close()


def test_each_machine_purges_only_its_own_rows(db_url: str) -> None:
    """On a team database a daemon counts back from its own newest event and removes only
    its own rows: machine B, back from 100 days away, keeps everything A's TTL would have
    taken. Rows of no known machine (before 0005) go by the database's newest event."""
    a = Store.open(db_url, machine_id="m-a")
    b = Store.open(db_url, migrate=False, machine_id="m-b")
    legacy = Store.open(db_url, migrate=False)  # writes NULL, as before migration 0005
    try:
        Session(a, "a-old", ts=NOW - 100 * DAY_MS).read("/repo/a.py").emit("test_stuck").flush()
        Session(a, "a-new", ts=NOW).read("/repo/a.py").flush()
        Session(b, "b-older", ts=NOW - 130 * DAY_MS).read("/repo/b.py").flush()
        Session(b, "b-last", ts=NOW - 100 * DAY_MS).read("/repo/b.py").emit("test_stuck").flush()
        Session(legacy, "legacy", ts=NOW - 90 * DAY_MS).read("/repo/c.py").flush()
        b_rows = {s: _ids(b, s) for s in ("b-older", "b-last")}

        assert retention.preview(a, TTL_MS).rows["tma1_hook_events"] == 4
        done = retention.purge(a, TTL_MS)

        assert (
            done.newest_ts is not None
            and done.newest_ts >= NOW
            and done.rows["tma1_anomaly_emits"] == 1
        )
        assert done.rows["tma1_hook_events"] == 4  # a-old's 2 and legacy's 2
        assert _ids(a, "a-old") == [] and len(_ids(a, "a-new")) == 2
        assert {s: _ids(b, s) for s in b_rows} == b_rows
        assert len(list_emits(b, limit=10)) == 1
        assert _ids(legacy, "legacy") == []
        # B's own purge counts back from B's newest event (100 days ago): nothing is old.
        assert retention.purge(b, TTL_MS).total == 0
        assert {s: _ids(b, s) for s in b_rows} == b_rows
    finally:
        for st in (a, b, legacy):
            st.close()


def test_a_labelled_session_is_kept_per_machine(db_url: str) -> None:
    """A label on machine B's emit keeps B's session, not another machine's rows that
    happen to carry the same session id."""
    a = Store.open(db_url, machine_id="m-a")
    b = Store.open(db_url, migrate=False, machine_id="m-b")
    try:
        old = NOW - 100 * DAY_MS
        Session(a, "same-id", ts=old).read("/repo/a.py").flush()
        Session(a, "a-new", ts=NOW).read("/repo/a.py").flush()
        Session(b, "same-id", ts=old).read("/repo/b.py").emit("test_stuck").flush()
        Session(b, "b-new", ts=NOW).read("/repo/b.py").flush()
        emit_id = list_emits(b, limit=1)[0]["id"]
        assert set_label(b, emit_id, "tp", now_ms=NOW) is not None
        kept = _ids(b, "same-id")

        assert retention.purge(a, TTL_MS).rows["tma1_hook_events"] == 2
        assert retention.purge(b, TTL_MS).total == 0
        assert _ids(a, "same-id") == [] and _ids(b, "same-id") == kept
    finally:
        a.close()
        b.close()
