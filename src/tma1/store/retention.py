"""Retention (design §3): what `TMA1_DATA_TTL` removes, and removing it.

The TTL counts back from the newest event in the database, not from now: an old database
opened again (a backup, a replay database, a laptop back from holiday) keeps everything.
Labelled emits, their labels and every event of their sessions are the precision gate's
evidence and are never removed. Rows go in bounded batches, each its own transaction, so
a purge of a big PostgreSQL table never holds its locks for long; each batch starts after
the last row the one before it looked at (keyset), so rows kept as evidence are not read
again batch after batch.

On a team database (issue 30) a daemon purges only its own machine's rows, counted back
from its own newest event: another machine's newest event says nothing about this one (a
developer back from holiday keeps their history), and that machine's daemon purges its
own. The rows of no known machine (stored before migration 0005, NULL) belong to nobody on
PostgreSQL: they are purged counted back from the newest event in the database."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, Table, delete, exists, func, select, text, tuple_

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


# Whose rows a pass purges: a condition on a table's machine_id column.
Owner = Callable[[Any], ColumnElement[bool]]


def _labelled() -> ColumnElement[bool]:
    return exists().where(anomaly_labels.c.emit_id == anomaly_emits.c.id)


def _kept_session(session_col: Any, owner: Owner) -> ColumnElement[bool]:
    """The session has a labelled emit of the same owner: all of its rows are evidence."""
    return exists().where(
        anomaly_emits.c.session_id == session_col,
        owner(anomaly_emits.c.machine_id),
        anomaly_labels.c.emit_id == anomaly_emits.c.id,
    )


def _removable(table: Table, cutoff: int, owner: Owner) -> ColumnElement[bool]:
    old = (table.c.ts < cutoff) & owner(table.c.machine_id)
    if table is anomaly_emits:
        return old & ~_labelled()
    if table is hook_events or table is messages:
        return old & ~_kept_session(table.c.session_id, owner)
    return old


def _passes(store: Store) -> list[tuple[Owner, Store]]:
    """(whose rows, the store whose newest event counts) of each pass: this machine's
    rows by its own newest event; on PostgreSQL also the rows of no known machine, by the
    database's newest event (on SQLite `mine` already holds them)."""
    passes: list[tuple[Owner, Store]] = [(store.mine, store)]
    if store.machine_id is not None and store.dialect == "postgresql":
        passes.append((lambda col: col.is_(None), store.team()))
    return passes


def newest_event_ts(store: Store) -> int | None:
    """The newest event of the store's machine (a team view or a store of no machine: of
    the database)."""
    value = store.scalar(
        select(func.max(hook_events.c.ts)).where(store.mine(hook_events.c.machine_id))
    )
    return int(value) if value is not None else None


def cutoff_for(store: Store, ttl_ms: int) -> tuple[int | None, int | None]:
    newest = newest_event_ts(store)
    return newest, (None if newest is None else newest - ttl_ms)


def preview(store: Store, ttl_ms: int) -> Retention:
    """What `purge` would remove now, without removing it (`tma1 doctor`)."""
    newest, cutoff = cutoff_for(store, ttl_ms)
    rows: dict[str, int] = {t.name: 0 for t in PURGED_TABLES}
    with store.connect() as conn:
        for owner, by in _passes(store):
            _, pass_cutoff = cutoff_for(by, ttl_ms)
            if pass_cutoff is None:
                continue
            for t in PURGED_TABLES:
                where = _removable(t, pass_cutoff, owner)
                rows[t.name] += int(
                    conn.execute(select(func.count()).select_from(t).where(where)).scalar_one()
                )
    return Retention(newest, cutoff, rows if cutoff is not None else {})


def purge_before(
    store: Store, cutoff: int, *, batch: int = BATCH_ROWS, owner: Owner | None = None
) -> dict[str, int]:
    """Remove what is older than `cutoff`, of `owner`'s rows (default: the store's
    machine's), and not evidence; the rows removed per table. Emits go last: while they
    are there, their sessions' events are judged by them."""
    whose = owner or store.mine
    removed: dict[str, int] = {}
    for table in PURGED_TABLES:
        key = (table.c.ts, table.c.id)
        after: tuple[int, int] | None = None
        total = 0
        while True:
            q = select(*key).where(_removable(table, cutoff, whose))
            if after is not None:
                q = q.where(tuple_(*key) > tuple_(*after))
            q = q.order_by(*key).limit(batch)
            with store.begin() as conn:
                chunk = [(int(ts), int(i)) for ts, i in conn.execute(q)]
                if chunk:
                    ids = [i for _, i in chunk]
                    conn.execute(delete(table).where(table.c.id.in_(ids)))
            total += len(chunk)
            if len(chunk) < batch:
                break
            after = chunk[-1]
        removed[table.name] = total
    return removed


def purge(store: Store, ttl_ms: int, *, batch: int = BATCH_ROWS) -> Retention:
    """Apply the TTL counted back from the newest event of each owner's rows (this
    machine's; on PostgreSQL also those of no known machine): what was removed."""
    newest, cutoff = cutoff_for(store, ttl_ms)
    removed: dict[str, int] = {t.name: 0 for t in PURGED_TABLES}
    for owner, by in _passes(store):
        _, pass_cutoff = cutoff_for(by, ttl_ms)
        if pass_cutoff is None:
            continue
        for name, n in purge_before(store, pass_cutoff, batch=batch, owner=owner).items():
            removed[name] += n
    return Retention(newest, cutoff, removed if cutoff is not None else {})


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
