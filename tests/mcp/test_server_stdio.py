"""`tma1 mcp` as a real subprocess, driven by the MCP SDK's stdio client, against a live
tma1 server (SQLite and PostgreSQL) — and against nothing at all."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import LiveServer, free_port
from mcp import ClientSession
from mcp_types import LATEST_PROTOCOL_VERSION
from mcpkit import (
    FAILING_TEST,
    TOOL_NAMES,
    event,
    make_project,
    mcp_env,
    post,
    post_all,
    stuck_session,
    text_of,
    with_mcp,
)

from tma1.events import FileChange, Usage


def _emits(live: LiveServer, session: str) -> list[dict[str, Any]]:
    live.service.delivery.flush()  # the emit log is written asynchronously
    r = live.client().get("/api/anomalies", params={"session_id": session})
    assert r.status_code == 200, r.text
    return r.json()["emits"]  # type: ignore[no-any-return]


def test_lists_tools_and_calls_each(live: LiveServer, tmp_path: Path) -> None:
    proj = make_project(tmp_path / "proj")
    post(live, event("older", proj, "SessionStart", source="startup"))
    stuck_session(live, ("s1", proj))
    # Deliver the digest once, so test_stuck is an emitted, outstanding finding with an id.
    digest = post(live, event("s1", proj, "UserPromptSubmit", prompt="go on"))
    assert "test_stuck" in digest
    [emit] = _emits(live, "s1")
    now = live.service.clock.now_ms()
    calc = str(proj / "src" / "calc.py")
    for writer in ("older", None, "s1"):
        live.store.insert_change(
            FileChange(
                ts=now, project=str(proj), path=calc, change="modified", writer_session=writer
            )
        )
    live.store.insert_usages([Usage(ts=now, session_id="s1", occupancy=120_000)])

    async def body(s: ClientSession) -> dict[str, Any]:
        listed = await s.list_tools()
        out: dict[str, Any] = {"tools": {t.name for t in listed.tools}}
        # No session_id: resolved from the working directory (a subdirectory of the project).
        out["anomalies"] = await s.call_tool("get_anomalies", {})
        out["state"] = await s.call_tool("get_session_state", {})
        out["changes"] = await s.call_tool("get_external_changes", {})
        out["confirm"] = await s.call_tool("confirm_anomaly", {"id": emit["id"]})
        out["dismiss"] = await s.call_tool(
            "dismiss_anomaly", {"id": emit["id"], "reason": "the test was already being fixed"}
        )
        out["unknown"] = await s.call_tool("get_session_state", {"session_id": "nope"})
        out["unknown_anomalies"] = await s.call_tool("get_anomalies", {"session_id": "nope"})
        out["no_emit"] = await s.call_tool("dismiss_anomaly", {"id": 999_999, "reason": "x"})
        return out

    got = with_mcp(proj / "src", mcp_env(live), body)
    assert got["tools"] == TOOL_NAMES

    res = got["anomalies"]
    assert not res.is_error, text_of(res)
    data = res.structured_content
    assert data["session_id"] == "s1" and data["project"] == str(proj)
    kinds = {f["kind"]: f for f in data["findings"]}
    stuck = kinds["test_stuck"]
    assert stuck["emit_id"] == emit["id"]
    assert stuck["would_deliver"] is False  # already told: suppressed for 10 minutes
    assert stuck["outstanding_since"] == emit["first_emitted_at"]
    assert stuck["related_files"] == [str(proj / "tests" / "test_calc.py")]
    assert kinds["repeated_failed_build"]["would_deliver"] is True  # the Stop is still due
    text = text_of(res)
    assert FAILING_TEST in text and stuck["suggestion"] in text
    assert "Outstanding since:" in text and f"Emit id {emit['id']}" in text

    state = got["state"].structured_content
    assert not got["state"].is_error
    assert state["tool_calls"]["by_tool"]["Bash"] == {"calls": 3, "failures": 3}
    assert state["failures_last_30_min"]["count"] == 3
    assert [e["path"] for e in state["recent_edits"]] == [calc]
    assert state["context"]["occupancy"] == 120_000
    assert state["context"]["over_threshold"] is True
    assert "120000 tokens of the 100000-token threshold" in text_of(got["state"])

    changes = got["changes"].structured_content
    assert sorted(c["changed_by"] or "" for c in changes["changes"]) == ["", "older"]
    assert "nobody we know" in text_of(got["changes"])

    assert not got["confirm"].is_error and not got["dismiss"].is_error
    assert got["unknown"].is_error and "nope" in text_of(got["unknown"])
    assert got["unknown_anomalies"].is_error and "unknown to tma1" in text_of(
        got["unknown_anomalies"]
    )
    assert got["no_emit"].is_error and "999999" in text_of(got["no_emit"])

    # The dismissal (which replaced the confirmation: one label per emit and source) is an
    # agent label in the precision gate, next to — not mixed into — the human figures.
    gate = live.client().get("/api/anomalies/precision").json()
    assert gate["agent"]["kinds"]["test_stuck"] == {
        "tp": 0,
        "fp": 1,
        "labelled": 1,
        "precision": 0.0,
        "pass": None,  # one label is below the minimum sample (docs/gates.md)
        "status": "not_enough_data",
        "n": 1,
        "min_n": 10,
    }
    assert gate["human"]["overall"]["labelled"] == 0
    [after] = _emits(live, "s1")
    assert after["labels"]["agent"]["note"] == "the test was already being fixed"


def test_human_label_keeps_precedence_over_the_agents(live: LiveServer, tmp_path: Path) -> None:
    proj = make_project(tmp_path / "proj")
    stuck_session(live, ("s1", proj))
    post(live, event("s1", proj, "UserPromptSubmit", prompt="go on"))
    [emit] = _emits(live, "s1")
    r = live.client().post(f"/api/anomalies/{emit['id']}/label", json={"label": "tp"})
    assert r.status_code == 200

    async def body(s: ClientSession) -> Any:
        return await s.call_tool("dismiss_anomaly", {"id": emit["id"], "reason": "noise"})

    res = with_mcp(proj, mcp_env(live), body)
    assert not res.is_error, text_of(res)
    [after] = _emits(live, "s1")
    assert (after["label"], after["label_source"]) == ("tp", "human")
    assert after["labels"]["agent"]["label"] == "fp"
    gate = live.client().get("/api/anomalies/precision").json()
    assert gate["human"]["overall"]["tp"] == 1 and gate["agent"]["overall"]["fp"] == 1


def test_twenty_previews_leave_the_next_digest_and_stop_unchanged(
    live: LiveServer, tmp_path: Path
) -> None:
    """Twin sessions in twin projects live through the same events at the same instants;
    only one of them asks get_anomalies, twenty times. Their next digest and Stop answer
    must be the same, and the asking one must have no emit-log rows before its prompt."""
    a, b = make_project(tmp_path / "a" / "proj"), make_project(tmp_path / "b" / "proj")
    agents = [("twin-a", a), ("twin-b", b)]
    stuck_session(live, *agents)

    async def body(s: ClientSession) -> list[Any]:
        return [await s.call_tool("get_anomalies", {}) for _ in range(20)]

    results = with_mcp(a, mcp_env(live), body)
    assert all(not r.is_error for r in results)
    previews = [r.structured_content["findings"] for r in results]
    assert all(p == previews[0] for p in previews)  # asking changed nothing it reports
    due = {f["kind"] for f in previews[0] if f["would_deliver"]}
    assert due == {"test_stuck", "repeated_failed_build"}
    assert _emits(live, "twin-a") == []

    digest_a, digest_b = post_all(live, agents, "UserPromptSubmit", prompt="go on")
    assert "test_stuck" in digest_a
    assert digest_a.replace(str(a), "<project>") == digest_b.replace(str(b), "<project>")
    # What the preview promised for the digest channel is what the digest said.
    for f in previews[0]:
        if f["channel"] == "user_prompt_submit":
            assert f["suggestion"] in digest_a
    stop_a, stop_b = post_all(live, agents, "Stop", stop_hook_active=False)
    assert json.loads(stop_a)["hookSpecificOutput"]["hookEventName"] == "Stop"
    assert stop_a.replace(str(a), "<project>") == stop_b.replace(str(b), "<project>")
    assert [e["kind"] for e in _emits(live, "twin-a")] == [
        e["kind"] for e in _emits(live, "twin-b")
    ]


def test_every_tool_returns_a_clear_error_when_tma1_is_down(tmp_path: Path) -> None:
    port = free_port()  # nothing listens here
    calls = {
        "get_anomalies": {},
        "get_session_state": {},
        "get_external_changes": {"session_id": "s1", "since": "2026-01-01T00:00:00Z"},
        "get_session_bundle": {"source": "compact"},
        "dismiss_anomaly": {"id": 1, "reason": "wrong"},
        "confirm_anomaly": {"id": 1},
    }

    async def body(s: ClientSession) -> tuple[dict[str, Any], set[str]]:
        results = {name: await s.call_tool(name, args) for name, args in calls.items()}
        still_there = {t.name for t in (await s.list_tools()).tools}
        return results, still_there

    results, still_there = with_mcp(tmp_path, mcp_env(port), body)
    assert set(results) == TOOL_NAMES
    for name, res in results.items():
        assert res.is_error, name
        text = text_of(res)
        assert f"tma1 is not running at http://127.0.0.1:{port}" in text, (name, text)
        assert "tma1 serve" in text and "TMA1_PORT" in text
    assert still_there == TOOL_NAMES  # the server survived every failed call


def test_stdout_carries_only_protocol_frames(tmp_path: Path) -> None:
    port = free_port()
    frames = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": LATEST_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "get_session_state", "arguments": {}},
        },
    ]
    stdin = "".join(json.dumps(f) + "\n" for f in frames)
    errfile = (tmp_path / "stderr.log").open("w+")  # a file: a full stderr pipe cannot block
    proc = subprocess.Popen(
        [sys.executable, "-m", "tma1.cli", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errfile,
        cwd=tmp_path,
        env={**mcp_env(port), "PATH": "/usr/bin:/bin", "TMA1_LOG_LEVEL": "DEBUG"},
        text=True,
    )
    assert proc.stdin and proc.stdout
    proc.stdin.write(stdin)
    proc.stdin.flush()
    lines = []
    while True:  # read until the answer to the tool call, then close stdin: a clean exit
        line = proc.stdout.readline()
        assert line, "stdout closed before the tool call was answered"
        lines.append(line)
        if json.loads(line).get("id") == 2:
            break
    proc.stdin.close()
    lines += proc.stdout.read().splitlines(keepends=True)
    assert proc.wait(timeout=30) == 0
    errfile.seek(0)
    err = errfile.read()
    errfile.close()
    parsed = [json.loads(ln) for ln in lines if ln.strip()]
    assert all(p.get("jsonrpc") == "2.0" for p in parsed)
    # Codex shows only the first line of the instructions: it reads whole on its own.
    first = next(p for p in parsed if p.get("id") == 1)["result"]["instructions"].splitlines()[0]
    assert first.startswith("tma1 watches this coding session") and first.endswith(".")
    assert "get_anomalies" in first and first.count("(") == first.count(")")
    answer = next(p for p in parsed if p.get("id") == 2)["result"]
    assert answer["isError"] is True
    assert "tma1 is not running" in answer["content"][0]["text"]
    assert "tma1 unreachable" in err  # the log went to stderr
