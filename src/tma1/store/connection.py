"""The engine factory (SQLite pragmas and file modes, PostgreSQL pool, timeouts and text
dumpers), the schema migrations, and the DDL of a scratch database."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.schema import CreateIndex, CreateTable

from tma1.storable.text import storable_text
from tma1.store.schema import POSTGRESQL_ONLY_INDEXES, metadata

_MIGRATIONS = Path(__file__).parent / "migrations"
PG_STATEMENT_TIMEOUT_MS = 60_000
_MIGRATION_LOCK_KEY = 0x746D6131  # "tma1"


def make_engine(url: str) -> Engine:
    """SQLite gets WAL + NORMAL sync + a busy timeout; PostgreSQL a small pool."""
    if url.startswith("sqlite"):
        from tma1.privacy import DIR_MODE, secure_sqlite_file, sqlite_path

        db_file = sqlite_path(url)
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 10},
            pool_size=8,
            max_overflow=8,
        )

        if db_file is not None:

            @event.listens_for(engine, "do_connect")
            def _private_file(*_args: Any) -> None:
                # Right before SQLite opens it, not when the engine is made: an engine
                # nobody connects to (a replay held in memory) leaves no file behind.
                db_file.parent.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
                secure_sqlite_file(db_file)  # 0600, and SQLite gives its WAL/SHM that mode

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.execute("PRAGMA journal_mode=WAL")
            dbapi_conn.execute("PRAGMA synchronous=NORMAL")
            dbapi_conn.execute("PRAGMA busy_timeout=10000")

        return engine
    # PostgreSQL (psycopg 3). pre_ping + recycle: a restarted server or a dropped
    # connection costs one failed checkout, not a failed query; the timeouts bound every
    # wait so an outage surfaces as an error the hook path can queue around (tma1.ingest).
    engine = create_engine(
        url,
        pool_size=10,
        max_overflow=10,
        pool_pre_ping=True,
        pool_recycle=1800,
        pool_timeout=10,
        connect_args={
            "connect_timeout": 5,
            "application_name": "tma1",
            # Detect a peer that vanished without a FIN (a host gone, not a server stopped).
            "keepalives": 1,
            "keepalives_idle": 30,
            "keepalives_interval": 10,
            "keepalives_count": 3,
            # No statement may hold a pooled connection forever (lock waits included).
            "options": f"-c statement_timeout={PG_STATEMENT_TIMEOUT_MS}",
        },
    )

    @event.listens_for(engine, "connect")
    def _no_jit(dbapi_conn: Any, _record: Any) -> None:
        # JIT compiles only the reads the planner costs high — the team's gates over
        # millions of events — and there its compile took 0.65 s of a 2 s read on a fresh
        # connection (bench/bench_team_gates.py, EXPLAIN ANALYZE); every tma1 read is index
        # lookups. Not in `options`: a server older than 11 has no `jit` and would refuse.
        if dbapi_conn.info.server_version >= 110000:
            dbapi_conn.execute("SET jit = off")
            dbapi_conn.commit()

    @event.listens_for(engine, "connect")
    def _nul_safe_strings(dbapi_conn: Any, _record: Any) -> None:
        # Order matters: the last registered is the default (text/unknown), as in psycopg.
        for dumper in _pg_str_dumpers():
            dbapi_conn.adapters.register_dumper(str, dumper)

    return engine


@functools.cache
def _pg_str_dumpers() -> tuple[type, type]:
    """PostgreSQL text cannot hold NUL and UTF-8 cannot hold a lone surrogate; psycopg
    raises on both, so a query parameter from a request (a session id with a NUL in it)
    would be a 500. Both become U+FFFD on the way in — the same substitution tma1.ingest
    makes for hook events, so lookups by such a value find what ingest stored."""
    from psycopg.types.string import StrBinaryDumper, StrDumperUnknown

    class _Binary(StrBinaryDumper):
        def dump(self, obj: str) -> Any:
            return super().dump(storable_text(obj))

    class _Text(StrDumperUnknown):
        def dump(self, obj: str) -> Any:
            return super().dump(storable_text(obj))

    return _Binary, _Text


def database_identity(url: str) -> str:
    """The database a URL names, comparable across processes and safe to show: a SQLite
    file's absolute path, a server URL without its password."""
    from tma1.privacy import sqlite_path

    path = sqlite_path(url)
    if path is not None:
        return "sqlite:///" + str(path.expanduser().absolute())
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.split("@")[-1]


def run_migrations(engine: Engine) -> None:
    """Upgrade to head. On PostgreSQL an advisory lock serialises concurrent starters
    (two `tma1 serve` on one team database must not both create the tables)."""
    # Imported here: alembic costs every `tma1` command ~0.3 s of start-up, and only a
    # command that opens the database for writing migrates.
    _quiet_alembic()  # before the import: alembic sets its plugins up on import
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    with _sqlite_file_lock(engine), engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # Transaction-scoped: released by the commit that ends the upgrade.
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK_KEY})
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


class _OnlyUpgrades(logging.Filter):
    """Alembic's migration log says which upgrades ran (worth a line); not, at every start,
    which implementation and DDL mode it picked."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno > logging.INFO or record.getMessage().startswith("Running ")


@functools.cache
def _quiet_alembic() -> None:
    # Seven "setup plugin …" lines at every start, whatever the log level asked for.
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
    logging.getLogger("alembic.runtime.migration").addFilter(_OnlyUpgrades())


@contextlib.contextmanager
def _sqlite_file_lock(engine: Engine) -> Iterator[None]:
    """SQLite's counterpart of the advisory lock: flock on a file beside the database."""
    path = engine.url.database if engine.dialect.name == "sqlite" else None
    if not path or path == ":memory:" or path.startswith("file:"):
        yield
        return
    lock = f"{path}.migrate-lock"
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        # The holder before us removed the file once done: lock the one there now.
        os.close(fd)
    try:
        yield
    finally:
        # Removed while still held, so no empty lock file stays beside the database; a
        # starter waiting on this one sees it gone and locks afresh (the loop above).
        with contextlib.suppress(OSError):
            os.unlink(lock)
        os.close(fd)


def scratch_ddl(dialect: Any) -> list[str]:
    """CREATE TABLE and CREATE INDEX statements of the whole schema, in dependency order."""
    out: list[str] = []
    for table in metadata.sorted_tables:
        out.append(str(CreateTable(table).compile(dialect=dialect)))
        out.extend(
            str(CreateIndex(ix).compile(dialect=dialect))
            for ix in table.indexes
            if ix not in POSTGRESQL_ONLY_INDEXES or dialect.name == "postgresql"
        )
    return out
