"""The session bundle on the real Codex CLI (pinned in versions.json): a Codex session
that starts in a project whose build a Claude Code session broke is told so in its first
model request (SessionStart `hookSpecificOutput.additionalContext`, measured here)."""

from __future__ import annotations

import pytest
from agentkit import Rig, agent_binary, model, rig
from fakemodel import FakeModel, Text, Tool

pytestmark = [pytest.mark.slow, pytest.mark.agents]
__all__ = ["model", "rig"]  # the fixtures


def test_a_codex_session_in_a_project_another_session_broke_is_told_so(
    rig: Rig, model: FakeModel
) -> None:
    agent_binary("claude-code")
    agent_binary("codex")  # skip (or fail under TMA1_REQUIRE_AGENTS=1) before any work
    rig.write_codex_config(model.url)  # first: install adds its MCP server to this file
    rig.install("all")
    keys = rig.trust_codex_hooks()
    assert any(":session_start:" in k for k in keys), keys
    rig.serve()

    # A Claude Code session runs ./build.sh, which fails, and stops.
    model.script = [Tool("Bash", {"command": "./build.sh", "description": "build"}), Text("Stop.")]
    run = rig.claude(model.url, "build it")
    assert run.returncode == 0, run.stderr[-2000:]
    breaker = next(
        e["session_id"] for e in rig.events() if e["hook_event_name"] == "PostToolUseFailure"
    )

    before = len(model.main_requests())
    model.script = [Text("Hello.")]
    run = rig.codex("what is the state of the build?")
    assert run.returncode == 0, run.stderr[-3000:]
    first = model.main_requests()[before].conversation
    assert "tma1 (session startup): what this session should know." in first
    # It never passed here: the breaker ran it last, it did not break it (design §2.21).
    assert f"(last run in session {breaker[:8]} (claude-code); 1 failing run)" in first
    starts = [e for e in rig.events() if e["hook_event_name"] == "SessionStart"]
    assert starts[-1]["agent_source"] == "codex"
