"""The engine factory's SQLite side: migrating leaves nothing beside the database."""

from __future__ import annotations

import threading
from pathlib import Path

from tma1.store import Store


def test_migrating_leaves_no_lock_file_behind(tmp_path: Path) -> None:
    db = tmp_path / "tma1.db"
    stores: list[Store] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            stores.append(Store.open(f"sqlite:///{db}"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    # Several starters at once: each waits for the lock, none finds the schema half-made.
    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == [] and len(stores) == 4
    assert "tma1_hook_events" in stores[0].table_names()
    for s in stores:
        s.close()
    assert sorted(p.name for p in tmp_path.iterdir() if "lock" in p.name) == []


def test_database_identity_is_comparable_and_hides_the_password(tmp_path: Path) -> None:
    from tma1.store.connection import database_identity

    here = tmp_path / "x.db"
    assert database_identity(f"sqlite:///{here}") == f"sqlite:///{here}"
    shown = database_identity("postgresql+psycopg://team:s3cret@db.local:5432/tma1")
    assert "s3cret" not in shown and shown.endswith("@db.local:5432/tma1")
