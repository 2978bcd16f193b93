"""The engine factory, migrations, and `Store`: every query tma1 runs, parameterised."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import logging
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import (
    Engine,
    and_,
    bindparam,
    case,
    create_engine,
    delete,
    event,
    func,
    insert,
    null,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection
from sqlalchemy.schema import CreateIndex, CreateTable

from tma1.events import WRITE_TOOLS, FileChange, HookEvent, Usage, json_text
from tma1.store.schema import (
    ALL_TABLES,
    anomaly_emits,
    anomaly_labels,
    external_changes,
    hook_events,
    messages,
    metadata,
)

log = logging.getLogger("tma1.store")

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
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=10000")
            cur.close()

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
    def _nul_safe_strings(dbapi_conn: Any, _record: Any) -> None:
        _register_pg_str_dumpers(dbapi_conn)

    return engine


def _pg_safe(text_value: str) -> str:
    if "\x00" in text_value:
        text_value = text_value.replace("\x00", "\ufffd")
    try:
        text_value.encode("utf-8")
    except UnicodeEncodeError:
        text_value = "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text_value)
    return text_value


@functools.cache
def _pg_str_dumpers() -> tuple[type, type]:
    from psycopg.types.string import StrBinaryDumper, StrDumperUnknown

    class _Binary(StrBinaryDumper):
        def dump(self, obj: str) -> Any:
            return super().dump(_pg_safe(obj))

    class _Text(StrDumperUnknown):
        def dump(self, obj: str) -> Any:
            return super().dump(_pg_safe(obj))

    return _Binary, _Text


def _register_pg_str_dumpers(dbapi_conn: Any) -> None:
    """PostgreSQL text cannot hold NUL and UTF-8 cannot hold a lone surrogate; psycopg
    raises on both, so a query parameter from a request (a session id with a NUL in it)
    would be a 500. Both become U+FFFD on the way in — the same substitution tma1.ingest
    makes for hook events, so lookups by such a value find what ingest stored."""
    # Order matters: the last registered is the default (text/unknown), as in psycopg.
    for dumper in _pg_str_dumpers():
        dbapi_conn.adapters.register_dumper(str, dumper)


def run_migrations(engine: Engine) -> None:
    """Upgrade to head. On PostgreSQL an advisory lock serialises concurrent starters
    (two `tma1 serve` on one team database must not both create the tables)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    with _sqlite_file_lock(engine), engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # Transaction-scoped: released by the commit that ends the upgrade.
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK_KEY})
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


@contextlib.contextmanager
def _sqlite_file_lock(engine: Engine) -> Iterator[None]:
    """SQLite's counterpart of the advisory lock: flock on a file beside the database."""
    path = engine.url.database if engine.dialect.name == "sqlite" else None
    if not path or path == ":memory:" or path.startswith("file:"):
        yield
        return
    fd = os.open(f"{path}.migrate-lock", os.O_RDWR | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _json(value: Any) -> str:
    return json_text(value)


def _json_paths(paths: list[str]) -> str:
    """`_json(paths)`; one plain path (nearly every event) without the encoder."""
    if not paths:
        return "[]"
    if len(paths) == 1:
        p = paths[0]
        if p.__class__ is str and p.isprintable() and '"' not in p and "\\" not in p:
            return '["' + p + '"]'
    return json_text(paths)


def _loads(text: str | None, default: Any) -> Any:
    if not text:
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default


def event_row(ev: HookEvent) -> dict[str, Any]:
    return {
        "ts": ev.ts,
        "session_id": ev.session_id,
        "event_type": ev.event_type,
        "hook_event_name": ev.hook_event_name,
        "agent_source": ev.agent_source,
        "tool_name": ev.tool_name,
        "tool_use_id": ev.tool_use_id,
        "tool_input": ev.tool_input,
        "tool_result": ev.tool_result,
        "tool_file_path": ev.tool_file_path,
        "tool_files": _json(ev.tool_files),
        "tool_command": ev.tool_command,
        "tool_command_prefix": ev.tool_command_prefix,
        "tool_success": ev.tool_success,
        "failure_kind": ev.failure_kind,
        "tool_error_summary": ev.tool_error_summary,
        "test_ids": _json(ev.test_ids),
        "cwd": ev.cwd,
        "project": ev.project,
        "transcript_path": ev.transcript_path,
        "permission_mode": ev.permission_mode,
        "duration_ms": ev.duration_ms,
        "metadata": _json(ev.metadata) if ev.metadata else None,
        "passed_test_ids": _json(ev.passed_test_ids) if ev.passed_test_ids else None,
        "agent_id": ev.agent_id,
        "agent_type": ev.agent_type,
    }


def row_to_event(row: Any) -> HookEvent:
    m = row._mapping
    return HookEvent(
        id=m["id"],
        ts=m["ts"],
        session_id=m["session_id"],
        event_type=m["event_type"],
        hook_event_name=m["hook_event_name"],
        agent_source=m["agent_source"],
        tool_name=m["tool_name"],
        tool_use_id=m["tool_use_id"],
        tool_input=m["tool_input"],
        tool_result=m["tool_result"],
        tool_file_path=m["tool_file_path"],
        tool_files=_loads(m["tool_files"], []),
        tool_command=m["tool_command"],
        tool_command_prefix=m["tool_command_prefix"],
        tool_success=m["tool_success"],
        failure_kind=m["failure_kind"],
        tool_error_summary=m["tool_error_summary"],
        test_ids=_loads(m["test_ids"], []),
        cwd=m["cwd"],
        project=m["project"],
        transcript_path=m["transcript_path"],
        permission_mode=m["permission_mode"],
        duration_ms=m["duration_ms"],
        metadata=_loads(m["metadata"], {}),
        passed_test_ids=_path_list(m["passed_test_ids"]),
        agent_id=m["agent_id"],
        agent_type=m["agent_type"],
    )


# Column order of `Store.window_events` rows (read positionally: it is the hot path).
_WINDOW_COLUMNS = (
    "id",
    "ts",
    "session_id",
    "event_type",
    "hook_event_name",
    "agent_source",
    "tool_name",
    "tool_use_id",
    "tool_result",
    "tool_file_path",
    "tool_files",
    "tool_command",
    "tool_command_prefix",
    "tool_success",
    "failure_kind",
    "tool_error_summary",
    "test_ids",
    "cwd",
    "project",
    "passed_test_ids",
    "agent_id",
    "metadata",
)


@functools.cache
def _window_sql(dialect: Any, with_after: bool) -> tuple[str, tuple[str, ...], dict[str, Any]]:
    """The window read compiled once per dialect: (SQL, parameter names in order, the
    values of the parameters the query fixes). Rows are read raw: `_window_event` turns
    SQLite's 0/1 into a bool, and no other column may need a result processor."""
    c = hook_events.c
    failed = or_(c.event_type == "PostToolUseFailure", c.tool_success.is_(False))
    cols: list[Any] = [c[name] for name in _WINDOW_COLUMNS]
    cols[_WINDOW_COLUMNS.index("tool_result")] = case((failed, c.tool_result), else_=null()).label(
        "tool_result"
    )
    # The metadata of a Stop (its final message: did the agent report a failure open?) and
    # of an edit (the lines it wrote: did it cause a lint finding?).
    kept = or_(c.hook_event_name == "Stop", *(c.tool_name == t for t in sorted(WRITE_TOOLS)))
    cols[_WINDOW_COLUMNS.index("metadata")] = case((kept, c.metadata), else_=null()).label(
        "metadata"
    )
    q = select(*cols).where(c.session_id == bindparam("session_id"), c.ts >= bindparam("since"))
    if with_after:
        q = q.where(c.id > bindparam("after"))
    compiled = q.order_by(c.ts, c.id).compile(dialect=dialect)
    for name in _WINDOW_COLUMNS:
        impl = hook_events.c[name].type.dialect_impl(dialect)
        if name != "tool_success" and impl.result_processor(dialect, None) is not None:
            raise RuntimeError(f"window column {name} needs a result processor on {dialect.name}")
    names = tuple(compiled.positiontup or compiled.params)
    defaults = {k: v for k, v in compiled.params.items() if v is not None}
    return compiled.string, names, defaults


def _path_list(text: str | None) -> list[str]:
    """A JSON list of strings as stored (`_json`: paths, test ids); `["one plain string"]`
    without the decoder."""
    if not text or text == "[]":
        return []
    if text.startswith('["') and text.endswith('"]'):
        inner = text[2:-2]
        if '"' not in inner and "\\" not in inner:
            return [inner]
    loaded = _loads(text, [])
    return loaded if isinstance(loaded, list) else []


def _window_event(row: Any) -> HookEvent:
    (id_, ts, sid, etype, hook, agent, tool, tuid, result, fpath, files, cmd, prefix, ok,
     fkind, summary, tids, cwd, project, passed, agent_id, meta) = row  # fmt: skip
    # Positional, in HookEvent's field order: this runs for every row of every window.
    # SQLite hands booleans back as 0/1.
    return HookEvent(
        ts, sid, etype, hook, agent, tool, tuid, None, result, fpath, _path_list(files),
        cmd, prefix, None if ok is None else bool(ok), fkind, summary,
        _path_list(tids),
        cwd, project, None, None, None, {} if meta is None else _loads(meta, {}), id_,
        _path_list(passed), agent_id,
    )  # fmt: skip


# Column order of `Store.project_shell_results` rows (the session bundle's open checks).
_SHELL_RESULT_COLUMNS = (
    "id", "ts", "session_id", "event_type", "hook_event_name", "agent_source", "tool_name",
    "tool_command", "tool_success", "failure_kind", "tool_error_summary", "cwd", "project",
    "agent_id", "tool_result",
)  # fmt: skip


def _shell_result(row: Any) -> HookEvent:
    (id_, ts, sid, etype, hook, agent, tool, cmd, ok, fkind, summary, cwd, project, agent_id,
     result) = row  # fmt: skip
    # Positional, in HookEvent's field order (as `_window_event`): a SessionStart in a busy
    # project reads a thousand of these.
    return HookEvent(
        ts, sid, etype, hook, agent, tool, None, None, result, None, [], cmd, None,
        None if ok is None else bool(ok), fkind, summary, [], cwd, project, None, None, None,
        {}, id_, [], agent_id,
    )  # fmt: skip


def row_to_change(row: Any) -> FileChange:
    m = row._mapping
    return FileChange(
        id=m["id"],
        ts=m["ts"],
        project=m["project"],
        path=m["path"],
        change=m["change"],
        size=m["size"],
        content_hash=m["content_hash"],
        writer_session=m["writer_session"],
    )


_INSERT_EVENT = insert(hook_events)
_INSERT_CHANGE = insert(external_changes)


def _change_row(ch: FileChange) -> dict[str, Any]:
    return {
        "ts": ch.ts,
        "project": ch.project,
        "path": ch.path,
        "change": ch.change,
        "size": ch.size,
        "content_hash": ch.content_hash,
        "writer_session": ch.writer_session,
    }


_INSERT_EVENT_RETURNING = insert(hook_events).returning(
    hook_events.c.id, sort_by_parameter_order=True
)

# The hook path's insert on SQLite, at the driver level: the SQL is SQLAlchemy's compiled
# `insert(hook_events)`, cached per dialect, executed with tuples on the cursor of the
# SQLAlchemy connection (inside its transaction). Per event this costs a third of
# `conn.execute(insert, dict)`, whose per-call result and parameter machinery was most
# of the insert (bench/bench_hooks.py, docs/benchmarks.md).
_EVENT_COLUMNS = tuple(c.name for c in hook_events.columns if c.name != "id")


@functools.cache
def _event_insert_sql(dialect: Any) -> tuple[str, tuple[Any, ...]]:
    """(SQL with positional parameters in `_EVENT_COLUMNS` order, bind processors)."""
    compiled = insert(hook_events).compile(dialect=dialect, column_keys=list(_EVENT_COLUMNS))
    if tuple(compiled.positiontup or ()) != _EVENT_COLUMNS:
        raise RuntimeError(f"unexpected parameter order: {compiled.positiontup}")
    processors = tuple(
        hook_events.c[name].type.dialect_impl(dialect).bind_processor(dialect)
        for name in _EVENT_COLUMNS
    )
    return compiled.string, processors


def event_values(ev: HookEvent) -> tuple[Any, ...]:
    """`event_row` as a tuple in `_EVENT_COLUMNS` order."""
    return (
        ev.ts,
        ev.session_id,
        ev.event_type,
        ev.hook_event_name,
        ev.agent_source,
        ev.tool_name,
        ev.tool_use_id,
        ev.tool_input,
        ev.tool_result,
        ev.tool_file_path,
        _json_paths(ev.tool_files),
        ev.tool_command,
        ev.tool_command_prefix,
        ev.tool_success,
        ev.failure_kind,
        ev.tool_error_summary,
        "[]" if not ev.test_ids else _json(ev.test_ids),
        ev.cwd,
        ev.project,
        ev.transcript_path,
        ev.permission_mode,
        ev.duration_ms,
        _json(ev.metadata) if ev.metadata else None,
        _json(ev.passed_test_ids) if ev.passed_test_ids else None,
        ev.agent_id,
        ev.agent_type,
    )


def _insert_events_sqlite(conn: Connection, evs: Sequence[HookEvent], *, with_ids: bool) -> None:
    sql, processors = _event_insert_sql(conn.dialect)
    rows = [event_values(e) for e in evs]
    active = [(i, p) for i, p in enumerate(processors) if p is not None]
    if active:
        for n, row in enumerate(rows):
            values = list(row)
            for i, p in active:
                values[i] = p(values[i])
            rows[n] = tuple(values)
    cursor = conn.connection.cursor()
    try:
        if with_ids:
            # One execute per row: `lastrowid` is exact per statement, whatever rowids
            # the table already holds (an executemany reports only the last one).
            for ev, row in zip(evs, rows, strict=True):
                cursor.execute(sql, row)
                ev.id = int(cursor.lastrowid)
        else:
            cursor.executemany(sql, rows)
    finally:
        cursor.close()


def _scratch_ddl(dialect: Any) -> list[str]:
    """CREATE TABLE and CREATE INDEX statements of the whole schema, in dependency order."""
    out: list[str] = []
    for table in metadata.sorted_tables:
        out.append(str(CreateTable(table).compile(dialect=dialect)))
        out.extend(str(CreateIndex(ix).compile(dialect=dialect)) for ix in table.indexes)
    return out


class Store:
    """All reads and writes. Thread-safe: each call takes its own pooled connection."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @classmethod
    def open(cls, url: str, *, migrate: bool = True) -> Store:
        engine = make_engine(url)
        if migrate:
            run_migrations(engine)
        return cls(engine)

    @classmethod
    def open_readonly(cls, path: str | Path) -> Store:
        """An existing SQLite file, read-only: no migration, no lock file, nothing created
        (a read command on a mistyped path, a copy on a read-only mount). `immutable=1`
        when even SQLite's shared-memory file cannot be made beside it."""
        import sqlite3
        from urllib.parse import quote

        target = Path(path).absolute()
        if not target.is_file():
            raise FileNotFoundError(f"no database file at {target}")
        base = f"file:{quote(str(target))}?mode=ro"
        uri = base
        try:
            probe = sqlite3.connect(uri, uri=True)
            try:
                probe.execute("SELECT count(*) FROM sqlite_master").fetchone()
            finally:
                probe.close()
        except sqlite3.OperationalError:
            uri = base + "&immutable=1"  # a WAL database in a directory we cannot write

        def connect() -> sqlite3.Connection:
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=10)
            conn.execute("PRAGMA query_only=1")
            return conn

        from sqlalchemy.pool import NullPool

        return cls(create_engine("sqlite://", creator=connect, poolclass=NullPool))

    @classmethod
    def scratch(cls, path: str | Path) -> Store:
        """A new SQLite database that nobody keeps (a replay without --db). Its tables come
        straight from `tma1.store.schema` (the migrations give the same schema,
        tests/test_store_schema.py, at three times the cost, and nothing will ever be
        migrated here), and only when something first connects: a replay that holds
        everything in memory never creates the file at all."""
        if Path(path).exists():
            raise FileExistsError(f"{path} exists; a scratch database starts empty")
        engine = make_engine(f"sqlite:///{path}")
        lock = threading.Lock()
        made = False

        @event.listens_for(engine, "connect")
        def _make_tables(dbapi_conn: Any, _record: Any) -> None:
            nonlocal made
            with lock:
                if made:
                    return
                cur = dbapi_conn.cursor()
                try:
                    for statement in _scratch_ddl(engine.dialect):
                        cur.execute(statement)
                    dbapi_conn.commit()
                finally:
                    cur.close()
                made = True

        return cls(engine)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def close(self) -> None:
        self.engine.dispose()

    def table_names(self) -> list[str]:
        from sqlalchemy import inspect

        return list(inspect(self.engine).get_table_names())

    # --- writes ---------------------------------------------------------------------

    def insert_event(self, ev: HookEvent) -> int:
        self.insert_events((ev,), with_ids=True)
        return ev.id  # type: ignore[return-value]

    def insert_events(self, evs: Sequence[HookEvent], *, with_ids: bool = False) -> None:
        """Insert in one transaction; `with_ids` sets each event's id."""
        if not evs:
            return
        with self.engine.begin() as conn:
            if conn.dialect.name == "sqlite":
                _insert_events_sqlite(conn, evs, with_ids=with_ids)
                return
            # PostgreSQL: one multi-row INSERT … RETURNING (SQLAlchemy's insertmanyvalues),
            # one round trip for the whole group.
            rows = [event_row(e) for e in evs]
            if with_ids:
                result = conn.execute(_INSERT_EVENT_RETURNING, rows)
                for ev, row in zip(evs, result.all(), strict=True):
                    ev.id = int(row[0])
            else:
                conn.execute(_INSERT_EVENT, rows)

    def insert_change(self, ch: FileChange) -> int:
        return self.insert_changes([ch])[0]

    def insert_changes(self, changes: Sequence[FileChange]) -> list[int]:
        """Several changes in one transaction (a watcher batch); their ids, in order."""
        ids: list[int] = []
        if not changes:
            return ids
        with self.engine.begin() as conn:
            for ch in changes:
                result = conn.execute(_INSERT_CHANGE, _change_row(ch))
                key = result.inserted_primary_key
                assert key is not None  # an INSERT of one row always has one
                ids.append(int(key[0]))
        return ids

    def set_change_writer(self, ids: Sequence[int], session_id: str) -> int:
        """Attribute still-unattributed changes to `session_id` (a late PreToolUse)."""
        if not ids:
            return 0
        with self.engine.begin() as conn:
            return conn.execute(
                update(external_changes)
                .where(
                    external_changes.c.id.in_(list(ids)),
                    external_changes.c.writer_session.is_(None),
                )
                .values(writer_session=session_id)
            ).rowcount

    def insert_usages(self, usages: Sequence[Usage]) -> None:
        if not usages:
            return
        with self.engine.begin() as conn:
            conn.execute(
                insert(messages),
                [
                    {
                        "ts": u.ts,
                        "session_id": u.session_id,
                        "message_id": u.message_id,
                        "kind": u.kind,
                        "model": u.model,
                        "context_window": u.context_window,
                        "input_tokens": u.input_tokens,
                        "cache_read_tokens": u.cache_read_tokens,
                        "cache_creation_tokens": u.cache_creation_tokens,
                        "output_tokens": u.output_tokens,
                        "occupancy": u.occupancy,
                    }
                    for u in usages
                ],
            )

    def insert_emits(self, rows: Sequence[dict[str, Any]]) -> None:
        """Rows with the emit-log columns; `related_files` may be a list (stored as JSON)."""
        if not rows:
            return
        prepared = [
            {
                **r,
                "related_files": r["related_files"]
                if isinstance(r["related_files"], str)
                else _json(r["related_files"]),
            }
            for r in rows
        ]
        with self.engine.begin() as conn:
            conn.execute(insert(anomaly_emits), prepared)

    # --- reads for the engine ---------------------------------------------------------

    def session_events(
        self, session_id: str, since_ts: int, until_ts: int | None = None
    ) -> list[HookEvent]:
        q = select(hook_events).where(
            hook_events.c.session_id == session_id, hook_events.c.ts >= since_ts
        )
        if until_ts is not None:
            q = q.where(hook_events.c.ts <= until_ts)
        with self.engine.connect() as conn:
            rows = conn.execute(q.order_by(hook_events.c.ts, hook_events.c.id)).all()
        return [row_to_event(r) for r in rows]

    def window_events(
        self, session_id: str, since_ts: int, *, after_id: int | None = None
    ) -> list[HookEvent]:
        """The engine's lean read of a session's events with `ts >= since_ts` (and `id >
        after_id`), ordered by (ts, id). Rules read derived fields only, so this leaves out
        what no rule, resolution check or digest reads — `tool_input`, `transcript_path`,
        `permission_mode`, `duration_ms` (None) and `metadata` ({} but on a Stop or an
        edit: `tma1.events.keeps_metadata`) — and keeps `tool_result` only for
        unsuccessful results (the failure output the rules quote); everything else is as
        `session_events` returns. (The event being answered is not
        read back: its `stop_hook_active` comes from the hook itself.)"""
        sql, names, defaults = _window_sql(self.engine.dialect, after_id is not None)
        given = {"session_id": session_id, "since": since_ts, "after": after_id}
        values = [given[n] if n in given else defaults[n] for n in names]
        params: Any = (
            tuple(values)
            if self.engine.dialect.positional
            else dict(zip(names, values, strict=True))
        )
        # The DBAPI cursor, not a Result: this read runs for every detection, and the
        # generic row machinery costs more than the rows (bench/bench_engine.py).
        with self.engine.connect() as conn:
            cursor = conn.connection.cursor()
            try:
                cursor.execute(sql, params)
                rows = cursor.fetchall()
            finally:
                cursor.close()
        return [_window_event(r) for r in rows]

    def project_changes(
        self, project: str, since_ts: int, until_ts: int | None = None
    ) -> list[FileChange]:
        q = select(external_changes).where(
            external_changes.c.project == project, external_changes.c.ts >= since_ts
        )
        if until_ts is not None:
            q = q.where(external_changes.c.ts <= until_ts)
        with self.engine.connect() as conn:
            rows = conn.execute(q.order_by(external_changes.c.ts, external_changes.c.id)).all()
        return [row_to_change(r) for r in rows]

    def latest_usage(self, session_id: str, until_ts: int | None = None) -> Usage | None:
        q = select(messages).where(messages.c.session_id == session_id)
        if until_ts is not None:
            q = q.where(messages.c.ts <= until_ts)
        q = q.order_by(messages.c.ts.desc(), messages.c.id.desc()).limit(1)
        with self.engine.connect() as conn:
            row = conn.execute(q).first()
        if row is None:
            return None
        m = row._mapping
        return Usage(
            ts=m["ts"],
            session_id=m["session_id"],
            occupancy=m["occupancy"],
            input_tokens=m["input_tokens"],
            cache_read_tokens=m["cache_read_tokens"],
            cache_creation_tokens=m["cache_creation_tokens"],
            output_tokens=m["output_tokens"],
            model=m["model"],
            message_id=m["message_id"],
            kind=m["kind"],
            context_window=m["context_window"],
        )

    def latest_compaction_ts(
        self, session_id: str, until_ts: int | None = None, *, since_ts: int | None = None
    ) -> int | None:
        """When the session's context was last compacted, at or before `until_ts`: the
        start of its current context epoch (design §2.17). A compaction is a `compaction`
        usage row (the transcript's compact boundary, Codex's `compacted`) or a compaction
        hook (`PreCompact`, `PostCompact`, `SessionStart` with `source: compact`). One
        statement of three reads, each the newest row of an index range: (session_id, ts)
        of the messages, (session_id, event_type, ts) of the hook events. `since_ts`
        bounds the ranges from below (the Detector looks again only at what is new)."""
        until = until_ts if until_ts is not None else 2**62
        since = since_ts if since_ts is not None else -(2**62)
        rows = (
            select(messages.c.ts)
            .where(
                messages.c.session_id == session_id,
                messages.c.ts <= until,
                messages.c.ts >= since,
                messages.c.kind == "compaction",
            )
            .order_by(messages.c.ts.desc())
            .limit(1)
        )
        hooks = select(func.max(hook_events.c.ts)).where(
            hook_events.c.session_id == session_id,
            hook_events.c.event_type.in_(("PreCompact", "PostCompact")),
            hook_events.c.ts <= until,
            hook_events.c.ts >= since,
        )
        starts = select(func.max(hook_events.c.ts)).where(
            hook_events.c.session_id == session_id,
            hook_events.c.event_type == "SessionStart",
            hook_events.c.ts <= until,
            hook_events.c.ts >= since,
            hook_events.c.metadata.like('%"source": "compact"%'),
        )
        one = select(rows.scalar_subquery(), hooks.scalar_subquery(), starts.scalar_subquery())
        with self.engine.connect() as conn:
            found = conn.execute(one).one()
        stamps = [int(v) for v in found if v is not None]
        return max(stamps) if stamps else None

    def sessions_in_project(self, project: str, since_ts: int) -> list[str]:
        q = (
            select(hook_events.c.session_id)
            .where(hook_events.c.project == project, hook_events.c.ts >= since_ts)
            .group_by(hook_events.c.session_id)
        )
        with self.engine.connect() as conn:
            return [r[0] for r in conn.execute(q)]

    def session_first_ts(self, session_id: str) -> int | None:
        """The first event we ever stored of this session (the session start)."""
        q = select(func.min(hook_events.c.ts)).where(hook_events.c.session_id == session_id)
        with self.engine.connect() as conn:
            value = conn.execute(q).scalar()
        return int(value) if value is not None else None

    def session_project(self, session_id: str, until_ts: int | None = None) -> str | None:
        """The project of the session's newest event that has one."""
        q = select(hook_events.c.project).where(
            hook_events.c.session_id == session_id, hook_events.c.project.is_not(None)
        )
        if until_ts is not None:
            q = q.where(hook_events.c.ts <= until_ts)
        q = q.order_by(hook_events.c.ts.desc(), hook_events.c.id.desc()).limit(1)
        with self.engine.connect() as conn:
            value = conn.execute(q).scalar()
        return str(value) if value is not None else None

    # --- reads for the session bundle (tma1.engine.bundle) -------------------------------

    def project_shell_results(
        self, project: str, since_ts: int, until_ts: int, *, limit: int = 1_000
    ) -> list[HookEvent]:
        """The project's newest `limit` shell tool results (every session) in [since,
        until], ts ascending, lean: what deciding a check's outcome and quoting its error
        needs — `tool_result` only for a failure without an error summary, no tool input,
        files, test ids or metadata."""
        c = hook_events.c
        failed = or_(c.event_type == "PostToolUseFailure", c.tool_success.is_(False))
        result = case((and_(failed, c.tool_error_summary.is_(None)), c.tool_result), else_=null())
        cols = [c[name] for name in _SHELL_RESULT_COLUMNS[:-1]] + [result.label("tool_result")]
        q = (
            select(*cols)
            .where(
                c.project == project,
                c.ts >= since_ts,
                c.ts <= until_ts,
                c.event_type.in_(("PostToolUse", "PostToolUseFailure")),
                c.tool_command.is_not(None),
            )
            .order_by(c.ts.desc(), c.id.desc())
            .limit(limit)
        )
        with self.engine.connect() as conn:
            rows = conn.execute(q).all()
        return [_shell_result(r) for r in reversed(rows)]

    def project_activity(
        self, project: str, since_ts: int, until_ts: int
    ) -> list[tuple[str, int, str, int | None]]:
        """(session, newest event ts, agent, newest SessionEnd ts or None) of every session
        with an event in the project in [since, until]."""
        c = hook_events.c
        ended = func.max(case((c.hook_event_name == "SessionEnd", c.ts), else_=null()))
        q = (
            select(c.session_id, func.max(c.ts), func.max(c.agent_source), ended)
            .where(c.project == project, c.ts >= since_ts, c.ts <= until_ts)
            .group_by(c.session_id)
        )
        with self.engine.connect() as conn:
            return [
                (str(r[0]), int(r[1]), str(r[2]), None if r[3] is None else int(r[3]))
                for r in conn.execute(q)
            ]

    def session_last_ts(self, session_id: str, before_ts: int) -> int | None:
        """The session's newest event strictly before `before_ts`."""
        q = select(func.max(hook_events.c.ts)).where(
            hook_events.c.session_id == session_id, hook_events.c.ts < before_ts
        )
        with self.engine.connect() as conn:
            value = conn.execute(q).scalar()
        return int(value) if value is not None else None

    def emits_since(self, since_ts: int) -> list[dict[str, Any]]:
        q = (
            select(anomaly_emits)
            .where(anomaly_emits.c.ts >= since_ts)
            .order_by(anomaly_emits.c.ts, anomaly_emits.c.id)
        )
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    # --- reads for the dashboard -------------------------------------------------------

    def session_spans(
        self,
        *,
        limit: int,
        offset: int = 0,
        since_ts: int | None = None,
        session_id: str | None = None,
        search: str | None = None,
    ) -> list[tuple[str, int, int]]:
        """(session_id, first ts, last ts), newest activity first, one page of them.

        `search` matches, case-insensitively and literally (no wildcards), a part of the
        session id or of the project of any of the session's events."""
        ev = hook_events
        last = func.max(ev.c.ts)
        pick = select(ev.c.session_id, func.min(ev.c.ts), last).group_by(ev.c.session_id)
        if since_ts is not None:
            pick = pick.having(last >= since_ts)
        if session_id is not None:
            pick = pick.where(ev.c.session_id == session_id)
        if search:
            needle = search.lower()
            pick = pick.where(
                or_(
                    func.lower(ev.c.session_id).contains(needle, autoescape=True),
                    func.lower(ev.c.project).contains(needle, autoescape=True),
                )
            )
        pick = pick.order_by(last.desc(), ev.c.session_id).limit(limit).offset(offset)
        with self.engine.connect() as conn:
            return [(str(sid), int(lo), int(hi)) for sid, lo, hi in conn.execute(pick).all()]

    def emits_delivered_with(self, emit_id: int) -> list[dict[str, Any]]:
        """The emit-log rows one answer carried together with `emit_id`, in delivery order
        (ids ascending): same session, channel and instant. [] for an unknown id."""
        me = select(anomaly_emits.c.session_id, anomaly_emits.c.ts, anomaly_emits.c.channel).where(
            anomaly_emits.c.id == emit_id
        )
        with self.engine.connect() as conn:
            row = conn.execute(me).first()
            if row is None:
                return []
            q = (
                select(anomaly_emits)
                .where(
                    anomaly_emits.c.session_id == row.session_id,
                    anomaly_emits.c.ts == row.ts,
                    anomaly_emits.c.channel == row.channel,
                )
                .order_by(anomaly_emits.c.id)
            )
            return [dict(r._mapping) for r in conn.execute(q)]

    # --- housekeeping --------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        with self.engine.connect() as conn:
            for table in ALL_TABLES:
                out[table.name] = int(
                    conn.execute(select(func.count()).select_from(table)).scalar_one()
                )
        return out

    def purge(self, before_ts: int) -> dict[str, int]:
        """Delete rows older than `before_ts`; labels go with their emits."""
        removed: dict[str, int] = {}
        with self.engine.begin() as conn:
            old_emits = select(anomaly_emits.c.id).where(anomaly_emits.c.ts < before_ts)
            removed[anomaly_labels.name] = conn.execute(
                delete(anomaly_labels).where(anomaly_labels.c.emit_id.in_(old_emits))
            ).rowcount
            for table in (hook_events, external_changes, messages, anomaly_emits):
                removed[table.name] = conn.execute(
                    delete(table).where(table.c.ts < before_ts)
                ).rowcount
        return removed

    def connect(self) -> Connection:
        return self.engine.connect()

    def execute_many(self, statements: Iterable[Any]) -> None:
        with self.engine.begin() as conn:
            for st in statements:
                conn.execute(st)
