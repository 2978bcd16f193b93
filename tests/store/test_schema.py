"""The schema the migrations build is the schema `tma1.store.schema` declares: tables,
columns with their types, nullability and defaults, and indexes. (`Store.scratch`
builds replay's throw-away databases from the declaration.)"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tma1.store import Store


def _schema(path: Path) -> dict[str, object]:
    con = sqlite3.connect(path)
    try:
        tables = sorted(
            r[0]
            for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not r[0].startswith(("sqlite_", "alembic_"))
        )
        out: dict[str, object] = {}
        for t in tables:
            cols = [tuple(r) for r in con.execute(f"PRAGMA table_info('{t}')")]
            indexes = {}
            for _, name, unique, *_ in con.execute(f"PRAGMA index_list('{t}')"):
                if name.startswith("sqlite_autoindex"):
                    continue
                indexes[name] = (
                    unique,
                    [r[2] for r in con.execute(f"PRAGMA index_info('{name}')")],
                )
            out[t] = {"columns": cols, "indexes": indexes}
        # The indexes' own SQL too: a partial index's WHERE is only there.
        out["index sql"] = {
            r[0]: " ".join(r[1].split())
            for r in con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index'")
            if r[1] and not r[0].startswith("sqlite_")
        }
        return out
    finally:
        con.close()


def _used_scratch(path: Path) -> None:
    store = Store.scratch(path)
    try:
        assert set(store.counts().values()) == {0}  # the first connection makes the tables
    finally:
        store.close()


def test_migrations_and_the_declared_schema_agree(tmp_path: Path) -> None:
    Store.open(f"sqlite:///{tmp_path / 'migrated.db'}").close()
    _used_scratch(tmp_path / "declared.db")
    migrated, declared = _schema(tmp_path / "migrated.db"), _schema(tmp_path / "declared.db")
    assert migrated and set(migrated) == set(declared)
    for table in migrated:
        assert migrated[table] == declared[table], table


def test_a_scratch_database_starts_empty(tmp_path: Path) -> None:
    _used_scratch(tmp_path / "s.db")
    with pytest.raises(FileExistsError):
        Store.scratch(tmp_path / "s.db")


def test_a_scratch_database_nobody_connects_to_is_never_made(tmp_path: Path) -> None:
    Store.scratch(tmp_path / "unused.db").close()
    assert not (tmp_path / "unused.db").exists()


def test_a_scratch_database_is_made_once_when_threads_connect_together(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    store = Store.scratch(tmp_path / "race.db")
    try:
        with ThreadPoolExecutor(8) as pool:
            counts = list(pool.map(lambda _: store.counts(), range(16)))
        assert all(set(c.values()) == {0} for c in counts)
    finally:
        store.close()
