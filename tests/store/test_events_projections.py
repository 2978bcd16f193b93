"""The projections of `HookEvent` in store/events.py (the insert's values, the engine's lean
window read, and replay's `lean`) are derived from the dataclass's fields: every field
survives the store, and one added to the dataclass and the table flows through all three
with no other change (issue 29: the hand-kept window read had dropped `agent_type`)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap

from tma1.events import HookEvent, parse_payload
from tma1.store import Store
from tma1.store.events import WINDOW_LEFT_OUT, lean


def _every_field_set() -> HookEvent:
    """A failed sub-agent edit (so the lean read keeps its result and metadata) whose every
    field holds a value of its own: two crossed fields cannot agree."""
    ev = parse_payload(
        {"session_id": "s-p", "hook_event_name": "PostToolUseFailure", "cwd": "/p",
         "tool_name": "Edit", "tool_input": {"file_path": "/p/a.py"}, "error": "boom",
         "agent_id": "sub-1", "agent_type": "code-reviewer"},
        ts=1_000,
    )  # fmt: skip
    distinct: dict[str, object] = {
        "tool_files": ["/p/a.py", "/p/b.py"],
        "test_ids": ["t.py::a"],
        "passed_test_ids": ["t.py::b"],
        "metadata": {"k": "v"},
        "tool_success": False,
    }
    for n, f in enumerate(dataclasses.fields(HookEvent)):
        value = getattr(ev, f.name)
        if f.name in distinct or f.name in ("id", "ts", "session_id", "event_type", "tool_name"):
            continue
        if f.type in ("str", "str | None"):
            distinct[f.name] = f"{f.name}-{n}"
        elif f.type == "int | None":
            distinct[f.name] = 1_000 + n
        else:
            assert value is not None or f.name in distinct, f"no test value for {f.name}"
    return dataclasses.replace(ev, **distinct)


def test_every_field_survives_the_store_and_the_lean_read_agrees_with_replay(
    store: Store,
) -> None:
    ev = _every_field_set()
    store.insert_event(ev)
    assert ev.id is not None
    (full,) = store.session_events("s-p", 0)
    assert full == ev
    (window,) = store.window_events("s-p", 0)
    # The lean read leaves out exactly WINDOW_LEFT_OUT; a sub-agent's loop can name its agent.
    assert window == dataclasses.replace(ev, **dict.fromkeys(WINDOW_LEFT_OUT))
    assert window.agent_type is not None and window.agent_type == ev.agent_type
    # Replay's in-memory windows hold the same lean form the store reads back.
    assert lean(ev) == window


def test_lean_clears_an_ok_results_output_and_a_prompts_metadata() -> None:
    ok = dataclasses.replace(
        _every_field_set(), event_type="PostToolUse", tool_success=True, tool_name="Read"
    )
    thin = lean(ok)
    assert thin.tool_result is None and thin.metadata == {}
    assert thin.agent_type == ok.agent_type and thin.test_ids == ok.test_ids


def test_a_field_added_to_hook_event_and_its_table_flows_through_every_projection() -> None:
    """A new field and its column, with nothing else changed: the insert's values, the
    lean window read and replay's `lean` all carry it (a fresh interpreter, so the
    widened HookEvent is the one store/events.py derives its projections from)."""
    script = textwrap.dedent(
        """
        import dataclasses
        import importlib
        from sqlalchemy import Column, String
        from sqlalchemy.dialects import sqlite
        import tma1.events
        import tma1.store.events
        from tma1.store import schema

        Wider = dataclasses.make_dataclass(
            "HookEvent", [("flavour", "str | None", dataclasses.field(default=None))],
            bases=(tma1.events.HookEvent,), slots=True,
        )
        tma1.events.HookEvent = Wider
        schema.hook_events.append_column(Column("flavour", String(50)))
        se = importlib.reload(tma1.store.events)  # derived again, over the wider pair

        ev = Wider(ts=1, session_id="s", event_type="Stop", hook_event_name="Stop",
                   flavour="vanilla")
        row = dict(zip(se._EVENT_COLUMNS, se.event_values(ev, "m-1"), strict=True))
        assert row["flavour"] == "vanilla" and row["machine_id"] == "m-1", row
        sql, _, _ = se.window_sql(sqlite.dialect(), False)
        assert "flavour" in sql, sql
        window_row = tuple(row.get(c) for c in se._WINDOW_COLUMNS)
        assert se.window_event(window_row).flavour == "vanilla"
        assert se.lean(ev).flavour == "vanilla"
        print("flows")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "flows"
