"""The real GitHub Copilot CLI binary (pinned in versions.json), offline
(`COPILOT_OFFLINE=true`) against a BYOK provider on loopback — the fake model's Anthropic
Messages dialect — watched by a real `tma1 serve` through the hooks a real
`tma1 install --adapter copilot` wrote."""

from __future__ import annotations

import re

import pytest
from agentkit import Rig, agent_binary, model, rig
from fakemodel import FakeModel, Text, Tool

pytestmark = [pytest.mark.slow, pytest.mark.agents]
__all__ = ["model", "rig"]  # the fixtures

AGENT = "copilot"


def _ready(rig: Rig) -> None:
    agent_binary(AGENT)  # skip (or fail under TMA1_REQUIRE_AGENTS=1) before any work
    rig.install(AGENT)
    rig.serve()


def _sh(cmd: str) -> Tool:
    return Tool("bash", {"command": cmd, "description": cmd})


def _conversation_after(model: FakeModel, reply: Text) -> str:
    reqs = model.main_requests()
    i = next(i for i, r in enumerate(reqs) if r.reply == reply)
    assert i + 1 < len(reqs), f"no model request after {reply}"
    return reqs[i + 1].conversation


def test_failing_build_blocks_the_stop_and_the_loop_guard_lets_it_stop(
    rig: Rig, model: FakeModel
) -> None:
    _ready(rig)
    app = rig.project / "src" / "app.py"
    first_stop, second_stop = Text("I am stopping here."), Text("Stopping anyway.")
    model.script = [
        Tool("view", {"path": str(app)}),
        Tool("edit", {"path": str(app), "old_str": "    return 1", "new_str": "    return 2"}),
        *[_sh("./build.sh")] * 3,
        first_stop,
        second_stop,
    ]
    run = rig.copilot(model.url, "make the build pass")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "return 2" in app.read_text()  # the real edit
    events = rig.events()
    tools = [(e["event_type"], e["tool_name"]) for e in events if e["tool_name"]]
    assert ("PostToolUse", "Read") in tools and ("PostToolUse", "Edit") in tools, tools
    builds = [
        e for e in events if e["tool_command"] == "./build.sh" and e["event_type"] != "PreToolUse"
    ]
    # Copilot calls the failed run a success (result_type "success"): tma1 read the exit
    # code from the result text.
    assert [(e["event_type"], e["tool_success"]) for e in builds] == [
        ("PostToolUseFailure", 0)
    ] * 3, builds
    assert all(e["agent_source"] == "copilot" for e in events)
    after = _conversation_after(model, first_stop)
    tail = after.split("I am stopping here.", 1)[1]
    assert "tma1" in tail and "repeated_failed_build" in tail, tail[:3000]
    stops = [e for e in events if e["hook_event_name"] == "Stop"]
    assert [bool(s["metadata"].get("stop_hook_active")) for s in stops] == [False, True]
    assert model.main_requests()[-1].reply == second_stop
    assert model.remaining() == 0


def test_outside_change_reaches_the_next_prompt_as_a_digest(rig: Rig, model: FakeModel) -> None:
    _ready(rig)
    model.script = [Tool("view", {"path": str(rig.project / "notes.txt")}), Text("read")]
    first = rig.copilot(model.url, "read notes.txt")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "tma1-context" not in model.all_text()
    seen = len(model.main_requests())
    (session,) = {e["session_id"] for e in rig.events()}

    rig.change_outside("notes.txt", "a teammate's line")
    model.script = [Text("noted")]
    second = rig.copilot(model.url, "what changed?", f"--resume={session}")
    assert second.returncode == 0, second.stderr[-3000:]
    assert {e["session_id"] for e in rig.events()} == {session}  # resumed
    nxt = model.main_requests()[seen].conversation
    assert "<tma1-context>" in nxt and "notes.txt" in nxt, nxt[-3000:]


def test_tma1_down_the_run_completes_and_nothing_of_tma1_reaches_the_model(
    rig: Rig, model: FakeModel
) -> None:
    _ready(rig)
    rig.stop_serve()
    model.script = [*[_sh("./build.sh")] * 3, Text("stop")]
    run = rig.copilot(model.url, "make the build pass")
    assert run.returncode == 0, run.stderr[-3000:]
    assert model.remaining() == 0
    text = "\n".join(r.conversation for r in model.main_requests())
    for needle in ("tma1-context", "do not stop yet", "tma1-hook", "repeated_failed_build"):
        assert needle not in text, needle
    assert not re.search(r"tma1:", text), text[-3000:]
    assert "hook" not in (run.stdout + run.stderr).lower(), run.stderr[-3000:]
    assert rig.events() == []  # nothing stored behind the server's back


SUB_PROMPT = "List the files in src and say what app.py does."


def test_the_session_bundle_is_told_once_not_on_every_turn_nor_to_sub_agents(
    rig: Rig, model: FakeModel
) -> None:
    """Issue 28.10: Copilot CLI is reported (github/copilot-cli#4665) to repeat a
    sessionStart hook's additional context on every turn and into sub-agents. On the
    pinned binary it does not: the bundle is put before the first prompt of the run, once;
    a sub-agent's requests do not carry it; a resumed session's next turn does not get it
    again. So the bundle rides on Copilot's sessionStart as on the other agents'."""
    _ready(rig)
    # A first session breaks the build: the next session in this project has a bundle.
    model.script = [*[_sh("./build.sh")] * 3, Text("broken"), Text("still broken")]
    assert rig.copilot(model.url, "build it").returncode == 0
    seen = len(model.requests)
    task = {"description": "look around", "prompt": SUB_PROMPT, "agent_type": "explore"}
    model.script = [Tool("task", {**task, "name": "looker"}), _sh("true"), Text("ok")]
    second = rig.copilot(model.url, "read the notes")
    assert second.returncode == 0, second.stderr[-3000:]
    run = model.requests[seen:]
    sub = [
        r for r in run if SUB_PROMPT in r.conversation and "read the notes" not in r.conversation
    ]
    main = [r for r in run if "read the notes" in r.conversation]
    assert sub and len(main) >= 2, [r.reply for r in run]
    # The main agent: one bundle in every request of the run (the history holds it once).
    assert [r.conversation.count("<tma1-context>") for r in main] == [1] * len(main)
    assert "./build.sh" in main[0].conversation.split("</tma1-context>")[0]
    # The sub-agent: none.
    assert [r.conversation.count("tma1-context") for r in sub] == [0] * len(sub)

    assert "(session new)" in main[0].conversation

    # Turn 2, a resumed session: the first bundle is not told again. Copilot puts the
    # newest sessionStart context (here the resume's, if tma1 had anything to add) at the
    # head of the conversation, in place of the earlier one: one block at most.
    (session,) = {
        e["session_id"]
        for e in rig.events()
        if e["metadata"].get("initial_prompt") == "read the notes"
    }
    seen = len(model.requests)
    model.script = [Text("again")]
    third = rig.copilot(model.url, "and now?", f"--resume={session}")
    assert third.returncode == 0, third.stderr[-3000:]
    turn2 = [r for r in model.requests[seen:] if "and now?" in r.conversation]
    assert turn2, [r.reply for r in model.requests[seen:]]
    for r in turn2:
        assert r.conversation.count("<tma1-context>") <= 1, r.conversation[-3000:]
        assert "(session new)" not in r.conversation, r.conversation[-3000:]
