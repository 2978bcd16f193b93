"""What the ingest tests feed and read back: a passing `make` run as a stored-to-be hook
event, and the markers (tool_use_ids) a store holds."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import select

from tma1.engine.ports import EventSink
from tma1.events import HookEvent, parse_payload
from tma1.store import Store
from tma1.store.schema import hook_events


def make_payload(marker: str, session: str = "s-ingest") -> dict[str, Any]:
    """The hook payload of a passing `make`, told apart by its tool_use_id `marker`."""
    return {
        "session_id": session,
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_use_id": marker,
        "tool_input": {"command": "make"},
        "tool_response": {"stdout": "ok", "exitCode": 0},
        "cwd": "/repo",
    }


def make_ran(marker: str, session: str = "s-ingest") -> HookEvent:
    """`make_payload` as the event the hook path parses it into."""
    return parse_payload(make_payload(marker, session), ts=1_000)


def markers_in(store: Store) -> set[str]:
    with store.connect() as conn:
        return {r[0] for r in conn.execute(select(hook_events.c.tool_use_id))}


def committed_now(sink: EventSink, ev: HookEvent) -> bool:
    """Submit `ev` on a loop of its own: True when it was committed within the budget (and
    so answered), False when it was queued, dropped or refused."""
    return asyncio.run(sink.submit_async(ev, lambda _ev: "committed")) == "committed"
