"""A SessionEnd drops what the engine caches of its session (issue 31): the hour of events
held for the rules, the detection, the session's start and project. Before, every ended
session stayed held until it had idled 10 minutes (24 h for the rest), so memory grew with
history. What the agent is told does not change: a resumed session is read afresh, and its
suppression state stays (the 10-minute quiet window still holds after the end)."""

from __future__ import annotations

import json

from conftest import LiveServer
from enginekit import bash_fail, payload, stop

from tma1.clock import MINUTE_MS, ManualClock
from tma1.live.service import Service

BUILD = "make build"
BUILD_OUT = "Exit code 2\nmain.go:12:5: undefined: frobnicate\nmake: *** [build] Error 1"


def cached(service: Service, sid: str) -> list[str]:
    """The engine's per-session maps that still hold `sid`."""
    det = service.delivery.detector
    src = det.source
    maps = {
        "detector.cache": det._cache,
        "detector.session_project": det._session_project,
        "windows.held": src._held,  # type: ignore[attr-defined]
        "windows.first_ts": src._first_ts,  # type: ignore[attr-defined]
    }
    return sorted(name for name, m in maps.items() if sid in m)


def post(live: LiveServer, clock: ManualClock, data: dict[str, object]) -> str:
    clock.advance(1_000)
    r = live.hook(data)
    assert r.status_code == 200
    return r.text


def test_a_session_end_leaves_nothing_of_the_session_cached(
    live: LiveServer, clock: ManualClock
) -> None:
    for sid in ("ends", "goes-on"):
        post(live, clock, payload(sid, "SessionStart", source="startup"))
        for _ in range(3):
            post(live, clock, bash_fail(sid, BUILD, BUILD_OUT))
        reason = json.loads(post(live, clock, stop(sid)))["hookSpecificOutput"]
        assert BUILD in reason["additionalContext"]  # the rules ran: the window is held
    held = ["detector.cache", "detector.session_project", "windows.first_ts", "windows.held"]
    assert cached(live.service, "ends") == held

    post(live, clock, payload("ends", "SessionEnd", reason="prompt_input_exit"))
    assert cached(live.service, "ends") == []
    assert cached(live.service, "goes-on") == held  # another session's state is its own

    # Resumed 2 minutes later: read afresh, and still inside the 10-minute quiet window of
    # the block it was given before it ended.
    clock.advance(2 * MINUTE_MS)
    post(live, clock, payload("ends", "SessionStart", source="resume"))
    assert post(live, clock, stop("ends")) == ""
    assert "windows.held" in cached(live.service, "ends")
