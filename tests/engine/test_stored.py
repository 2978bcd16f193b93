"""`StoreWindows` through a real server and database: a session's window carries the
project's checks open when it began, read from the other sessions' runs (design §2.22:
a failure already there before the session is not its fresh break)."""

from __future__ import annotations

from typing import Any

from conftest import LiveServer
from enginekit import PROJECT, bash_fail, payload, prompt, stop

from tma1.clock import MINUTE_MS, ManualClock
from tma1.engine.digest import stop_block_reason

GO_TEST = "go test -short ./internal/monitoring"
GO_OUT = (
    "Exit code 1\n=== RUN   TestMonitorAlerting\n"
    "    monitor_test.go:331: Alerting tests require more complex setup\n"
    "--- SKIP: TestMonitorAlerting (0.00s)\n"
    "FAIL\nFAIL\tgithub.com/acme/app/internal/monitoring\t3.173s\nFAIL"
)
OTHER_OUT = "Exit code 1\nFAIL\tgithub.com/acme/app/internal/server\t0.512s\nFAIL"


def post(live: LiveServer, clock: ManualClock, data: dict[str, Any]) -> str:
    clock.advance(1_000)
    r = live.hook(data)
    assert r.status_code == 200
    return r.text


def edit(sid: str, path: str) -> dict[str, Any]:
    tool_input = {"file_path": path, "old_string": "a", "new_string": "b"}
    return payload(
        sid,
        "PostToolUse",
        tool_name="Edit",
        tool_input=tool_input,
        tool_use_id=f"e-{sid}",
        tool_response={"filePath": path, "success": True},
    )


def session_after(live: LiveServer, clock: ManualClock, sid: str, output: str) -> str:
    """A session starting after `prev` left `go test` failing: it edits a file it never
    ran the tests on, runs them, and stops. The Stop's answer."""
    post(live, clock, payload(sid, "SessionStart", source="startup"))
    post(live, clock, prompt(sid, "fix the lint warnings"))
    post(live, clock, edit(sid, f"{PROJECT}/cmd/build.go"))
    post(live, clock, bash_fail(sid, GO_TEST, output))
    return post(live, clock, stop(sid))


def test_a_failure_another_session_left_is_not_a_fresh_break(
    live: LiveServer, clock: ManualClock
) -> None:
    prev = "prev-aaaaaaaa"
    post(live, clock, payload(prev, "SessionStart", source="startup"))
    post(live, clock, prompt(prev, "fix the failing ci checks"))
    post(live, clock, bash_fail(prev, GO_TEST, GO_OUT))
    post(live, clock, stop(prev))
    clock.advance(90 * MINUTE_MS)  # the previous session's runs are out of any window
    # The same errors it found when it began: pre-existing, no block.
    assert not stop_block_reason(session_after(live, clock, "next-bbbbbbbb", GO_OUT))
    # Errors that were not there: its own fresh break, blocked.
    reason = stop_block_reason(
        session_after(live, clock, "third-cccccccc", GO_OUT + "\n" + OTHER_OUT)
    )
    assert reason and "build_broken_after_my_edit" in reason and GO_TEST in reason
