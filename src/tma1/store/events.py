"""Hook events as rows: the codecs between `HookEvent` and `tma1_hook_events`, and the
insert statements of the hook path."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, case, insert, null, or_, select
from sqlalchemy.engine import Connection

from tma1.events import WRITE_TOOLS, HookEvent, json_text
from tma1.store.errors import driver_errors
from tma1.store.schema import hook_events


def _json_paths(paths: list[str]) -> str:
    """`json_text(paths)`; one plain path (nearly every event) without the encoder."""
    if not paths:
        return "[]"
    if len(paths) == 1:
        p = paths[0]
        if p.__class__ is str and p.isprintable() and '"' not in p and "\\" not in p:
            return '["' + p + '"]'
    return json_text(paths)


def json_or_default(text: str | None, default: Any) -> Any:
    if not text:
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default


def event_row(ev: HookEvent, machine_id: str | None = None) -> dict[str, Any]:
    return dict(zip(_EVENT_COLUMNS, event_values(ev, machine_id), strict=True))


def row_to_event(row: Any) -> HookEvent:
    m = dict(row._mapping)
    m.pop("machine_id", None)  # the store's, not the event's
    m["tool_files"] = json_or_default(m["tool_files"], [])
    m["test_ids"] = json_or_default(m["test_ids"], [])
    m["metadata"] = json_or_default(m["metadata"], {})
    m["passed_test_ids"] = _path_list(m["passed_test_ids"])
    return HookEvent(**m)


# Column order of `Store.window_events` rows (read positionally: it is the hot path): the
# stored columns but those no rule, resolution check or digest reads.
_WINDOW_COLUMNS = tuple(
    c.name
    for c in hook_events.columns
    if c.name
    not in {
        "tool_input",
        "transcript_path",
        "permission_mode",
        "duration_ms",
        "agent_type",
        "machine_id",
    }
)


@functools.cache
def window_sql(
    dialect: Any, with_after: bool, by_machine: bool = False
) -> tuple[str, tuple[str, ...], dict[str, Any]]:
    """The window read compiled once per dialect: (SQL, parameter names in order, the
    values of the parameters the query fixes). `by_machine`: only the rows of the machine
    `machine` (and, on SQLite, the rows of no known machine: `Store.mine`). Rows are read
    raw: `window_event` turns SQLite's 0/1 into a bool, and no other column may need a
    result processor."""
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
    if by_machine:
        same = c.machine_id == bindparam("machine")
        q = q.where(or_(same, c.machine_id.is_(None)) if dialect.name == "sqlite" else same)
    compiled = q.order_by(c.ts, c.id).compile(dialect=dialect)
    for name in _WINDOW_COLUMNS:
        impl = hook_events.c[name].type.dialect_impl(dialect)
        if name != "tool_success" and impl.result_processor(dialect, None) is not None:
            raise RuntimeError(f"window column {name} needs a result processor on {dialect.name}")
    names = tuple(compiled.positiontup or compiled.params)
    defaults = {k: v for k, v in compiled.params.items() if v is not None}
    return compiled.string, names, defaults


def _path_list(text: str | None) -> list[str]:
    """A JSON list of strings as stored (`json_text`: paths, test ids); `["one plain string"]`
    without the decoder."""
    if not text or text == "[]":
        return []
    if text.startswith('["') and text.endswith('"]'):
        inner = text[2:-2]
        if '"' not in inner and "\\" not in inner:
            return [inner]
    loaded = json_or_default(text, [])
    return loaded if isinstance(loaded, list) else []


def window_event(row: Any) -> HookEvent:
    (id_, ts, sid, etype, hook, agent, tool, tuid, result, fpath, files, cmd, prefix, ok,
     fkind, summary, tids, cwd, project, meta, passed, agent_id) = row  # fmt: skip
    # Positional, in HookEvent's field order: this runs for every row of every window.
    # SQLite hands booleans back as 0/1.
    return HookEvent(
        ts, sid, etype, hook, agent, tool, tuid, None, result, fpath, _path_list(files),
        cmd, prefix, None if ok is None else bool(ok), fkind, summary,
        _path_list(tids),
        cwd, project, None, None, None, {} if meta is None else json_or_default(meta, {}), id_,
        _path_list(passed), agent_id,
    )  # fmt: skip


# The columns `Store.project_shell_results` reads besides its lean `tool_result`.
SHELL_RESULT_COLUMNS = (
    "id", "ts", "session_id", "event_type", "hook_event_name", "agent_source", "tool_name",
    "tool_command", "tool_success", "failure_kind", "tool_error_summary", "cwd", "project",
    "agent_id",
)  # fmt: skip


# `Store.project_file_creations` rows: who wrote which files whole, when.
CREATION_COLUMNS = (
    "id", "ts", "session_id", "event_type", "hook_event_name", "agent_source", "tool_name",
    "tool_files", "tool_success", "cwd", "project",
)  # fmt: skip


def creation_event(row: Any) -> HookEvent:
    m = dict(row._mapping)
    files = json_or_default(m.pop("tool_files"), [])
    return HookEvent(**m, tool_files=[f for f in files if isinstance(f, str)])


INSERT_EVENT_RETURNING = insert(hook_events).returning(
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


def event_values(ev: HookEvent, machine_id: str | None = None) -> tuple[Any, ...]:
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
        "[]" if not ev.test_ids else json_text(ev.test_ids),
        ev.cwd,
        ev.project,
        ev.transcript_path,
        ev.permission_mode,
        ev.duration_ms,
        json_text(ev.metadata) if ev.metadata else None,
        json_text(ev.passed_test_ids) if ev.passed_test_ids else None,
        ev.agent_id,
        ev.agent_type,
        machine_id,
    )


def insert_events_sqlite(
    conn: Connection, evs: Sequence[HookEvent], *, with_ids: bool, machine_id: str | None = None
) -> None:
    sql, processors = _event_insert_sql(conn.dialect)
    rows = [event_values(e, machine_id) for e in evs]
    active = [(i, p) for i, p in enumerate(processors) if p is not None]
    if active:
        for n, row in enumerate(rows):
            values = list(row)
            for i, p in active:
                values[i] = p(values[i])
            rows[n] = tuple(values)
    cursor = conn.connection.cursor()
    try:
        with driver_errors(conn, sql):
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
