"""Issue 15, flaw 1, on the live path: real Stop payloads posted to `/api/hooks`, the
final message stored in the event's metadata and read back by the engine's window."""

from __future__ import annotations

import json
from typing import Any

from conftest import LiveServer
from enginekit import bash_fail, payload

from tma1.clock import ManualClock

BUILD = "make build"
BUILD_OUT = "Exit code 2\nmain.go:12:5: undefined: frobnicate\nmake: *** [build] Error 1"


def _post(live: LiveServer, clock: ManualClock, data: dict[str, Any]) -> str:
    clock.advance(1_000)
    r = live.hook(data)
    assert r.status_code == 200
    return r.text


def _stop(sid: str, message: str) -> dict[str, Any]:
    return payload(sid, "Stop", stop_hook_active=False, last_assistant_message=message)


def _session(live: LiveServer, clock: ManualClock, sid: str) -> None:
    _post(live, clock, payload(sid, "SessionStart", source="startup"))
    for _ in range(3):
        assert _post(live, clock, bash_fail(sid, BUILD, BUILD_OUT)) == ""


def test_a_stop_handing_the_failing_build_back_is_answered_empty(
    live: LiveServer, clock: ManualClock
) -> None:
    _session(live, clock, "handback-1")
    said = "`make build` still fails on main.go:12 (undefined: frobnicate); I could not fix it."
    assert _post(live, clock, _stop("handback-1", said)) == ""


def test_a_stop_announcing_success_over_it_is_blocked(live: LiveServer, clock: ManualClock) -> None:
    _session(live, clock, "handback-2")
    body = _post(live, clock, _stop("handback-2", "All done, everything works."))
    reason = json.loads(body)["hookSpecificOutput"]["additionalContext"]
    assert "make build" in reason
