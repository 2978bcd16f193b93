"""The real Gemini CLI binary (pinned in versions.json), driven by the fake model through
its Gemini API dialect (`GOOGLE_GEMINI_BASE_URL`), watched by a real `tma1 serve` through
the hooks a real `tma1 install --adapter gemini` wrote."""

from __future__ import annotations

import re

import pytest
from agentkit import Rig, agent_binary, model, rig
from fakemodel import FakeModel, Text, Tool

pytestmark = [pytest.mark.slow, pytest.mark.agents]
__all__ = ["model", "rig"]  # the fixtures

AGENT = "gemini"


def _ready(rig: Rig) -> None:
    agent_binary(AGENT)  # skip (or fail under TMA1_REQUIRE_AGENTS=1) before any work
    rig.write_gemini_settings()  # first: install adds its hooks to this file
    rig.install(AGENT)
    rig.serve()


def _sh(cmd: str) -> Tool:
    return Tool("run_shell_command", {"command": cmd, "description": cmd})


def _conversation_after(model: FakeModel, reply: Text) -> str:
    reqs = model.main_requests()
    i = next(i for i, r in enumerate(reqs) if r.reply == reply)
    assert i + 1 < len(reqs), f"no model request after {reply}"
    return reqs[i + 1].conversation


def test_failing_build_blocks_the_end_of_the_turn_and_the_loop_guard_lets_it_stop(
    rig: Rig, model: FakeModel
) -> None:
    _ready(rig)
    app = rig.project / "src" / "app.py"
    first_stop, second_stop = Text("I am stopping here."), Text("Stopping anyway.")
    model.script = [
        Tool("read_file", {"file_path": str(app)}),
        Tool(
            "replace",
            {
                "file_path": str(app),
                "old_string": "    return 1",
                "new_string": "    return 2",
                "instruction": "return 2",
            },
        ),
        *[_sh("./build.sh")] * 3,
        first_stop,
        second_stop,
    ]
    run = rig.gemini(model.url, "make the build pass")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "return 2" in app.read_text()  # the real edit
    events = rig.events()
    tools = [(e["hook_event_name"], e["tool_name"]) for e in events if e["tool_name"]]
    assert ("PostToolUse", "Read") in tools and ("PostToolUse", "Edit") in tools, tools
    builds = [
        e for e in events if e["tool_command"] == "./build.sh" and e["event_type"] != "PreToolUse"
    ]
    # Gemini reports the exit status in the result text only: tma1 read it from there.
    assert [(e["event_type"], e["tool_success"]) for e in builds] == [
        ("PostToolUseFailure", 0)
    ] * 3, builds
    assert all("expected return value 3" in (e["tool_error_summary"] or "") for e in builds)
    assert all(e["agent_source"] == "gemini" for e in events)
    # AfterAgent answered with a block: its reason is the next request's new user turn.
    after = _conversation_after(model, first_stop)
    tail = after.split("I am stopping here.", 1)[1]
    assert "tma1" in tail and "repeated_failed_build" in tail, tail[:3000]
    stops = [e for e in events if e["hook_event_name"] == "Stop"]
    assert [bool(s["metadata"].get("stop_hook_active")) for s in stops] == [False, True]
    assert {s["metadata"].get("agent_event") for s in stops} == {"AfterAgent"}
    assert model.main_requests()[-1].reply == second_stop
    assert model.remaining() == 0


def test_outside_change_reaches_the_next_prompt_as_a_digest(rig: Rig, model: FakeModel) -> None:
    _ready(rig)
    model.script = [Tool("read_file", {"file_path": str(rig.project / "notes.txt")}), Text("read")]
    first = rig.gemini(model.url, "read notes.txt")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "tma1-context" not in model.all_text()
    seen = len(model.main_requests())

    rig.change_outside("notes.txt", "a teammate's line")
    model.script = [Text("noted")]
    second = rig.gemini(model.url, "what changed?", "--resume", "latest")
    assert second.returncode == 0, second.stderr[-3000:]
    sessions = {e["session_id"] for e in rig.events()}
    assert len(sessions) == 1, sessions  # resumed: the same session
    nxt = model.main_requests()[seen].conversation
    # Gemini hands hook context to the model with < and > as entities.
    assert "&lt;tma1-context&gt;" in nxt and "notes.txt" in nxt, nxt[-3000:]
    prompts = [e for e in rig.events() if e["hook_event_name"] == "UserPromptSubmit"]
    assert [p["metadata"].get("prompt") for p in prompts] == ["read notes.txt", "what changed?"]


def test_tma1_down_the_run_completes_and_nothing_of_tma1_reaches_the_model(
    rig: Rig, model: FakeModel
) -> None:
    _ready(rig)
    rig.stop_serve()
    model.script = [*[_sh("./build.sh")] * 3, Text("stop")]
    run = rig.gemini(model.url, "make the build pass")
    assert run.returncode == 0, run.stderr[-3000:]
    assert model.remaining() == 0
    text = "\n".join(r.conversation for r in model.main_requests())
    for needle in ("tma1-context", "do not stop yet", "tma1-hook", "repeated_failed_build"):
        assert needle not in text, needle
    assert not re.search(r"tma1:", text), text[-3000:]
    assert "hook" not in run.stderr.lower(), run.stderr[-3000:]
    assert rig.events() == []  # nothing stored behind the server's back
