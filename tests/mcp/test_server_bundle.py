"""`get_session_bundle` through the real `tma1 mcp` subprocess against a live server: it
previews what a SessionStart would be told, and previewing emits nothing and uses up
nothing — the real SessionStart afterwards still tells it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import LiveServer
from mcp import ClientSession
from mcpkit import event, make_project, mcp_env, post, stuck_session, text_of, with_mcp


def test_get_session_bundle_previews_without_emitting(live: LiveServer, tmp_path: Path) -> None:
    proj = make_project(tmp_path / "proj")
    stuck_session(live, ("s1", proj))  # pytest fails three times after an edit

    async def body(s: ClientSession) -> dict[str, Any]:
        return {
            "resume": await s.call_tool("get_session_bundle", {}),
            "startup": await s.call_tool("get_session_bundle", {"source": "startup"}),
            "unknown": await s.call_tool("get_session_bundle", {"session_id": "nope"}),
        }

    got = with_mcp(proj / "src", mcp_env(live), body)
    res = got["resume"]
    assert not res.is_error, text_of(res)
    data = res.structured_content
    assert data["session_id"] == "s1" and data["source"] == "resume"
    assert "findings" in data["parts"]
    assert {f["kind"] for f in data["findings"]} >= {"test_stuck", "repeated_failed_build"}
    assert data["chars"] == len(data["text"]) < 2_000
    assert data["text"] in text_of(res)
    # At a fresh startup a session's own findings are not re-told.
    assert "findings" not in got["startup"].structured_content["parts"]
    assert got["unknown"].is_error and "unknown to tma1" in text_of(got["unknown"])

    live.service.delivery.flush()
    assert [r for r in live.store.emits_since(0) if r["channel"] == "session_start"] == []
    # The preview used nothing up: the real resume tells the same findings.
    answer = json.loads(post(live, event("s1", proj, "SessionStart", source="resume")))
    assert "test_stuck" in answer["hookSpecificOutput"]["additionalContext"]


def test_a_verdict_on_another_machines_emit_is_refused_with_the_reason(
    live: LiveServer, tmp_path: Path, db_url: str
) -> None:
    """On a team database the agent's verdict tools label only this machine's emits; the
    refusal reaches the agent as the server's one-line reason (issue 30)."""
    from gateseed import emit_row

    from tma1.store import Store

    other = Store.open(db_url, migrate=False, machine_id="m-other")
    try:
        other.insert_emits([emit_row(ts=1_000, session_id="theirs", kind="test_stuck")])
        emit_id = int(other.emits_since(0)[0]["id"])
    finally:
        other.close()
    proj = make_project(tmp_path / "proj")

    async def body(s: ClientSession) -> Any:
        return await s.call_tool("dismiss_anomaly", {"id": emit_id, "reason": "not mine"})

    res = with_mcp(proj, mcp_env(live), body)
    assert res.is_error
    assert f"emit {emit_id} was stored by machine m-other, not this one" in text_of(res)
    assert live.store.counts()["tma1_anomaly_labels"] == 0
