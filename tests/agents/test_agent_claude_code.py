"""The real Claude Code binary (pinned in versions.json), driven by the fake model,
watched by a real `tma1 serve` through the hooks a real `tma1 install` wrote."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from agentkit import Rig, agent_binary, model, rig, wait_for
from fakemodel import Body, FakeModel, Reply, Text, Tool, tool_names

pytestmark = [pytest.mark.slow, pytest.mark.agents]
__all__ = ["model", "rig"]  # the fixtures

AGENT = "claude-code"


def _ready(rig: Rig) -> None:
    agent_binary(AGENT)  # skip (or fail under TMA1_REQUIRE_AGENTS=1) before any work
    rig.install(AGENT)
    rig.serve()


def _stream(run_stdout: str) -> list[dict[str, Any]]:
    out = []
    for line in run_stdout.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _result(run_stdout: str) -> dict[str, Any]:
    results = [m for m in _stream(run_stdout) if m.get("type") == "result"]
    assert results, f"no result message in Claude Code's stream:\n{run_stdout[-2000:]}"
    return results[-1]


def _session_id(run_stdout: str) -> str:
    return str(_result(run_stdout)["session_id"])


def _after(model: FakeModel, reply: Reply) -> tuple[str, str]:
    """The main request that got `reply`, and the one after it, as text."""
    reqs = model.main_requests()
    i = next(i for i, r in enumerate(reqs) if r.reply == reply)
    assert i + 1 < len(reqs), f"no model request after {reply}"
    return reqs[i].conversation, reqs[i + 1].conversation


def test_failing_build_blocks_the_stop_and_the_loop_guard_lets_it_stop(
    rig: Rig, model: FakeModel
) -> None:
    _ready(rig)
    app = str(rig.project / "src" / "app.py")
    first_stop, second_stop = Text("I am stopping here."), Text("Stopping anyway.")
    model.script = [
        Tool("Read", {"file_path": app}),
        Tool("Edit", {"file_path": app, "old_string": "return 1", "new_string": "return 2"}),
        *[Tool("Bash", {"command": "./build.sh", "description": "build"})] * 3,
        first_stop,
        second_stop,
    ]
    run = rig.claude(model.url, "make the build pass")
    assert run.returncode == 0, run.stderr[-2000:]
    assert model.remaining() == 0
    assert (rig.project / "src" / "app.py").read_text().count("return 2") == 1  # real edit

    events = rig.events()
    failures = [e for e in events if e["hook_event_name"] == "PostToolUseFailure"]
    assert len(failures) == 3 and all(e["tool_command"] == "./build.sh" for e in failures)
    stops = [e for e in events if e["hook_event_name"] == "Stop"]
    assert [bool(s["metadata"].get("stop_hook_active")) for s in stops] == [False, True]

    before, after = _after(model, first_stop)
    # The block reason reached the model in the request that followed the first stop,
    # and not before it.
    assert "Stop hook feedback" not in before and "tma1:" not in before
    tail = after.split("I am stopping here.", 1)[1]
    assert "tma1" in tail and "repeated_failed_build" in tail, tail[:3000]
    # The loop guard: the second stop ended the run; no request followed it.
    assert model.main_requests()[-1].reply == second_stop
    assert _result(run.stdout)["result"] == "Stopping anyway."


def test_outside_change_reaches_the_next_prompt_as_a_digest(rig: Rig, model: FakeModel) -> None:
    _ready(rig)
    model.script = [Tool("Read", {"file_path": str(rig.project / "notes.txt")}), Text("read it")]
    first = rig.claude(model.url, "read notes.txt")
    assert first.returncode == 0, first.stderr[-2000:]
    seen = len(model.main_requests())
    assert "<tma1-context>" not in model.all_text()

    rig.change_outside("notes.txt", "a teammate's line")
    model.script = [Text("noted")]
    second = rig.claude(model.url, "what changed?", "--continue")
    assert second.returncode == 0, second.stderr[-2000:]
    assert _session_id(second.stdout) == _session_id(first.stdout)
    nxt = model.main_requests()[seen].text
    assert "<tma1-context>" in nxt and "notes.txt" in nxt, nxt[-3000:]


def test_edit_after_an_outside_change_is_a_stale_file_view(rig: Rig, model: FakeModel) -> None:
    _ready(rig)
    notes = rig.project / "notes.txt"

    def change_then_edit(body: Body) -> Reply:
        # Runs when the Read's result comes back: the file changes outside the agent
        # between the Read and the Edit, through tma1's real file watcher.
        rig.change_outside("notes.txt", "changed outside")
        return Tool(
            "Edit",
            {
                "file_path": str(notes),
                "old_string": "changed outside",
                "new_string": "edited by the agent",
            },
        )

    model.script = [Tool("Read", {"file_path": str(notes)}), change_then_edit, Text("done")]
    first = rig.claude(model.url, "edit notes.txt")
    assert first.returncode == 0, first.stderr[-2000:]
    edits = [e for e in rig.events() if e["tool_name"] == "Edit"]
    assert edits, "tma1 saw no Edit"

    seen = len(model.main_requests())
    model.script = [Text("ok")]
    second = rig.claude(model.url, "anything else?", "--continue")
    assert second.returncode == 0, second.stderr[-2000:]
    texts = "\n".join(r.text for r in model.main_requests()[2:])
    assert "stale_file_view" in texts and "notes.txt" in texts, texts[-3000:]
    assert seen < len(model.main_requests())


def test_tma1_down_the_run_completes_and_nothing_of_tma1_reaches_the_model(
    rig: Rig, model: FakeModel
) -> None:
    _ready(rig)
    rig.stop_serve()
    app = str(rig.project / "src" / "app.py")
    model.script = [
        Tool("Read", {"file_path": app}),
        *[Tool("Bash", {"command": "./build.sh", "description": "build"})] * 3,
        Text("I am stopping here."),
    ]
    debug = rig.root / "claude-debug.log"
    run = rig.claude(model.url, "make the build pass", "--debug-file", str(debug))
    assert run.returncode == 0, run.stderr[-2000:]
    assert model.remaining() == 0
    assert _result(run.stdout)["result"] == "I am stopping here."
    # tma1's hooks did run, and exited 0 with nothing to say (tool events and Stop).
    log = debug.read_text(errors="replace")
    ran = re.findall(
        r"Hooks: (\w+)\S* \[[^\]]*tma1-hook-claude-code\.sh[^\]]*\] finished with status 0", log
    )
    assert {"PreToolUse", "PostToolUseFailure", "Stop"} <= set(ran), ran
    assert not re.search(r"tma1-hook-claude-code\.sh[^\]]*\] finished with status [^0]", log)
    text = "\n".join(r.conversation for r in model.requests)
    for needle in ("<tma1-context>", "do not stop yet", "Stop hook feedback", "hook error"):
        assert needle not in text
    assert not re.search(r"(?<!mcp__)tma1:", text), text[-3000:]


def test_the_mcp_tools_are_offered_to_the_model(rig: Rig, model: FakeModel) -> None:
    _ready(rig)
    # Claude Code's own listing starts `tma1 mcp` from the registration install wrote.
    listed = rig.run(
        [str(agent_binary(AGENT)), "mcp", "list"], env=rig.claude_env(model.url), timeout=120
    )
    line = next((ln for ln in listed.stdout.splitlines() if ln.startswith("tma1")), "")
    assert "Connected" in line, listed.stdout + listed.stderr
    # In a session: Claude Code 2.1 defers MCP tools behind ToolSearch (and -p connects
    # MCP servers in the background; ToolSearch waits for them), so the model asks for
    # tma1's tools and the next request must carry their definitions.
    model.script = [Tool("ToolSearch", {"query": "+tma1", "max_results": 10}), Text("hello")]
    run = rig.claude(model.url, "hi")
    assert run.returncode == 0, run.stderr[-2000:]
    # (Whether the first request already names them depends on how fast the MCP server
    # connected, which a loaded machine decides: only the request after ToolSearch counts.)
    last = model.main_requests()[-1]
    seen = last.conversation + json.dumps(tool_names(last.body))
    found = set(re.findall(r"mcp__tma1__\w+", seen))
    assert len(found) >= 2, last.conversation[-3000:]


def test_a_sub_agent_s_tool_calls_arrive_with_its_agent_id(rig: Rig, model: FakeModel) -> None:
    _ready(rig)
    notes = str(rig.project / "notes.txt")
    mark = "SUBTASK-7f3a"
    # The sub-agent's requests and the main loop's may interleave (Claude Code can run a
    # sub-agent in the background), so each request is answered from its own queue: the
    # sub-agent's conversation starts with the Task prompt carrying `mark`.
    main: list[Reply] = [
        Tool(
            "Task",
            {
                "description": "read notes",
                "prompt": f"{mark}: read notes.txt and report.",
                "subagent_type": "general-purpose",
            },
            aliases=("Agent",),
        ),
        Text("The sub-agent read it."),
    ]
    sub: list[Reply] = [Tool("Read", {"file_path": notes}), Text("notes say first")]

    def route(body: Body) -> Reply:
        first = json.dumps((body.get("messages") or [{}])[0])
        if mark in first:
            return sub.pop(0) if sub else Text("nothing more")
        if len(main) == 1:  # the main loop's last word waits for the sub-agent's
            wait_for("the sub-agent's turns", lambda: not sub, timeout=60)
        return main.pop(0) if main else Text("done")

    model.script = [route] * 8
    run = rig.claude(model.url, "delegate reading notes.txt")
    assert run.returncode == 0, run.stderr[-2000:]
    assert not main and not sub

    def sub_read() -> list[dict[str, Any]]:
        return [e for e in rig.events() if e["tool_name"] == "Read"]

    reads = wait_for("the sub-agent's Read in tma1", sub_read, timeout=10)
    ids = {e["metadata"].get("agent_id") or e.get("agent_id") for e in reads}
    assert ids and None not in ids, reads
    parents = [e for e in rig.events() if e["tool_name"] in ("Task", "Agent")]
    assert parents and all(
        not (e["metadata"].get("agent_id") or e.get("agent_id")) for e in parents
    )


def test_the_http_transport_still_blocks_the_stop(rig: Rig, model: FakeModel) -> None:
    """`install --transport http` (issue 31: a header derived from the token, not the
    token): Claude Code's native http hooks still post every tool event and get the Stop
    block back."""
    _ready(rig)
    rig.tma1("install", "--adapter", AGENT, "--port", str(rig.port), "--transport", "http")
    settings = (rig.home / ".claude" / "settings.json").read_text()
    token = (rig.data_dir / "hook-token").read_text().strip()
    assert '"type": "http"' in settings and token not in settings
    model.script = [
        *[Tool("Bash", {"command": "./build.sh", "description": "build"})] * 3,
        Text("I am stopping here."),
        Text("Stopping anyway."),
    ]
    run = rig.claude(model.url, "make the build pass")
    assert run.returncode == 0, run.stderr[-2000:]
    failures = [e for e in rig.events() if e["hook_event_name"] == "PostToolUseFailure"]
    assert len(failures) == 3
    _before, after = _after(model, Text("I am stopping here."))
    assert "repeated_failed_build" in after.split("I am stopping here.", 1)[1]


def test_claude_code_leaves_no_temp_dir_in_the_system_temp(rig: Rig, model: FakeModel) -> None:
    """Issue 28.12: each run left /tmp/claude-<uid>/<project>/ behind; the rig points the
    agents' TMPDIR into the test's own directory."""
    _ready(rig)
    system = Path(tempfile.gettempdir()) / f"claude-{os.getuid()}"
    slug = re.sub(r"[^A-Za-z0-9]", "-", str(rig.project))
    model.script = [Tool("Bash", {"command": "true", "description": "nothing"}), Text("Done.")]
    run = rig.claude(model.url, "run true")
    assert run.returncode == 0, run.stderr[-2000:]
    assert model.remaining() == 0
    assert not (system / slug).exists()
    assert (rig.tmp / f"claude-{os.getuid()}").is_dir()
