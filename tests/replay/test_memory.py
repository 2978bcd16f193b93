"""`MemoryWindows`: replay's in-memory window source bounds a session as the live
Detector does (the newest `MAX_WINDOW_EVENTS` events of the hour)."""

from __future__ import annotations

import pytest

import tma1.replay.memory as memory
from tma1.clock import MINUTE_MS
from tma1.events import HookEvent, parse_payload

SID = "sess-m"


def _read(ts: int, k: int) -> HookEvent:
    return parse_payload(
        {
            "session_id": SID,
            "cwd": "/p",
            "hook_event_name": "PreToolUse",
            "tool_name": "Read",
            "tool_input": {"file_path": f"/p/{k}.py"},
        },
        ts=ts,
    )


def test_the_window_is_the_hour_and_at_most_the_newest_max_window_events(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(memory, "MAX_WINDOW_EVENTS", 5)
    now = 10 * 60 * MINUTE_MS
    windows = memory.MemoryWindows()
    old = [_read(now - 61 * MINUTE_MS + k, k) for k in range(3)]  # out of the hour
    recent = [_read(now - 30 * MINUTE_MS + k, 10 + k) for k in range(4)]
    for ev in old + recent:
        windows.add_event(ev)
    assert windows.window(SID, now).events == recent  # under the cap: the hour decides
    newer = [_read(now - MINUTE_MS + k, 20 + k) for k in range(3)]
    for ev in newer:
        windows.add_event(ev)
    assert windows.window(SID, now).events == (recent + newer)[-5:]  # the cap decides
