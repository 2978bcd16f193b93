"""Which database errors are an outage and which a refusal, and the driver's errors raised
as SQLAlchemy's where the store calls the driver itself."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection

# SQLSTATE classes of a refused row, whatever exception class the driver files them under:
# psycopg raises "index row size exceeds btree maximum" (54000) as an OperationalError,
# which is no outage — retried, it would hold the breaker open for good.
_REFUSED_CLASSES = ("22", "23", "54")


def is_transient(exc: BaseException) -> bool:
    """An outage (retry later) as opposed to a row the database refuses (never retry)."""
    if isinstance(exc, sa_exc.DBAPIError):
        if exc.connection_invalidated:
            return True
        state = getattr(exc.orig, "sqlstate", None)
        if isinstance(state, str) and state[:2] in _REFUSED_CLASSES:
            return False
    return isinstance(
        exc,
        sa_exc.OperationalError
        | sa_exc.InterfaceError
        | sa_exc.DisconnectionError
        | sa_exc.TimeoutError
        | ConnectionError
        | TimeoutError
        | OSError,
    )


@contextlib.contextmanager
def driver_errors(conn: Connection, statement: str) -> Iterator[None]:
    """Raise the errors of a DBAPI cursor used directly (the hot paths skip SQLAlchemy's
    execution) as `conn.execute` would: a sqlite3.OperationalError ("database is locked",
    a writer that waited out the busy timeout) becomes sqlalchemy.exc.OperationalError.
    Leaked as the driver's class, `is_transient` took that lock for a refused row."""
    dbapi_error: type[Exception] = conn.dialect.loaded_dbapi.Error
    try:
        yield
    except dbapi_error as e:
        raise sa_exc.DBAPIError.instance(
            statement, None, e, dbapi_error, dialect=conn.dialect
        ) from e
