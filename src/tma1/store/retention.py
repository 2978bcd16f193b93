"""Retention (design §3): what `TMA1_DATA_TTL` removes, and removing it.

The TTL counts back from the newest event in the database, not from now: an old database
opened again (a backup, a replay database, a laptop back from holiday) keeps everything.
Labelled emits, their labels and every event of their sessions are the precision gate's
evidence and are never removed. Rows go in bounded batches, each its own transaction, so
a purge of a big PostgreSQL table never holds its locks for long."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, Table, delete, exists, func, select, text

from tma1.store.schema import (
    anomaly_emits,
    anomaly_labels,
    external_changes,
    hook_events,
    messages,
)

if TYPE_CHECKING:
    from tma1.store.db import Store

# Rows per DELETE: small enough that one batch holds PostgreSQL's row locks (and SQLite's
# write lock) for milliseconds, big enough that a month of events takes few round trips.
BATCH_ROWS = 2_000
PURGED_TABLES = (hook_events, messages, external_changes, anomaly_emits)


@dataclass(frozen=True)
class Retention:
    """What one TTL means for one database: the newest event, the cutoff counted back from
    it (None: an empty database, nothing to remove), and the rows older than the cutoff
    that go (per table)."""

    newest_ts: int | None
    cutoff: int | None
    rows: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.rows.values())


def _labelled() -> ColumnElement[bool]:
    return exists().where(anomaly_labels.c.emit_id == anomaly_emits.c.id)


def _kept_session(session_col: Any) -> ColumnElement[bool]:
    """The session has a labelled emit: all of its rows are evidence."""
    return exists().where(
        anomaly_emits.c.session_id == session_col,
        anomaly_labels.c.emit_id == anomaly_emits.c.id,
    )


def _removable(table: Table, cutoff: int) -> ColumnElement[bool]:
    old = table.c.ts < cutoff
    if table is anomaly_emits:
        return old & ~_labelled()
    if table is hook_events or table is messages:
        return old & ~_kept_session(table.c.session_id)
    return old


def newest_event_ts(store: Store) -> int | None:
    value = store.scalar(select(func.max(hook_events.c.ts)))
    return int(value) if value is not None else None


def cutoff_for(store: Store, ttl_ms: int) -> tuple[int | None, int | None]:
    newest = newest_event_ts(store)
    return newest, (None if newest is None else newest - ttl_ms)


def preview(store: Store, ttl_ms: int) -> Retention:
    """What `purge` would remove now, without removing it (`tma1 doctor`)."""
    newest, cutoff = cutoff_for(store, ttl_ms)
    if cutoff is None:
        return Retention(newest, None)
    with store.connect() as conn:
        rows = {
            t.name: int(
                conn.execute(
                    select(func.count()).select_from(t).where(_removable(t, cutoff))
                ).scalar_one()
            )
            for t in PURGED_TABLES
        }
    return Retention(newest, cutoff, rows)


def purge_before(store: Store, cutoff: int, *, batch: int = BATCH_ROWS) -> dict[str, int]:
    """Remove what is older than `cutoff` and not evidence; the rows removed per table.
    Emits go last: while they are there, their sessions' events are judged by them."""
    removed: dict[str, int] = {}
    for table in PURGED_TABLES:
        ids = select(table.c.id).where(_removable(table, cutoff)).limit(batch)
        total = 0
        while True:
            with store.begin() as conn:
                chunk = [int(r[0]) for r in conn.execute(ids)]
                if chunk:
                    conn.execute(delete(table).where(table.c.id.in_(chunk)))
            total += len(chunk)
            if len(chunk) < batch:
                break
        removed[table.name] = total
    return removed


def purge(store: Store, ttl_ms: int, *, batch: int = BATCH_ROWS) -> Retention:
    """Apply the TTL counted back from the newest event: what was removed."""
    newest, cutoff = cutoff_for(store, ttl_ms)
    if cutoff is None:
        return Retention(newest, None)
    return Retention(newest, cutoff, purge_before(store, cutoff, batch=batch))


def database_bytes(store: Store) -> int | None:
    """The database's size on disk as the database itself reports it (None: unknown)."""
    try:
        if store.dialect == "postgresql":
            value = store.scalar(select(func.pg_database_size(func.current_database())))
        else:
            with store.connect() as conn:
                pages = conn.execute(text("PRAGMA page_count")).scalar()
                size = conn.execute(text("PRAGMA page_size")).scalar()
            value = None if pages is None or size is None else int(pages) * int(size)
    except Exception:
        return None
    return int(value) if value is not None else None
