"""`Store`: a database handle with the reads and writes the engine and ingest use.

Its engine is private; the query modules beside it (events, emits, sessions,
gate_queries) take a `Store` and use `connect`/`begin`. Every query is parameterised."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import (
    Engine,
    Table,
    bindparam,
    case,
    create_engine,
    event,
    func,
    insert,
    inspect,
    null,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.pool import NullPool
from sqlalchemy.sql import ColumnElement, Executable

from tma1.events import (
    COMPACT_SOURCE,
    COMPACTION_HOOKS,
    TURN_END,
    FileChange,
    HookEvent,
    Usage,
    json_text,
)
from tma1.store.connection import make_engine, run_migrations, scratch_ddl
from tma1.store.events import (
    CREATION_COLUMNS,
    INSERT_EVENT_RETURNING,
    SHELL_RESULT_COLUMNS,
    creation_event,
    event_row,
    insert_events_sqlite,
    row_to_event,
    window_event,
    window_sql,
)
from tma1.store.schema import (
    ALL_TABLES,
    anomaly_emits,
    external_changes,
    hook_events,
    messages,
    session_repos,
)

_NO_END = 2**62
_INSERT_CHANGE = insert(external_changes).returning(
    external_changes.c.id, sort_by_parameter_order=True
)


class Store:
    """All reads and writes. Thread-safe: each call takes its own pooled connection.

    `machine_id` (issue 30, tma1.origin.machine): the machine whose store this is. Every row it
    writes carries it, and every read but the team views (`team()`) reads only its rows —
    on SQLite also the rows of no known machine (from before migration 0005: a SQLite
    file is one machine's). None: a store of no machine (tests, tools over a copy) writes
    NULL and reads every row."""

    def __init__(self, engine: Engine, *, machine_id: str | None = None) -> None:
        self._engine = engine
        self._machine_id = machine_id
        self._owns_engine = True
        self._team: Store | None = None
        # The reads every detection makes (tma1.live.windows), built once: building a
        # statement and its cache key on each call cost more than running it (cProfile of
        # a Stop's answer).
        x = external_changes.c
        self._project_changes = (
            select(*(c for c in external_changes.c if c.name != "machine_id"))
            .where(
                x.project == bindparam("project"),
                x.ts >= bindparam("since"),
                x.ts <= bindparam("until"),
                self.mine(x.machine_id),
            )
            .order_by(x.ts, x.id)
        )
        m = messages.c
        self._latest_usage = (
            select(messages)
            .where(
                m.session_id == bindparam("session_id"),
                m.ts <= bindparam("until"),
                m.kind != TURN_END,  # a turn end says nothing of the context's size
                self.mine(m.machine_id),
            )
            .order_by(m.ts.desc(), m.id.desc())
            .limit(1)
        )

    @property
    def machine_id(self) -> str | None:
        return self._machine_id

    def mine(self, column: Any) -> ColumnElement[bool]:
        """The condition on a `machine_id` column (of any table or alias) that keeps this
        store's machine's rows: TRUE for a store of no machine or a team view."""
        mid = self._machine_id
        if mid is None:
            return true()
        if self._engine.dialect.name == "sqlite":
            return or_(column == mid, column.is_(None))
        return column == mid  # type: ignore[no-any-return]

    def _project_span(self, project: str, since_ts: int, until_ts: int) -> tuple[Any, ...]:
        """This machine's events of `project` in [since, until] (the bundle's reads)."""
        c = hook_events.c
        return (c.project == project, c.ts >= since_ts, c.ts <= until_ts, self.mine(c.machine_id))

    def owns(self, machine_id: str | None) -> bool:
        """Whether a row stored with `machine_id` is this store's (`mine`, in Python)."""
        mid = self._machine_id
        if mid is None or machine_id == mid:
            return True
        return machine_id is None and self._engine.dialect.name == "sqlite"

    def team(self) -> Store:
        """A view of every machine's rows on the same engine (the team scope's reads).
        One per store, so what a view caches (the gates' verdicts) lasts."""
        if self._machine_id is None:
            return self
        if self._team is None:
            view = Store(self._engine)
            view._owns_engine = False
            self._team = view
        return self._team

    def of_machine(self, machine_id: str) -> Store:
        """A view of one machine's rows on the same engine (the team scope's `machine=`)."""
        if machine_id == self._machine_id:
            return self
        view = Store(self._engine, machine_id=machine_id)
        view._owns_engine = False
        return view

    @classmethod
    def open(cls, url: str, *, migrate: bool = True, machine_id: str | None = None) -> Store:
        engine = make_engine(url)
        if migrate:
            run_migrations(engine)
        return cls(engine, machine_id=machine_id)

    @classmethod
    def open_readonly(cls, path: str | Path, *, machine_id: str | None = None) -> Store:
        """An existing SQLite file, read-only: no migration, no lock file, nothing created
        (a read command on a mistyped path, a copy on a read-only mount). `immutable=1`
        when even SQLite's shared-memory file cannot be made beside it."""
        target = Path(path).absolute()
        if not target.is_file():
            raise FileNotFoundError(f"no database file at {target}")
        base = f"file:{quote(str(target))}?mode=ro"
        uri = base
        try:
            with contextlib.closing(sqlite3.connect(uri, uri=True)) as probe:
                probe.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError:
            uri = base + "&immutable=1"  # a WAL database in a directory we cannot write

        def connect() -> sqlite3.Connection:
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=10)
            conn.execute("PRAGMA query_only=1")
            return conn

        engine = create_engine("sqlite://", creator=connect, poolclass=NullPool)
        return cls(engine, machine_id=machine_id)

    @classmethod
    def scratch(cls, path: str | Path, *, machine_id: str | None = None) -> Store:
        """A new SQLite database that nobody keeps (a replay without --db). Its tables come
        straight from `tma1.store.schema` (the migrations give the same schema,
        tests/store/test_schema.py, at three times the cost, and nothing will ever be
        migrated here), and only when something first connects: a replay that holds
        everything in memory never creates the file at all."""
        if Path(path).exists():
            raise FileExistsError(f"{path} exists; a scratch database starts empty")
        engine = make_engine(f"sqlite:///{path}")

        # first_connect runs once, under SQLAlchemy's mutex (threads connecting together
        # wait for it), and again on the next connect if it raised.
        @event.listens_for(engine, "first_connect")
        def _make_tables(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            try:
                for statement in scratch_ddl(engine.dialect):
                    cur.execute(statement)
                dbapi_conn.commit()
            finally:
                cur.close()

        return cls(engine, machine_id=machine_id)

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    def close(self) -> None:
        if self._owns_engine:
            self._engine.dispose()

    def table_names(self) -> list[str]:
        return list(inspect(self._engine).get_table_names())

    def column_types(self, table: str) -> dict[str, str]:
        """Each column of `table` and its type as the database reports it."""
        return {c["name"]: str(c["type"]) for c in inspect(self._engine).get_columns(table)}

    # --- writes ---------------------------------------------------------------------

    def insert_event(self, ev: HookEvent) -> int:
        self.insert_events((ev,), with_ids=True)
        return ev.id  # type: ignore[return-value]

    def insert_events(self, evs: Sequence[HookEvent], *, with_ids: bool = False) -> None:
        """Insert in one transaction; `with_ids` sets each event's id."""
        if not evs:
            return
        try:
            with self._engine.begin() as conn:
                if conn.dialect.name == "sqlite":
                    insert_events_sqlite(conn, evs, with_ids=with_ids, machine_id=self._machine_id)
                    return
                # PostgreSQL: one multi-row INSERT … RETURNING (SQLAlchemy's
                # insertmanyvalues), one round trip for the whole group.
                rows = [event_row(e, self._machine_id) for e in evs]
                result = conn.execute(INSERT_EVENT_RETURNING, rows)
                if with_ids:
                    for ev, row in zip(evs, result.all(), strict=True):
                        ev.id = int(row[0])
        except BaseException:
            if with_ids:
                # Ids handed out inside the transaction that rolled back name no row: an
                # event that goes to the queue must not carry one.
                for ev in evs:
                    ev.id = None
            raise

    def insert_change(self, ch: FileChange) -> int:
        return self.insert_changes([ch])[0]

    def insert_changes(self, changes: Sequence[FileChange]) -> list[int]:
        """Several changes in one transaction (a watcher batch); their ids, in order."""
        if not changes:
            return []
        with self._engine.begin() as conn:
            mid = self._machine_id
            rows = [
                {**{k: v for k, v in asdict(ch).items() if k != "id"}, "machine_id": mid}
                for ch in changes
            ]
            result = conn.execute(_INSERT_CHANGE, rows)
            return [int(row[0]) for row in result]

    def set_change_writer(self, ids: Sequence[int], session_id: str) -> int:
        """Attribute still-unattributed changes to `session_id` (a late PreToolUse)."""
        if not ids:
            return 0
        with self._engine.begin() as conn:
            return conn.execute(
                update(external_changes)
                .where(
                    external_changes.c.id.in_(list(ids)),
                    external_changes.c.writer_session.is_(None),
                    self.mine(external_changes.c.machine_id),
                )
                .values(writer_session=session_id)
            ).rowcount

    def insert_usages(self, usages: Sequence[Usage]) -> None:
        if not usages:
            return
        with self._engine.begin() as conn:
            mid = self._machine_id
            conn.execute(insert(messages), [{**asdict(u), "machine_id": mid} for u in usages])

    def record_session_repo(
        self, session_id: str, *, repo: str, repo_path: str, host: str | None, ts: int
    ) -> bool:
        """The session's repository (tma1.origin.repo), once: False when it was already known."""
        row = {
            "session_id": session_id,
            "machine_id": self._machine_id or "",
            "host": host,
            "repo": repo,
            "repo_path": repo_path,
            "ts": ts,
        }
        try:
            with self._engine.begin() as conn:
                conn.execute(insert(session_repos), row)
        except IntegrityError:
            return False
        return True

    def insert_emits(self, rows: Sequence[dict[str, Any]]) -> None:
        """Rows with the emit-log columns; `related_files` may be a list (stored as JSON)."""
        if not rows:
            return
        prepared = [
            {
                **r,
                "machine_id": self._machine_id,
                "related_files": r["related_files"]
                if isinstance(r["related_files"], str)
                else json_text(r["related_files"]),
            }
            for r in rows
        ]
        with self._engine.begin() as conn:
            conn.execute(insert(anomaly_emits), prepared)

    # --- reads for the engine ---------------------------------------------------------

    def session_events(
        self, session_id: str, since_ts: int, until_ts: int | None = None
    ) -> list[HookEvent]:
        q = select(hook_events).where(
            hook_events.c.session_id == session_id,
            hook_events.c.ts >= since_ts,
            self.mine(hook_events.c.machine_id),
        )
        if until_ts is not None:
            q = q.where(hook_events.c.ts <= until_ts)
        return [row_to_event(r) for r in self.rows(q.order_by(hook_events.c.ts, hook_events.c.id))]

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
        by_machine = self._machine_id is not None
        sql, names, defaults = window_sql(self._engine.dialect, after_id is not None, by_machine)
        given = {
            "session_id": session_id,
            "since": since_ts,
            "after": after_id,
            "machine": self._machine_id,
        }
        values = [given[n] if n in given else defaults[n] for n in names]
        params: Any = (
            tuple(values)
            if self._engine.dialect.positional
            else dict(zip(names, values, strict=True))
        )
        # The DBAPI cursor, not a Result: this read runs for every detection, and the
        # generic row machinery costs more than the rows (bench/bench_engine.py).
        with self._engine.connect() as conn:
            cursor = conn.connection.cursor()
            try:
                cursor.execute(sql, params)
                rows = cursor.fetchall()
            finally:
                cursor.close()
        return [window_event(r) for r in rows]

    def project_changes(
        self, project: str, since_ts: int, until_ts: int | None = None
    ) -> list[FileChange]:
        until = until_ts if until_ts is not None else _NO_END
        params = {"project": project, "since": since_ts, "until": until}
        return [FileChange(**r._mapping) for r in self.rows(self._project_changes, params)]

    def latest_usage(self, session_id: str, until_ts: int | None = None) -> Usage | None:
        until = until_ts if until_ts is not None else _NO_END
        row = self.first(self._latest_usage, {"session_id": session_id, "until": until})
        if row is None:
            return None
        return Usage(**{k: v for k, v in row._mapping.items() if k not in ("id", "machine_id")})

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
        until = until_ts if until_ts is not None else _NO_END
        since = since_ts if since_ts is not None else -_NO_END

        def newest(table: Table, *where: Any) -> Any:
            c = table.c
            in_range = (
                c.session_id == session_id,
                c.ts <= until,
                c.ts >= since,
                self.mine(c.machine_id),
            )
            return select(func.max(c.ts)).where(*in_range, *where).scalar_subquery()

        h = hook_events.c
        one = select(
            newest(messages, messages.c.kind == "compaction"),
            newest(hook_events, h.event_type.in_(sorted(COMPACTION_HOOKS))),
            newest(
                hook_events,
                h.event_type == "SessionStart",
                h.metadata.like(f'%"source": "{COMPACT_SOURCE}"%'),  # is_compaction_hook
            ),
        )
        stamps = [int(v) for v in self.first(one) if v is not None]
        return max(stamps) if stamps else None

    def session_first_ts(self, session_id: str) -> int | None:
        """The first event we ever stored of this session (the session start)."""
        q = select(func.min(hook_events.c.ts)).where(
            hook_events.c.session_id == session_id, self.mine(hook_events.c.machine_id)
        )
        value = self.scalar(q)
        return int(value) if value is not None else None

    def session_project(self, session_id: str, until_ts: int | None = None) -> str | None:
        """The project of the session's newest event that has one."""
        q = select(hook_events.c.project).where(
            hook_events.c.session_id == session_id,
            hook_events.c.project.is_not(None),
            self.mine(hook_events.c.machine_id),
        )
        if until_ts is not None:
            q = q.where(hook_events.c.ts <= until_ts)
        q = q.order_by(hook_events.c.ts.desc(), hook_events.c.id.desc()).limit(1)
        value = self.scalar(q)
        return str(value) if value is not None else None

    # --- reads for the session bundle (tma1.engine.bundle) -------------------------------

    def project_shell_results(
        self, project: str, since_ts: int, until_ts: int, *, limit: int = 1_000
    ) -> list[HookEvent]:
        """The project's newest `limit` shell tool results (every session) in [since,
        until], ts ascending, lean: what deciding a check's outcome and quoting its error
        needs — `tool_result` only for a failure (all its error lines: what still stands of
        a failing run is weighed line by line against what ran after it), no tool input,
        files, test ids or metadata."""
        c = hook_events.c
        failed = or_(c.event_type == "PostToolUseFailure", c.tool_success.is_(False))
        result = case((failed, c.tool_result), else_=null())
        cols = [c[name] for name in SHELL_RESULT_COLUMNS] + [result.label("tool_result")]
        q = (
            select(*cols)
            .where(
                *self._project_span(project, since_ts, until_ts),
                c.event_type.in_(("PostToolUse", "PostToolUseFailure")),
                c.tool_command.is_not(None),
            )
            .order_by(c.ts.desc(), c.id.desc())
            .limit(limit)
        )
        return [HookEvent(**r._mapping) for r in reversed(self.rows(q))]

    def project_file_creations(
        self, project: str, since_ts: int, until_ts: int, *, limit: int = 1_000
    ) -> list[HookEvent]:
        """The project's newest `limit` successful whole-file writes (`Write`, every
        session) in [since, until], ts ascending, lean: who wrote which files, when (the
        bundle leaves a session's scratch scripts out of the project's checks)."""
        c = hook_events.c
        cols = [c[name] for name in CREATION_COLUMNS]
        q = (
            select(*cols)
            .where(
                *self._project_span(project, since_ts, until_ts),
                c.event_type == "PostToolUse",
                c.tool_name == "Write",
                or_(c.tool_success.is_(None), c.tool_success.is_(True)),
            )
            .order_by(c.ts.desc(), c.id.desc())
            .limit(limit)
        )
        return [creation_event(r) for r in reversed(self.rows(q))]

    def project_activity(
        self, project: str, since_ts: int, until_ts: int
    ) -> list[tuple[str, int, str, str]]:
        """(session, newest event ts, agent, newest event's hook name) of every session
        with an event in the project in [since, until]: whether it is in the middle of a
        turn is its newest event's (the bundle's peers, design §2.19). One indexed range
        read, each session's newest row picked by a window function."""
        c = hook_events.c
        newest = (
            func.row_number()
            .over(partition_by=c.session_id, order_by=(c.ts.desc(), c.id.desc()))
            .label("n")
        )
        ranked = (
            select(c.session_id, c.ts, c.agent_source, c.hook_event_name, newest)
            .where(
                *self._project_span(project, since_ts, until_ts),
            )
            .subquery()
        )
        r_ = ranked.c
        q = select(r_.session_id, r_.ts, r_.agent_source, r_.hook_event_name).where(r_.n == 1)
        return [(str(r[0]), int(r[1]), str(r[2]), str(r[3] or "")) for r in self.rows(q)]

    def latest_turn_end_ts(self, session_id: str, until_ts: int) -> int | None:
        """When the transcript last said the session's turn ended with no `Stop` hook (a
        `turn_end` row: Codex's `turn_aborted`, Claude Code's user interruption), at or
        before `until_ts`. The newest row of the (session_id, ts) index range."""
        m = messages.c
        q = select(func.max(m.ts)).where(
            m.session_id == session_id,
            m.kind == TURN_END,
            m.ts <= until_ts,
            self.mine(m.machine_id),
        )
        value = self.scalar(q)
        return int(value) if value is not None else None

    def session_last_ts(self, session_id: str, before_ts: int) -> int | None:
        """The session's newest event strictly before `before_ts`."""
        q = select(func.max(hook_events.c.ts)).where(
            hook_events.c.session_id == session_id,
            hook_events.c.ts < before_ts,
            self.mine(hook_events.c.machine_id),
        )
        value = self.scalar(q)
        return int(value) if value is not None else None

    def emits_since(self, since_ts: int) -> list[dict[str, Any]]:
        q = (
            select(*(c for c in anomaly_emits.c if c.name != "machine_id"))
            .where(anomaly_emits.c.ts >= since_ts, self.mine(anomaly_emits.c.machine_id))
            .order_by(anomaly_emits.c.ts, anomaly_emits.c.id)
        )
        return [dict(r._mapping) for r in self.rows(q)]

    # --- housekeeping --------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        with self._engine.connect() as conn:
            return {
                t.name: int(conn.execute(select(func.count()).select_from(t)).scalar_one())
                for t in ALL_TABLES
            }

    def rows(self, q: Executable, params: Mapping[str, Any] | None = None) -> Sequence[Any]:
        """The rows of one read, on a pooled connection of its own."""
        with self._engine.connect() as conn:
            return conn.execute(q, params).all()

    def first(self, q: Executable, params: Mapping[str, Any] | None = None) -> Any:
        with self._engine.connect() as conn:
            return conn.execute(q, params).first()

    def scalar(self, q: Executable) -> Any:
        with self._engine.connect() as conn:
            return conn.execute(q).scalar()

    def connect(self) -> Connection:
        """A pooled connection (a context manager) for the query modules beside this one."""
        return self._engine.connect()

    def begin(self) -> contextlib.AbstractContextManager[Connection]:
        """A connection in a transaction, committed when the block ends without an error."""
        return self._engine.begin()
