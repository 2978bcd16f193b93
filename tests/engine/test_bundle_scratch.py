"""A throw-away script a session wrote whole at the project's root is its scratch, not a
check of the project (design §2.21): never a bundle item for another session, and its
failure at a Stop blocks nothing. Its chained project check (`npm run build && node
x.js`) is still the project's — as `npm run build`.

sessions/claude-code/attio-7c4ca6ea.chat.json: the session wrote test-create-response.mjs
with Write at the project root and ran `node test-create-response.mjs`; the next
sessions' bundles listed it among "checks failing in this project".
"""

from __future__ import annotations

from typing import Any

from conftest import LiveServer
from enginekit import PROJECT, bash_fail, payload
from test_bundle_live import context, edit, post, start

from tma1.clock import ManualClock
from tma1.engine.checkruns import check_runs, scratch_scripts
from tma1.engine.window import SessionWindow
from tma1.events import parse_payload

SCRATCH = "test-create-response.mjs"
RUN = f"ATTIO_API_KEY=$ATTIO_API_KEY node {SCRATCH} 2>&1"
RUN_OUT = (
    "Exit code 1\nError: Universal create failed for resource type companies: "
    "Company create failed: API error\n    at test (file:///p/test-create-response.mjs:9:11)"
)
BUILD_OUT = "Exit code 2\nsrc/utils/value-matcher.ts(5,30): error TS2307: Cannot find module 'x'."


def write(sid: str, path: str) -> list[dict[str, Any]]:
    tool_input = {"file_path": path, "content": "console.log(1)\n"}
    return [
        payload(sid, "PreToolUse", tool_name="Write", tool_input=tool_input, tool_use_id="w1"),
        payload(
            sid,
            "PostToolUse",
            tool_name="Write",
            tool_input=tool_input,
            tool_use_id="w1",
            tool_response={"type": "create", "filePath": path, "content": "console.log(1)\n"},
        ),
    ]


def test_another_sessions_bundle_does_not_list_a_scratch_script(
    live: LiveServer, clock: ManualClock
) -> None:
    writer = "6706089d-aaaa"
    for p in write(writer, f"{PROJECT}/{SCRATCH}"):
        post(live, clock, p)
    post(live, clock, bash_fail(writer, RUN, RUN_OUT))
    text = context(start(live, clock, "9fa9888f-bbbb", "startup"))
    assert "Checks failing in this project" not in text and SCRATCH not in text


def test_a_chained_runs_project_step_is_told_without_the_scratch_script(
    live: LiveServer, clock: ManualClock
) -> None:
    writer = "278a2245-aaaa"
    for p in write(writer, f"{PROJECT}/{SCRATCH}"):
        post(live, clock, p)
    post(live, clock, bash_fail(writer, RUN, RUN_OUT))
    post(live, clock, bash_fail(writer, f"npm run build && node {SCRATCH}", BUILD_OUT))
    text = context(start(live, clock, "c7428042-bbbb", "startup"))
    assert "Checks failing in this project" in text and "error TS2307" in text
    assert f"`{RUN}`" not in text and "Universal create failed" not in text


def test_a_script_in_a_project_directory_stays_a_check(
    live: LiveServer, clock: ManualClock
) -> None:
    writer = "6706089d-cccc"
    for p in write(writer, f"{PROJECT}/scripts/test-api.mjs"):
        post(live, clock, p)
    post(live, clock, bash_fail(writer, "node scripts/test-api.mjs", RUN_OUT))
    text = context(start(live, clock, "9fa9888f-dddd", "startup"))
    assert "`node scripts/test-api.mjs` failing since" in text


def _window(events: list[dict[str, Any]]) -> SessionWindow:
    evs = [parse_payload(p, ts=1_000 * (i + 1)) for i, p in enumerate(events)]
    return SessionWindow(session_id="s", project=PROJECT, events=evs)


def test_a_scratch_scripts_failure_is_no_open_check_of_the_session() -> None:
    w = _window(
        [
            *write("s", f"{PROJECT}/{SCRATCH}"),
            *edit("s", f"{PROJECT}/src/app.ts"),
            bash_fail("s", RUN, RUN_OUT),
        ]
    )
    assert scratch_scripts(w.events, PROJECT) == frozenset({SCRATCH})
    runs = check_runs(w, 10_000)
    assert runs.runs == [] and runs.open_failures == {}


def test_a_chained_runs_project_step_stays_open() -> None:
    w = _window(
        [
            *write("s", f"{PROJECT}/{SCRATCH}"),
            bash_fail("s", f"npm run build 2>&1 | tail -5 && node {SCRATCH} 2>&1", BUILD_OUT),
        ]
    )
    assert list(check_runs(w, 10_000).open_failures) == ["npm run build"]


def test_a_stop_after_a_scratch_script_failed_is_not_blocked(
    live: LiveServer, clock: ManualClock
) -> None:
    sid = "6706089d-eeee"
    for p in write(sid, f"{PROJECT}/{SCRATCH}"):
        post(live, clock, p)
    for p in edit(sid, f"{PROJECT}/src/app.ts"):
        post(live, clock, p)
    post(live, clock, bash_fail(sid, RUN, "Exit code 1\nError at src/app.ts:3:1 boom"))
    body = post(live, clock, payload(sid, "Stop", stop_hook_active=False))
    assert "block" not in body and SCRATCH not in body
