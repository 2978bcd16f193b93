"""Whole scenarios through a real server: real hook payloads posted to `/api/hooks`,
the real rule set, a real database (SQLite and PostgreSQL) and a ManualClock."""

from __future__ import annotations

import json
from typing import Any

from conftest import LiveServer, start_live_server
from enginekit import bash_fail, bash_ok, payload, prompt, stop

from tma1.clock import MINUTE_MS, ManualClock
from tma1.config import Settings
from tma1.engine.anomaly import Anomaly, Channel
from tma1.engine.rules import RULES
from tma1.engine.window import RuleConfig, SessionWindow

BUILD = "make build"
BUILD_OUT = "Exit code 2\nmain.go:12:5: undefined: frobnicate\nmake: *** [build] Error 1"
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


def blocked(body: str) -> dict[str, Any]:
    """A Claude Code Stop block: the reason as the Stop's additionalContext."""
    out = json.loads(body)
    assert list(out) == ["hookSpecificOutput"], out
    assert out["hookSpecificOutput"]["hookEventName"] == "Stop"
    reason = out["hookSpecificOutput"]["additionalContext"]
    assert isinstance(reason, str) and 0 < len(reason) < 2_000
    return {"reason": reason}


def emits(live: LiveServer, sid: str) -> list[dict[str, Any]]:
    assert live.service.delivery.flush()
    return [r for r in live.store.emits_since(0) if r["session_id"] == sid]


def test_repeated_failure_blocks_stop_until_resolved_then_blocks_again_on_new_evidence(
    live: LiveServer, clock: ManualClock
) -> None:
    sid = "scenario-1"
    post(live, clock, payload(sid, "SessionStart", source="startup"))
    for _ in range(3):
        assert post(live, clock, bash_fail(sid, BUILD, BUILD_OUT)) == ""

    first = blocked(post(live, clock, stop(sid)))
    assert "make build" in first["reason"]
    t_first = clock.now_ms()
    # The loop guard: a Stop caused by our block is never blocked again.
    assert post(live, clock, stop(sid, active=True)) == ""
    clock.advance(2 * MINUTE_MS)
    assert post(live, clock, stop(sid)) == ""  # same finding, inside the 10-minute window
    # Design §2.15: an unrelated success (`git status`) resolves nothing any more; a
    # passing run of the same check, however spelled, does.
    assert post(live, clock, bash_ok(sid, "git status", "nothing to commit")) == ""
    clock.advance(10 * MINUTE_MS)
    assert post(live, clock, stop(sid)) == ""  # stale: no failure newer than the block
    assert post(live, clock, bash_ok(sid, f"{BUILD} 2>&1 | tail -3", "ok")) == ""
    assert post(live, clock, stop(sid)) == ""  # resolved, and no failure since
    clock.advance(12 * MINUTE_MS)
    assert post(live, clock, stop(sid)) == ""  # still resolved: old evidence stays old
    for _ in range(3):  # failures before the pass are history: a new streak of three
        post(live, clock, bash_fail(sid, BUILD, BUILD_OUT))
    again = blocked(post(live, clock, stop(sid)))
    t_again = clock.now_ms()
    assert "make build" in again["reason"]

    rows = emits(live, sid)
    assert [(r["kind"], r["channel"], r["ts"]) for r in rows] == [
        ("repeated_failed_build", "stop_block", t_first),
        ("repeated_failed_build", "stop_block", t_again),
    ]
    # Resolved, then new evidence: a fresh first_emitted_at, not the original one.
    assert [r["first_emitted_at"] for r in rows] == [t_first, t_again]
    health = live.client().get("/api/health").json()["engine"]
    assert health["emits_written"] == 2 and health["emits_dropped"] == 0
    assert health["delivered"] == {"stop_block": 2}


def test_a_stop_block_finding_is_never_consumed_by_a_user_prompt(
    live: LiveServer, clock: ManualClock
) -> None:
    sid = "scenario-2"
    for _ in range(3):
        post(live, clock, bash_fail(sid, PYTEST, PYTEST_OUT))
    digest = post(live, clock, prompt(sid))
    # Claude Code: the digest is plain text on stdout.
    assert digest.startswith("<tma1-context>") and digest.endswith("</tma1-context>")
    assert "test_stuck" in digest and "tests/test_calc.py::test_add" in digest
    assert "repeated_failed_build" not in digest
    assert post(live, clock, prompt(sid)) == ""  # nothing new: silent
    reason = blocked(post(live, clock, stop(sid)))["reason"]
    assert "pytest -q tests/test_calc.py" in reason and "test_stuck" not in reason
    assert sorted(r["kind"] for r in emits(live, sid)) == ["repeated_failed_build", "test_stuck"]


def test_restart_does_not_reemit_what_was_delivered_in_the_last_10_minutes(
    live: LiveServer, clock: ManualClock
) -> None:
    sid = "scenario-3"
    for _ in range(3):
        post(live, clock, bash_fail(sid, BUILD, BUILD_OUT))
    blocked(post(live, clock, stop(sid)))
    t_first = clock.now_ms()
    live.stop()  # graceful shutdown flushes the emit log

    second = start_live_server(live.settings, clock=clock)
    try:
        assert second.service.delivery.restored_rows == 1
        clock.advance(5 * MINUTE_MS)
        assert post(second, clock, stop(sid)) == ""
        clock.advance(5 * MINUTE_MS)
        # The window has passed, but nothing new failed: the same stale block is not
        # repeated (issue 15, pattern 7); a newer failure blocks again.
        assert post(second, clock, stop(sid)) == ""
        post(second, clock, bash_fail(sid, BUILD, BUILD_OUT))
        blocked(post(second, clock, stop(sid)))
        rows = emits(second, sid)
        assert [r["first_emitted_at"] for r in rows] == [t_first, t_first]
    finally:
        second.stop()


def test_codex_envelope(live: LiveServer, clock: ManualClock) -> None:
    sid = "codex-1"
    codex = {"source": "codex", "envelope": "codex"}
    for _ in range(3):
        body = post(
            live,
            clock,
            payload(
                sid,
                "PostToolUse",
                tool_name="Bash",
                tool_input={"command": PYTEST},
                tool_response="Process exited with code 1\nOutput:\n" + PYTEST_OUT,
                turn_id="t1",
            ),
            **codex,
        )
        assert body == ""
    ctx = json.loads(post(live, clock, prompt(sid), **codex))
    assert list(ctx) == ["hookSpecificOutput"]
    assert ctx["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    assert ctx["hookSpecificOutput"]["additionalContext"].startswith("<tma1-context>")
    assert "test_stuck" in ctx["hookSpecificOutput"]["additionalContext"]
    stop_body = json.loads(post(live, clock, stop(sid), **codex))
    assert set(stop_body) == {"decision", "reason"} and stop_body["decision"] == "block"


def _probe(window: SessionWindow, now: int, config: RuleConfig) -> list[Anomaly]:
    """A same-turn rule that exists only in this test: any failed `probe` command."""
    fails = [
        e for e in window.events if e.is_failure and (e.tool_command or "").startswith("probe")
    ]
    if not fails:
        return []
    return [
        Anomaly(
            kind="probe_same_turn",
            severity="high",
            channel=Channel.POST_TOOL_USE.value,
            evidence=f"probe failed {len(fails)} time(s)",
            suggestion="Look at the probe output now.",
            subject="probe",
            last_evidence_ts=fails[-1].ts,
        )
    ]


def test_post_tool_use_channel_plumbing(live: LiveServer, clock: ManualClock) -> None:
    live.service.delivery.detector.set_rules({**RULES, "probe_same_turn": _probe})
    sid = "ptu-1"
    assert post(live, clock, bash_ok(sid, "ls")) == ""
    out = json.loads(post(live, clock, bash_fail(sid, "probe --once", "Exit code 1\nboom")))
    hso = out["hookSpecificOutput"]
    assert hso["hookEventName"] == "PostToolUseFailure"
    assert "Look at the probe output now." in hso["additionalContext"]
    # Delivered once; not re-told on the next tool result, nor in the digest, nor at Stop.
    assert post(live, clock, bash_ok(sid, "ls")) == ""
    assert post(live, clock, prompt(sid)) == ""
    assert post(live, clock, stop(sid)) == ""
    clock.advance(10 * MINUTE_MS)
    codex = json.loads(post(live, clock, bash_ok(sid, "ls"), envelope="codex"))
    assert codex["hookSpecificOutput"]["hookEventName"] == "PostToolUse"
    assert [r["channel"] for r in emits(live, sid)] == ["post_tool_use", "post_tool_use"]


def test_preview_endpoint_is_read_only_and_keeps_its_shape(
    live: LiveServer, clock: ManualClock
) -> None:
    sid = "preview-1"
    for _ in range(3):
        post(live, clock, bash_fail(sid, PYTEST, PYTEST_OUT))
    with live.client() as client:
        assert client.get("/api/anomalies/preview").status_code == 422
        assert client.get("/api/anomalies/preview", params={"session_id": ""}).status_code == 422
        odd = client.get("/api/anomalies/preview", params={"session_id": "a\x00b"})
        assert odd.status_code == 200 and odd.json()["findings"] == []
        for _ in range(100):
            r = client.get("/api/anomalies/preview", params={"session_id": sid})
            assert r.status_code == 200
        out = r.json()
    assert set(out) == {"session_id", "now", "findings"}
    assert out["session_id"] == sid and out["now"] == clock.now_ms()
    by_kind = {f["kind"]: f for f in out["findings"]}
    assert set(by_kind) == {"repeated_failed_build", "test_stuck"}
    f = by_kind["repeated_failed_build"]
    assert set(f) >= {
        "kind",
        "severity",
        "channel",
        "evidence",
        "suggestion",
        "related_files",
        "subject",
        "stable_key",
        "last_evidence_ts",
        "first_emitted_at",
        "outstanding_since",
        "would_deliver",
    }
    assert (f["channel"], f["would_deliver"], f["outstanding_since"]) == ("stop_block", True, None)
    assert emits(live, sid) == []
    # 100 previews later the hooks still deliver everything, once.
    assert "test_stuck" in post(live, clock, prompt(sid))
    blocked(post(live, clock, stop(sid)))
    after = {
        f["kind"]: f
        for f in live.client()
        .get("/api/anomalies/preview", params={"session_id": sid})
        .json()["findings"]
    }
    assert after["repeated_failed_build"]["would_deliver"] is False
    assert after["repeated_failed_build"]["outstanding_since"] == clock.now_ms()


def test_disable_injection_answers_empty_but_stores_events(
    settings: Settings, clock: ManualClock
) -> None:
    srv = start_live_server(settings.with_overrides(disable_injection=True), clock=clock)
    try:
        sid = "quiet-1"
        for _ in range(3):
            assert post(srv, clock, bash_fail(sid, BUILD, BUILD_OUT)) == ""
        assert post(srv, clock, stop(sid)) == ""
        assert srv.store.counts()["tma1_hook_events"] == 4
        preview = srv.client().get("/api/anomalies/preview", params={"session_id": sid}).json()
        assert preview["findings"][0]["would_deliver"]
    finally:
        srv.stop()


def test_a_rule_that_raises_does_not_break_delivery(live: LiveServer, clock: ManualClock) -> None:
    def broken(window: SessionWindow, now: int, config: RuleConfig) -> list[Anomaly]:
        raise RuntimeError("rule bug")

    live.service.delivery.detector.set_rules({"broken": broken, **RULES})
    sid = "broken-1"
    for _ in range(3):
        post(live, clock, bash_fail(sid, BUILD, BUILD_OUT))
    blocked(post(live, clock, stop(sid)))
    assert live.client().get("/api/health").json()["engine"]["rule_errors"]["broken"] >= 1


def test_context_pressure_threshold_is_read_at_start_up_and_fires_once(
    settings: Settings, clock: ManualClock
) -> None:
    from tma1.config import load_settings
    from tma1.events import Usage

    env = load_settings({"TMA1_CONTEXT_PRESSURE_THRESHOLD": "5000"})
    srv = start_live_server(
        settings.with_overrides(context_pressure_threshold=env.context_pressure_threshold),
        clock=clock,
    )
    try:
        assert srv.service.delivery.config.context_pressure_threshold == 5_000
        sid = "pressure-1"
        post(srv, clock, payload(sid, "SessionStart"))
        srv.store.insert_usages([Usage(ts=clock.now_ms(), session_id=sid, occupancy=4_999)])
        srv.service.delivery.invalidate(sid)  # what the transcript tailer does
        assert post(srv, clock, prompt(sid)) == ""
        srv.store.insert_usages([Usage(ts=clock.now_ms(), session_id=sid, occupancy=5_000)])
        digest = post(srv, clock, prompt(sid))
        assert "context_pressure" in digest and "5,000" in digest
        clock.advance(30 * MINUTE_MS)
        srv.store.insert_usages([Usage(ts=clock.now_ms(), session_id=sid, occupancy=9_000)])
        assert post(srv, clock, prompt(sid)) == ""  # one-shot per session
    finally:
        srv.stop()


def test_http_transport_answers_json_only(live: LiveServer, clock: ManualClock) -> None:
    """Claude Code's native http hooks (`tma1 install --transport http`) refuse any body
    that is not JSON: every answer on `?transport=http` is JSON, `{}` when silent."""
    sid = "http-1"
    http = {"transport": "http"}

    def hook(data: dict[str, Any]) -> Any:
        clock.advance(1_000)
        r = live.hook(data, params=http)
        assert r.status_code == 200
        assert r.headers["content-type"] == "application/json"
        return r.json()

    assert hook(payload(sid, "PreToolUse", tool_name="Bash", tool_input={"command": PYTEST})) == {}
    for _ in range(3):
        hook(bash_fail(sid, PYTEST, PYTEST_OUT))
    ctx = hook(prompt(sid))["hookSpecificOutput"]  # the digest: not plain text here
    assert ctx["hookEventName"] == "UserPromptSubmit"
    assert ctx["additionalContext"].startswith("<tma1-context>")
    assert "test_stuck" in ctx["additionalContext"]
    block = hook(stop(sid))["hookSpecificOutput"]
    assert block["hookEventName"] == "Stop"
    assert block["additionalContext"].startswith("tma1: do not stop yet")
    assert hook(stop(sid, active=True)) == {}  # the loop guard, as JSON
    # A wrong token is still refused (Claude Code shows that error: a misconfiguration).
    assert live.hook(prompt(sid), params=http, token="wrong").status_code == 403
    # The command hook's answers are unchanged: the digest stays plain text.
    for _ in range(3):
        post(live, clock, bash_fail("cmd-1", PYTEST, PYTEST_OUT))
    assert post(live, clock, prompt("cmd-1")).startswith("<tma1-context>")


def test_context_pressure_rearms_after_each_compaction_and_only_then(
    settings: Settings, clock: ManualClock
) -> None:
    """Issue 15's miss: the context passed the threshold again after an auto-compaction
    and nobody warned. One warning per context epoch (design §2.17), whichever signal
    marks the compaction: a PreCompact hook, a SessionStart with source compact, or the
    transcript's compact boundary (a `compaction` usage row from the tailer)."""
    from tma1.events import Usage

    srv = start_live_server(settings.with_overrides(context_pressure_threshold=5_000), clock=clock)

    def tokens(n: int, kind: str = "usage") -> None:
        clock.advance(1_000)
        srv.store.insert_usages([Usage(ts=clock.now_ms(), session_id=sid, occupancy=n, kind=kind)])
        srv.service.delivery.invalidate(sid)  # what the transcript tailer does

    def told() -> bool:
        clock.advance(1_000)
        return "context_pressure" in post(srv, clock, prompt(sid))

    try:
        sid = "epochs-1"
        post(srv, clock, payload(sid, "SessionStart", source="startup"))
        tokens(6_000)
        assert told()
        tokens(9_000)
        assert not told()  # one-shot within the epoch
        clock.advance(1_000)
        post(srv, clock, payload(sid, "PreCompact", trigger="auto"))
        # The newest request measured the context the compaction replaced: no news yet.
        assert not told()
        tokens(3_000)
        assert not told()
        tokens(5_500)
        assert told()  # the context filled up again
        assert not told()
        clock.advance(1_000)
        post(srv, clock, payload(sid, "SessionStart", source="compact"))
        tokens(7_000)
        assert told()
        tokens(0, kind="compaction")  # the transcript's compact_boundary
        tokens(8_000)
        assert told()
        tokens(9_000)
        assert not told()
        keys = [e["stable_key"] for e in emits(srv, sid) if e["kind"] == "context_pressure"]
        assert len(keys) == len(set(keys)) == 4
    finally:
        srv.stop()


def test_a_stop_block_names_a_check_once(live: LiveServer, clock: ManualClock) -> None:
    """An edit, then `make build` failing three times on the edited file: both
    build_broken_after_my_edit and repeated_failed_build see the check at the Stop. The
    block names it once, by repeated_failed_build (a fact of the runs; the edit's blame is
    an inference); only that one is emitted (design §2.3), and the other is not told at
    the next Stop either."""
    sid = "one-check-once"
    main_go = "/nonexistent/tma1-engine-tests/proj/main.go"
    tool_input = {"file_path": main_go, "old_string": "a", "new_string": "b"}
    post(live, clock, payload(sid, "SessionStart", source="startup"))
    post(live, clock, bash_ok(sid, BUILD, "built"))
    post(
        live,
        clock,
        payload(
            sid,
            "PostToolUse",
            tool_name="Edit",
            tool_input=tool_input,
            tool_use_id="e1",
            tool_response={"filePath": main_go, "success": True},
        ),
    )
    for _ in range(3):
        post(live, clock, bash_fail(sid, BUILD, BUILD_OUT))
    found = live.service.delivery.preview(sid)["findings"]
    assert {f["kind"] for f in found} >= {"build_broken_after_my_edit", "repeated_failed_build"}
    reason = blocked(post(live, clock, stop(sid)))["reason"]
    assert "1. [high] repeated_failed_build" in reason and "`make build`" in reason
    assert "build_broken_after_my_edit" not in reason and "2." not in reason
    assert [r["kind"] for r in emits(live, sid)] == ["repeated_failed_build"]
    clock.advance(2 * MINUTE_MS)
    assert post(live, clock, stop(sid)) == ""  # the told one is suppressed; no second word
    assert [r["kind"] for r in emits(live, sid)] == ["repeated_failed_build"]
