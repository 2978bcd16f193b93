"""The real Codex CLI binary (pinned in versions.json), driven by the fake model through
`codex exec`, watched by a real `tma1 serve` through the hooks a real `tma1 install`
wrote — trusted in the throw-away CODEX_HOME as Codex's own trust prompt would."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable

import pytest
from agentkit import Rig, agent_binary, model, rig
from fakemodel import Body, FakeModel, Reply, Text, Tool

pytestmark = [pytest.mark.slow, pytest.mark.agents]
__all__ = ["model", "rig"]  # the fixtures

AGENT = "codex"


def _ready(rig: Rig, model: FakeModel) -> None:
    agent_binary(AGENT)  # skip (or fail under TMA1_REQUIRE_AGENTS=1) before any work
    rig.write_codex_config(model.url)  # first: install adds its MCP server to this file
    rig.install(AGENT)
    keys = rig.trust_codex_hooks()
    assert any(":stop:" in k for k in keys) and any(":post_tool_use:" in k for k in keys), keys
    rig.serve()


def _sh(rig: Rig, cmd: str) -> Tool:
    return Tool("exec_command", {"cmd": cmd, "workdir": str(rig.project)})


def _patch(rel: str, old: str, new: str) -> Tool:
    return Tool(
        "apply_patch",
        f"*** Begin Patch\n*** Update File: {rel}\n@@\n-{old}\n+{new}\n*** End Patch",
    )


def _after(model: FakeModel, reply: Reply) -> tuple[str, str]:
    reqs = model.main_requests()
    i = next(i for i, r in enumerate(reqs) if r.reply == reply)
    assert i + 1 < len(reqs), f"no model request after {reply}"
    return reqs[i].conversation, reqs[i + 1].conversation


def test_failing_build_blocks_the_stop_and_the_loop_guard_lets_it_stop(
    rig: Rig, model: FakeModel
) -> None:
    _ready(rig, model)
    first_stop, second_stop = Text("I am stopping here."), Text("Stopping anyway.")
    model.script = [
        _sh(rig, "cat src/app.py"),
        _patch("src/app.py", "    return 1", "    return 2"),
        *[_sh(rig, "./build.sh")] * 3,
        first_stop,
        second_stop,
    ]
    run = rig.codex("make the build pass")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "return 2" in (rig.project / "src" / "app.py").read_text()  # the real patch
    builds = [
        e
        for e in rig.events()
        if e["hook_event_name"] in ("PostToolUse", "PostToolUseFailure")
        and e["tool_command"] == "./build.sh"
    ]
    assert len(builds) == 3
    # Codex sends no exit code in the hook: tma1 must have read it from the rollout.
    assert [e["tool_success"] for e in builds] == [0, 0, 0], builds
    before, after = _after(model, first_stop)
    assert "repeated_failed_build" not in before
    tail = after.split("I am stopping here.", 1)[1]
    assert "tma1" in tail and "repeated_failed_build" in tail, tail[:3000]
    stops = [e for e in rig.events() if e["hook_event_name"] == "Stop"]
    assert [bool(s["metadata"].get("stop_hook_active")) for s in stops] == [False, True]
    assert model.main_requests()[-1].reply == second_stop


def test_outside_change_reaches_the_next_prompt_as_a_digest(rig: Rig, model: FakeModel) -> None:
    _ready(rig, model)
    model.script = [_sh(rig, "cat notes.txt"), Text("read it")]
    first = rig.codex("read notes.txt")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "<tma1-context>" not in model.all_text()
    seen = len(model.main_requests())

    rig.change_outside("notes.txt", "a teammate's line")
    model.script = [Text("noted")]
    second = rig.codex("what changed?", "resume", "--last")
    assert second.returncode == 0, second.stderr[-3000:]
    sessions = {e["session_id"] for e in rig.events()}
    assert len(sessions) == 1, sessions  # resumed: the same session
    nxt = model.main_requests()[seen].conversation
    assert "<tma1-context>" in nxt and "notes.txt" in nxt, nxt[-3000:]


def test_edit_after_an_outside_change_is_a_stale_file_view(rig: Rig, model: FakeModel) -> None:
    _ready(rig, model)
    notes = rig.project / "notes.txt"

    def change_then_patch(body: Body) -> Reply:
        # Runs when the `cat`'s output comes back: the file changes outside the agent
        # between that read and the patch, through tma1's real file watcher.
        rig.change_outside("notes.txt", "changed outside")
        return _patch("notes.txt", notes.read_text().rstrip("\n"), "edited by the agent")

    model.script = [_sh(rig, "cat notes.txt"), change_then_patch, Text("done")]
    first = rig.codex("edit notes.txt")
    assert first.returncode == 0, first.stderr[-3000:]
    assert notes.read_text() == "edited by the agent\n"
    (post,) = [
        e
        for e in rig.events()
        if e["tool_name"] == "apply_patch" and e["event_type"] == "PostToolUse"
    ]
    # The patch's hunk has no line numbers; the rollout's diff of it does: line 1.
    assert post["metadata"].get("edited_lines") == [[1, 1]], post["metadata"]
    seen = len(model.main_requests())
    assert "stale_file_view" not in model.main_requests()[1].conversation

    model.script = [Text("ok")]
    second = rig.codex("anything else?", "resume", "--last")
    assert second.returncode == 0, second.stderr[-3000:]
    texts = "\n".join(r.conversation for r in model.main_requests()[2:])
    assert "stale_file_view" in texts and "notes.txt" in texts, texts[-3000:]
    assert seen < len(model.main_requests())


def test_tma1_down_the_run_completes_and_nothing_of_tma1_reaches_the_model(
    rig: Rig, model: FakeModel
) -> None:
    _ready(rig, model)
    rig.stop_serve()
    model.script = [_sh(rig, "cat src/app.py"), *[_sh(rig, "./build.sh")] * 3, Text("stop")]
    run = rig.codex("make the build pass")
    assert run.returncode == 0, run.stderr[-3000:]
    assert model.remaining() == 0
    assert "hook: Stop Completed" in run.stderr  # the hooks ran, and found nobody
    text = "\n".join(r.conversation for r in model.main_requests())
    for needle in ("<tma1-context>", "do not stop yet", "tma1-hook", "hook failed"):
        assert needle not in text
    # "tma1:" as tma1's hook answers begin (the MCP namespace "mcp__tma1:" is no hook's)
    assert not re.search(r"(?<!mcp__)tma1:", text), text[-3000:]
    assert rig.events() == []  # nothing stored behind the server's back


def test_the_mcp_tools_are_offered_to_the_model(rig: Rig, model: FakeModel) -> None:
    _ready(rig, model)
    listed = rig.run(
        [str(agent_binary(AGENT)), "mcp", "list", "--json"],
        env=rig.env(CODEX_FAKE_KEY="fake-key"),
        timeout=60,
    )
    servers = {s["name"]: s for s in json.loads(listed.stdout)}
    assert "tma1" in servers and servers["tma1"].get("enabled", True), listed.stdout

    # Codex connects MCP servers in the background and then tells the model about the
    # new (deferred) tool namespace: keep the turn going with cheap commands until a
    # request carries it, within a deadline.
    deadline = time.monotonic() + 60

    def until_listed(body: Body) -> Reply:
        if "mcp__tma1" in json.dumps(body.get("input")) or time.monotonic() > deadline:
            return Text("listed")
        return _sh(rig, "true")

    turns: list[Callable[[Body], Reply]] = [until_listed] * 200
    model.script = list(turns)
    run = rig.codex("which tools do you have?")
    assert run.returncode == 0, run.stderr[-3000:]
    last = model.main_requests()[-1]
    assert last.reply == Text("listed")
    assert "mcp__tma1" in last.conversation, last.conversation[-3000:]
