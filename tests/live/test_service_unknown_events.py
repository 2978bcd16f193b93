"""An unknown `hook_event_name` or `?source=` is refused and counted, one log line each,
never stored as a junk session; the agent still gets a harmless 200 with an empty body."""

from __future__ import annotations

import logging

import pytest
from conftest import LiveServer


@pytest.mark.parametrize(
    ("payload", "params", "reason"),
    [
        ({"session_id": "junk", "hook_event_name": "Banana"}, None, "unknown_hook_event"),
        ({"session_id": "junk", "hook_event_name": "stop"}, None, "unknown_hook_event"),
        ({"session_id": "junk", "hook_event_name": "Stop"}, {"source": "bogus"}, "unknown_source"),
    ],
    ids=["banana", "wrong-case", "bogus-source"],
)
def test_unknown_events_are_refused_not_stored(
    live: LiveServer,
    caplog: pytest.LogCaptureFixture,
    payload: dict[str, str],
    params: dict[str, str] | None,
    reason: str,
) -> None:
    with caplog.at_level(logging.WARNING, logger="tma1.hooks"):
        r = live.hook({**payload, "cwd": "/tmp/somewhere"}, params=params)
    assert (r.status_code, r.content) == (200, b"")
    health = live.client().get("/api/health").json()
    assert health["rejected"] == {reason: 1}
    assert health["rows"]["tma1_hook_events"] == 0
    sessions = live.client().get("/api/sessions").json()
    listed = sessions.get("sessions", sessions) if isinstance(sessions, dict) else sessions
    assert listed == []
    lines = [r for r in caplog.records if r.name == "tma1.hooks"]
    assert len(lines) == 1 and reason in lines[0].getMessage()


def test_known_sources_and_events_are_still_stored(live: LiveServer) -> None:
    for params in (None, {"source": "codex"}, {"source": "claude-code"}, {"source": "Codex"}):
        r = live.hook({"session_id": "ok", "hook_event_name": "SessionStart"}, params=params)
        assert r.status_code == 200
    for name in ("SubagentStart", "SubagentStop", "Notification", "PreCompact", "SessionEnd"):
        assert live.hook({"session_id": "ok", "hook_event_name": name}).status_code == 200
    health = live.client().get("/api/health").json()
    assert health["rejected"] == {}
    assert health["rows"]["tma1_hook_events"] == 9
