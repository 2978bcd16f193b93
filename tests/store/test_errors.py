"""`is_transient`: a row the database refuses is no outage, whatever exception class the
driver files it under (issue 31: psycopg raises PostgreSQL's "index row size exceeds
btree maximum" as an OperationalError, and tma1 took it for an outage for good)."""

from __future__ import annotations

import secrets

import pytest
from sqlalchemy import create_engine, exc, text

from tma1.store.errors import is_transient


def test_an_index_entry_too_big_is_a_refusal_not_an_outage(db_url: str) -> None:
    if not db_url.startswith("postgresql"):
        pytest.skip("SQLite indexes take keys of any size")
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            conn.execute(text("CREATE TEMP TABLE big_keys (k text)"))
            conn.execute(text("CREATE INDEX ON big_keys (k)"))
            with pytest.raises(exc.DBAPIError) as raised:
                # Random hex: PostgreSQL compresses an entry first, and this does not shrink.
                conn.execute(
                    text("INSERT INTO big_keys VALUES (:k)"), {"k": secrets.token_hex(2500)}
                )
    finally:
        engine.dispose()
    assert isinstance(raised.value, exc.OperationalError)  # what made it look like an outage
    assert getattr(raised.value.orig, "sqlstate", "") == "54000"
    assert is_transient(raised.value) is False
