"""The session bundle through a real server: real SessionStart payloads posted to
`/api/hooks`, the real rule set, a real database (SQLite and PostgreSQL), a ManualClock.
The emit log, the budget gate and the API's channel filter see the `session_start`
channel; nothing is re-told twice in one context epoch."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import LiveServer, start_live_server
from enginekit import PROJECT, bash_fail, bash_ok, payload, prompt, stop

from tma1.clock import MINUTE_MS, ManualClock
from tma1.engine.bundle import BUNDLE_MAX_CHARS
from tma1.engine.digest import stop_block_reason
from tma1.engine.mutes import Mute
from tma1.events import FileChange
from tma1.live.mutes import MUTES_FILE, add_mute

BUILD = "./build.sh"
BUILD_OUT = "Exit code 1\nsrc/app.py:3: error: name 'x' is not defined\nbuild failed"
APP = f"{PROJECT}/src/app.py"
PYTEST = "pytest -q tests/test_calc.py"
PYTEST_OUT = (
    "Exit code 1\nF.\n=== FAILURES ===\nE       assert 3 == 4\n"
    "FAILED tests/test_calc.py::test_add - assert 3 == 4\n1 failed, 1 passed in 0.02s"
)


def post(live: LiveServer, clock: ManualClock, data: dict[str, Any], **params: str) -> str:
    clock.advance(1_000)
    r = live.hook(data, params=params or None)
    assert r.status_code == 200
    return r.text


def start(live: LiveServer, clock: ManualClock, sid: str, how: str, **params: str) -> str:
    return post(live, clock, payload(sid, "SessionStart", source=how), **params)


def context(body: str) -> str:
    """The bundle as the agent's protocol carries it at SessionStart."""
    out = json.loads(body)
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart", out
    text = out["hookSpecificOutput"]["additionalContext"]
    assert isinstance(text, str) and text.startswith("<tma1-context>")
    assert len(text) < BUNDLE_MAX_CHARS
    return text


def edit(sid: str, path: str) -> list[dict[str, Any]]:
    tool_input = {"file_path": path, "old_string": "a", "new_string": "b"}
    return [
        payload(sid, "PreToolUse", tool_name="Edit", tool_input=tool_input, tool_use_id="e1"),
        payload(
            sid,
            "PostToolUse",
            tool_name="Edit",
            tool_input=tool_input,
            tool_use_id="e1",
            tool_response={"filePath": path, "success": True},
        ),
    ]


def break_build(live: LiveServer, clock: ManualClock, sid: str) -> None:
    """./build.sh passes; the agent edits src/app.py, then ./build.sh fails three times on
    it (the session broke it: it passed before, design §2.21)."""
    post(live, clock, bash_ok(sid, BUILD, "built"))
    for p in edit(sid, APP):
        post(live, clock, p)
    for _ in range(3):
        post(live, clock, bash_fail(sid, BUILD, BUILD_OUT))


def emits(live: LiveServer, **params: str) -> list[dict[str, Any]]:
    assert live.service.delivery.flush()
    r = live.client().get("/api/anomalies", params=params)
    assert r.status_code == 200, r.text
    return list(reversed(r.json()["emits"]))  # oldest first


def test_resume_and_compact_retell_unresolved_findings_once_per_epoch(
    live: LiveServer, clock: ManualClock
) -> None:
    sid = "bundle-1"
    assert start(live, clock, sid, "startup") == ""  # a new session in a quiet project
    break_build(live, clock, sid)
    assert stop_block_reason(post(live, clock, stop(sid)))

    resumed = context(start(live, clock, sid, "resume"))
    t_resume = clock.now_ms()
    assert "Still unresolved in this session:" in resumed
    # One answer names a check once: repeated_failed_build, as the Stop block did.
    assert "repeated_failed_build" in resumed and "build_broken_after_my_edit" not in resumed
    assert "src/app.py:3: error" in resumed
    # The check is this session's finding: told once, as the finding, not again as a check.
    assert "Checks failing" not in resumed

    # The same epoch (no compaction since): a second resume re-tells nothing.
    assert start(live, clock, sid, "resume") == ""
    # A compaction starts a new epoch: the summary lost it, so it is told again.
    post(live, clock, payload(sid, "PreCompact", trigger="auto"))
    compacted = context(start(live, clock, sid, "compact"))
    t_compact = clock.now_ms()
    assert "repeated_failed_build" in compacted
    assert start(live, clock, sid, "resume") == ""

    bundle_rows = emits(live, session_id=sid, channel="session_start")
    assert [(r["kind"], r["ts"]) for r in bundle_rows] == [
        ("repeated_failed_build", t_resume),
        ("repeated_failed_build", t_compact),
    ]
    assert {r["channel"] for r in emits(live, session_id=sid, channel="stop_block")} == {
        "stop_block"
    }
    assert len(emits(live, session_id=sid)) == len(bundle_rows) + 1
    # The budget gate counts bundle emits like any other emit.
    budget = live.client().get("/api/anomalies/budget", params={"days": 1}).json()
    assert budget["kinds"]["repeated_failed_build"]["total"] == 3
    health = live.client().get("/api/health").json()["engine"]
    assert health["delivered"]["session_start"] == 2
    # An unknown channel is a clear 422, not an empty list.
    assert live.client().get("/api/anomalies", params={"channel": "nope"}).status_code == 422


def test_a_stop_block_finding_told_in_a_bundle_still_blocks_the_stop(
    live: LiveServer, clock: ManualClock
) -> None:
    sid = "bundle-2"
    break_build(live, clock, sid)
    assert "repeated_failed_build" in context(start(live, clock, sid, "resume"))
    reason = stop_block_reason(post(live, clock, stop(sid)))
    assert reason is not None and BUILD in reason


def test_a_digest_does_not_repeat_what_the_bundle_just_told(
    live: LiveServer, clock: ManualClock
) -> None:
    sid = "bundle-3"
    for _ in range(3):
        post(live, clock, bash_fail(sid, PYTEST, PYTEST_OUT))
    assert "test_stuck" in post(live, clock, prompt(sid))  # told on the digest
    clock.advance(11 * MINUTE_MS)  # past the digest's ten-minute window
    post(live, clock, payload(sid, "PreCompact", trigger="manual"))
    assert "test_stuck" in context(start(live, clock, sid, "compact"))
    assert "test_stuck" not in post(live, clock, prompt(sid))  # the bundle just said it
    clock.advance(11 * MINUTE_MS)
    post(live, clock, bash_fail(sid, PYTEST, PYTEST_OUT))  # new evidence
    assert "test_stuck" in post(live, clock, prompt(sid))


def test_a_session_starting_in_a_project_another_session_broke_is_told_so(
    live: LiveServer, clock: ManualClock
) -> None:
    breaker, newcomer = "breaker-aaaaaaaa", "newcomer-bbbbbbbb"
    break_build(live, clock, breaker)
    text = context(start(live, clock, newcomer, "startup"))
    assert "Checks failing in this project" in text
    assert f"`{BUILD}` fails since" in text
    assert f"broken by session {breaker[:8]} (claude-code); 3 failing runs" in text
    assert f"Other sessions active on this project now: {breaker[:8]} (claude-code" in text
    assert "Still unresolved" not in text  # a new session has no findings of its own
    assert emits(live, session_id=newcomer) == []  # project state is told, not emitted
    # Sessions that ended are no longer "active now"; the check they broke stays open.
    for sid in (breaker, newcomer):
        post(live, clock, payload(sid, "SessionEnd", reason="other"))
    later = context(start(live, clock, "third-cccccccc", "startup"))
    assert "Other sessions" not in later and "broken by session breaker-" in later


def test_a_session_that_ended_its_turn_is_not_told_as_active(
    live: LiveServer, clock: ManualClock
) -> None:
    """Seconds after another session's Stop (or its bare start), a new session is its
    successor: no "Other sessions active". A session mid-turn (its newest event a tool
    call) is told."""
    left, starter = "left-aaaaaaaa", "starter-bbbbbbbb"
    break_build(live, clock, left)
    post(live, clock, prompt(left, "fix it"))
    post(live, clock, stop(left))
    start(live, clock, "quitter-dddddddd", "startup")  # started, never prompted
    text = context(start(live, clock, starter, "startup"))
    assert "broken by session left-aaa" in text  # the check it broke stays open
    assert "Other sessions" not in text
    # The left session takes a new turn and is mid-tool-call: now it is active.
    post(live, clock, prompt(left, "again"))
    post(live, clock, bash_fail(left, BUILD, BUILD_OUT))
    text = context(start(live, clock, "third-cccccccc", "startup"))
    assert f"Other sessions active on this project now: {left[:8]} (claude-code" in text
    assert "quitter-" not in text and "starter-" not in text


def test_files_changed_outside_since_the_last_event_are_told_on_resume(
    live: LiveServer, clock: ManualClock
) -> None:
    sid = "bundle-5"
    post(live, clock, payload(sid, "UserPromptSubmit", prompt="hi"))
    # The session is away; a teammate saves two files, and two hours later it resumes (the
    # rules' windows no longer hold the saves: only the bundle's "since your last event" does).
    clock.advance(10 * MINUTE_MS)
    now = clock.now_ms()
    for path, writer in (("src/util.py", None), ("src/app.py", "someone-else")):
        live.store.insert_change(
            FileChange(
                ts=now,
                project=PROJECT,
                path=f"{PROJECT}/{path}",
                change="modified",
                writer_session=writer,
            )
        )
    clock.advance(120 * MINUTE_MS)
    text = context(start(live, clock, sid, "resume"))
    assert "since this session's last event" in text
    assert "src/app.py (modified)" in text and "src/util.py (modified)" in text


def test_codex_gets_the_bundle_as_hook_specific_output(
    live: LiveServer, clock: ManualClock
) -> None:
    break_build(live, clock, "breaker-codex")
    body = start(live, clock, "codex-1", "startup", source="codex", envelope="codex")
    assert "broken by session breaker-" in context(body)


def test_after_a_restart_the_epoch_memory_comes_back_from_the_emit_log(
    live: LiveServer, clock: ManualClock
) -> None:
    sid = "bundle-7"
    break_build(live, clock, sid)
    assert "repeated_failed_build" in context(start(live, clock, sid, "resume"))
    live.stop()  # graceful shutdown flushes the emit log
    again = start_live_server(live.settings, clock=clock)
    try:
        assert again.service.delivery.bundles.told(sid)  # rebuilt from session_start rows
        assert start(again, clock, sid, "resume") == ""  # same epoch: not re-told
        # ... and the bundle rows did not advance suppression: the Stop still blocks.
        assert stop_block_reason(post(again, clock, stop(sid)))
    finally:
        again.stop()


def test_pre_compact_answers_summary_instructions_and_emits_nothing(
    live: LiveServer, clock: ManualClock
) -> None:
    sid = "bundle-8"
    break_build(live, clock, sid)
    text = post(live, clock, payload(sid, "PreCompact", trigger="auto"))
    assert text.startswith("tma1, which monitors this session")  # plain stdout, not JSON
    assert "repeated_failed_build" in text and BUILD in text
    assert emits(live, session_id=sid) == []
    # Codex's PreCompact answer was not measured: nothing.
    codex = payload("codex-8", "PreCompact", trigger="auto")
    break_build(live, clock, "codex-8")
    assert post(live, clock, codex, source="codex", envelope="codex") == ""
    # Claude Code's http hooks take JSON only: no plain-text instructions there.
    http = payload(sid, "PreCompact", trigger="auto")
    assert post(live, clock, http, transport="http") == "{}"
    # A session with nothing open (in a project with nothing failing) asks nothing.
    quiet = {**payload("quiet-8", "PreCompact", trigger="manual"), "cwd": "/nonexistent/quiet"}
    assert post(live, clock, quiet) == ""


def test_a_muted_kind_is_not_retold(live: LiveServer, clock: ManualClock) -> None:
    sid = "bundle-9"
    break_build(live, clock, sid)
    path = live.settings.data_dir / MUTES_FILE
    add_mute(path, Mute(kind="repeated_failed_build", project=PROJECT))
    add_mute(path, Mute(kind="build_broken_after_my_edit"))
    text = start(live, clock, sid, "resume")
    # Nothing of this session is re-told; the check itself is project state, still told.
    assert "Still unresolved" not in context(text) and f"`{BUILD}` fails since" in text
    assert emits(live, session_id=sid, channel="session_start") == []


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def _transcript_line(agent: str, sid: str, ms: int, what: str) -> str:
    """One line of the agent's transcript: its start, or the user's interruption."""
    if agent == "codex":
        if what == "start":
            line = {"type": "session_meta", "payload": {"id": sid}}
        else:  # Codex's record of the user's Esc; no hook is sent for it
            line = {
                "type": "event_msg",
                "payload": {"type": "turn_aborted", "reason": "interrupted"},
            }
    elif what == "start":
        line = {"type": "system", "uuid": f"{sid}-0", "sessionId": sid, "content": "start"}
    else:  # Claude Code's; no Stop hook is sent for it
        text = [{"type": "text", "text": "[Request interrupted by user]"}]
        line = {"type": "user", "uuid": f"{sid}-9", "sessionId": sid, "isSidechain": False,
                "message": {"role": "user", "content": text}}  # fmt: skip
    return json.dumps({"timestamp": _iso(ms), **line}) + "\n"


@pytest.mark.parametrize("agent", ["codex", "claude-code"])
def test_a_turn_the_user_interrupted_is_not_told_as_active(
    live: LiveServer, clock: ManualClock, tmp_path: Path, agent: str
) -> None:
    """The user interrupts a peer mid-tool-call and leaves it: no hook says so, only the
    peer's transcript (Codex `turn_aborted`, Claude Code "[Request interrupted by user]").
    A new session's SessionStart reads it through the real tailer: no "Other sessions
    active". Mid-call, before the interruption, the peer is told."""
    params = {"source": "codex", "envelope": "codex"} if agent == "codex" else {}
    peer = "peer-aaaaaaaa"

    def hook(sid: str, name: str, path: Path, **kw: Any) -> str:
        if not path.exists():
            path.write_text(_transcript_line(agent, sid, clock.now_ms(), "start"))
        return post(live, clock, payload(sid, name, transcript_path=str(path), **kw), **params)

    peer_log = tmp_path / "peer.jsonl"
    hook(peer, "SessionStart", peer_log, source="startup")
    hook(peer, "UserPromptSubmit", peer_log, prompt="list the specs")
    cmd = {"command": "ls specs"}
    hook(peer, "PreToolUse", peer_log, tool_name="Bash", tool_input=cmd, tool_use_id="c1")
    text = context(
        hook("first-bbbbbbbb", "SessionStart", tmp_path / "first.jsonl", source="startup")
    )
    assert f"Other sessions active on this project now: {peer[:8]} ({agent}" in text

    clock.advance(3_000)
    with peer_log.open("a") as fh:
        fh.write(_transcript_line(agent, peer, clock.now_ms(), "interrupted"))
    body = hook("second-cccccccc", "SessionStart", tmp_path / "second.jsonl", source="startup")
    assert "Other sessions" not in body
    # The user comes back to it: a new prompt is a new turn, active again.
    hook(peer, "UserPromptSubmit", peer_log, prompt="go on")
    text = context(
        hook("third-dddddddd", "SessionStart", tmp_path / "third.jsonl", source="startup")
    )
    assert f"Other sessions active on this project now: {peer[:8]} ({agent}" in text


def test_a_fixed_compile_error_is_not_quoted_when_the_run_also_failed_on_tests(
    live: LiveServer, clock: ManualClock
) -> None:
    """Live reads the project's runs as replay holds them (every failure's output): a run
    that failed on a compile error, since fixed and type-checked clean by the same lint
    that had reported it, and on a test is told by the test's line, not the fixed error
    (its error summary alone is the compile error)."""
    from test_supersession_compile import GO_ASSERT, GO_COMPILE, LINT_ONLY, LINT_TYPECHECK

    lint = "golangci-lint run --enable-only bodyclose"
    tests_out = "Exit code 2\n" + GO_COMPILE + GO_ASSERT
    post(live, clock, bash_fail("peer-a", lint, "Exit code 1\n" + LINT_TYPECHECK))
    post(live, clock, bash_fail("peer-a", "make test-unit", tests_out))
    # The same lint again (its own tool_use_id), after the fix: lint findings only.
    again = bash_fail("peer-a", lint, "Exit code 1\n" + LINT_ONLY) | {"tool_use_id": "lint-2"}
    post(live, clock, again)
    post(live, clock, stop("peer-a"))
    told = context(start(live, clock, "next-b", "startup"))
    assert "make test-unit" in told and "TestPermissions" in told, told
    assert "declared and not used" not in told, told
