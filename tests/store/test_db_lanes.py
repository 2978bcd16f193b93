"""Migration 0003 (design §2.15–2.16): a hook event's sub-agent lane and the tests its
output reports passing survive the store — the full read and the engine's lean window read."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tma1.events import parse_payload
from tma1.store import Store


def test_lane_and_passed_tests_round_trip(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    store = Store.open(f"sqlite:///{db}")
    try:
        ok = parse_payload(
            {"session_id": "s", "hook_event_name": "PostToolUse", "cwd": "/p", "tool_name": "Bash",
             "tool_input": {"command": "npx jest src/a.test.ts"},
             "tool_response": {"stdout": "PASS src/a.test.ts\n  ✓ adds (2 ms)"},
             "agent_id": "sub-1", "agent_type": "general-purpose"},
            ts=1_000,
        )  # fmt: skip
        main = parse_payload({"session_id": "s", "hook_event_name": "Stop", "cwd": "/p"}, ts=2_000)
        store.insert_event(ok)
        store.insert_event(main)
        for events in (store.window_events("s", 0), store.session_events("s", 0)):
            first, second = events
            assert first.agent_id == "sub-1" and first.lane == "sub-1"
            assert first.passed_test_ids == ["src/a.test.ts", "src/a.test.ts > adds"]
            assert second.agent_id is None and second.lane == ""
        assert store.session_events("s", 0)[0].agent_type == "general-purpose"
    finally:
        store.close()
    con = sqlite3.connect(db)
    try:
        assert con.execute("SELECT version_num FROM alembic_version").fetchone()[0] >= "0003"
    finally:
        con.close()
