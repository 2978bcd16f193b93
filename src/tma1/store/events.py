"""Hook events as rows: the codecs between `HookEvent` and `tma1_hook_events`, and the
insert statements of the hook path."""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import bindparam, case, insert, null, or_, select
from sqlalchemy.engine import Connection

from tma1.events import WRITE_TOOLS, HookEvent, json_text, keeps_metadata
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


# Every `HookEvent` field is a column of the table and every column but `id`'s own key and
# `machine_id` (the store's, not the event's) is a field: the projections below are
# derived from the dataclass, so a field added to both flows through every read and write.
_FIELDS = tuple(f.name for f in dataclasses.fields(HookEvent))
_STORE_ONLY = frozenset({"machine_id"})
if {c.name for c in hook_events.columns} - _STORE_ONLY != set(_FIELDS):
    raise RuntimeError("HookEvent's fields and tma1_hook_events' columns differ")

# What the engine's lean window read (`Store.window_events`, and replay's `lean`) leaves
# out: the fields no rule, resolution check or digest reads. Besides these, `tool_result`
# is kept only on an unsuccessful result and `metadata` only where `keeps_metadata` says.
WINDOW_LEFT_OUT = frozenset({"tool_input", "transcript_path", "permission_mode", "duration_ms"})

# Column order of `Store.window_events` rows (read positionally: it is the hot path).
_WINDOW_COLUMNS = tuple(
    c.name
    for c in hook_events.columns
    if c.name not in WINDOW_LEFT_OUT and c.name not in _STORE_ONLY
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


def _metadata(text: str | None) -> dict[str, Any]:
    return {} if text is None else json_or_default(text, {})


def _bool(value: Any) -> bool | None:
    return None if value is None else bool(value)  # SQLite hands booleans back as 0/1


def _compiled(name: str, params: str, body: str, env: dict[str, Any]) -> Any:
    """A projection of HookEvent compiled once from its fields, the way `dataclasses`
    compiles `__init__`: derived, so it cannot drift from the dataclass (the hand-written
    ones had), and as fast as written out (these run for every event stored, read or
    replayed; a loop over the fields per event cost about twice as much)."""
    namespace: dict[str, Any] = {}
    exec(f"def {name}({params}):\n{body}", env, namespace)
    return namespace[name]


# How a window row's raw column becomes the field (the rest are taken as they are).
_WINDOW_DECODE = {
    "tool_files": "_path_list",
    "test_ids": "_path_list",
    "passed_test_ids": "_path_list",
    "metadata": "_metadata",
    "tool_success": "_bool",
}
# A window row, unpacked by column, as HookEvent's fields in order (the left-out ones None).
window_event: Callable[[Any], HookEvent] = _compiled(
    "window_event",
    "row",
    f"    ({', '.join(_WINDOW_COLUMNS)},) = row\n"
    "    return HookEvent("
    + ", ".join(
        "None"
        if name not in _WINDOW_COLUMNS
        else f"{_WINDOW_DECODE[name]}({name})"
        if name in _WINDOW_DECODE
        else name
        for name in _FIELDS
    )
    + ")\n",
    {"HookEvent": HookEvent, "_path_list": _path_list, "_metadata": _metadata, "_bool": _bool},
)

# What becomes of a field the window read treats apart (the rest are kept as they are).
_LEAN = {name: "None" for name in WINDOW_LEFT_OUT} | {
    "tool_result": "ev.tool_result if ev.event_type == 'PostToolUseFailure'"
    " or ev.tool_success is False else None",
    "metadata": "ev.metadata if keeps_metadata(ev) else {}",
}
# `ev` as `Store.window_events` reads it back: the fields in `WINDOW_LEFT_OUT` cleared,
# `tool_result` only on an unsuccessful result, `metadata` only where `keeps_metadata`
# says. Replay's in-memory windows hold events in this form.
lean: Callable[[HookEvent], HookEvent] = _compiled(
    "lean",
    "ev",
    "    return HookEvent(" + ", ".join(_LEAN.get(name, f"ev.{name}") for name in _FIELDS) + ")\n",
    {"HookEvent": HookEvent, "keeps_metadata": keeps_metadata},
)


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


def _json_list(values: list[str]) -> str | None:
    return json_text(values) if values else None


def _json_object(values: dict[str, Any]) -> str | None:
    return json_text(values) if values else None


def _test_ids(ids: list[str]) -> str:
    return "[]" if not ids else json_text(ids)


# How a field becomes its column's value (the rest are stored as they are).
_ROW_ENCODE = {
    "tool_files": "_json_paths",
    "test_ids": "_test_ids",
    "metadata": "_json_object",
    "passed_test_ids": "_json_list",
}
# `event_row` as a tuple in `_EVENT_COLUMNS` order (`machine_id`: the store's, not the event's).
event_values: Callable[[HookEvent, str | None], tuple[Any, ...]] = _compiled(
    "event_values",
    "ev, machine_id",
    "    return ("
    + ", ".join(
        "machine_id"
        if name in _STORE_ONLY
        else f"{_ROW_ENCODE[name]}(ev.{name})"
        if name in _ROW_ENCODE
        else f"ev.{name}"
        for name in _EVENT_COLUMNS
    )
    + ",)\n",
    {
        "_json_paths": _json_paths,
        "_test_ids": _test_ids,
        "_json_object": _json_object,
        "_json_list": _json_list,
    },
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
