"""Which database errors are an outage and which a refusal."""

from __future__ import annotations

from sqlalchemy import exc as sa_exc


def is_transient(exc: BaseException) -> bool:
    """An outage (retry later) as opposed to a row the database refuses (never retry)."""
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return True
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
