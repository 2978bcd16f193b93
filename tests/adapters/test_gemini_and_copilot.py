"""Gemini CLI and Copilot CLI: `tma1 install|uninstall --adapter gemini|copilot`, their
hook payloads (captured from the real binaries: tests/fixtures/agents/) through each
agent's dialect (its AgentSpec.normalize) and the parser, and the answers in each agent's
own shape."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from installkit import env_for, snapshot, tma1

from tma1.adapters import get_adapters
from tma1.adapters.agents import envelope_for, normalize
from tma1.adapters.base import Adapter
from tma1.config import load_settings
from tma1.events import parse_payload

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agents"
GEMINI_EVENTS = {
    "SessionStart",
    "BeforeAgent",
    "BeforeTool",
    "AfterTool",
    "AfterAgent",
    "SessionEnd",
}
COPILOT_EVENTS = {
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "Stop",
    "SessionEnd",
}

GEMINI_USER = """{
  "general": {"vimMode": true},
  "hooks": {
    "enabled": true,
    "disabled": ["my-old-hook"],
    "BeforeTool": [
      {"matcher": "write_file", "hooks": [{"name": "guard", "type": "command", "command": "~/guard.sh", "timeout": 30000}]}
    ]
  }
}
"""  # noqa: E501
COPILOT_USER = '{\n  "model": "gpt-5",\n  "hooks": {\n    "agentStop": [\n      {"type": "command", "bash": "notify-send done", "timeoutSec": 5}\n    ]\n  }\n}\n'  # noqa: E501


def _path(home: Path, agent: str) -> Path:
    return home / (".gemini" if agent == "gemini" else ".copilot") / "settings.json"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.mark.parametrize(
    ("agent", "original", "events"),
    [("gemini", GEMINI_USER, GEMINI_EVENTS), ("copilot", COPILOT_USER, COPILOT_EVENTS)],
)
def test_install_is_idempotent_keeps_the_users_entries_and_uninstall_is_byte_identical(
    home: Path, agent: str, original: str, events: set[str]
) -> None:
    path = _path(home, agent)
    path.parent.mkdir()
    path.write_text(original)
    r = tma1(home, "install", "--adapter", agent)
    assert r.returncode == 0, r.stderr
    once = path.read_bytes()
    assert tma1(home, "install", "--adapter", agent).returncode == 0
    assert path.read_bytes() == once  # twice is once
    doc = json.loads(once)
    marker = f"tma1-hook-{agent}.sh"
    ours = {
        event
        for event, groups in doc["hooks"].items()
        if event not in ("enabled", "disabled", "notifications")  # Gemini's settings
        for g in groups
        for h in g.get("hooks", ())
        if marker in h.get("command", "")
    }
    assert ours == events
    before = json.loads(original)
    for key, value in before["hooks"].items():  # the user's own, untouched
        if isinstance(value, list):
            assert doc["hooks"][key][: len(value)] == value
        else:
            assert doc["hooks"][key] == value
    assert {k: v for k, v in doc.items() if k != "hooks"} == {
        k: v for k, v in before.items() if k != "hooks"
    }
    script = home / ".tma1" / "hooks" / marker
    assert f"?source={agent}&envelope={agent}" in script.read_text()
    r = tma1(home, "uninstall", "--adapter", agent)
    assert r.returncode == 0, r.stderr
    assert path.read_text() == original
    assert not script.exists()


def test_gemini_handler_shape_and_copilot_has_no_empty_matcher(home: Path) -> None:
    for agent in ("gemini", "copilot"):
        assert tma1(home, "install", "--adapter", agent).returncode == 0
    gem = json.loads(_path(home, "gemini").read_text())
    (group,) = gem["hooks"]["BeforeTool"]
    assert group["matcher"] == "*"
    (handler,) = group["hooks"]
    assert handler["type"] == "command" and handler["timeout"] == 5000  # milliseconds
    cop = json.loads(_path(home, "copilot").read_text())
    for groups in cop["hooks"].values():
        for g in groups:
            # Copilot drops the whole settings file over an empty matcher.
            assert "matcher" not in g
            assert g["hooks"][0]["timeout"] == 5
    for agent in ("gemini", "copilot"):
        assert tma1(home, "uninstall", "--adapter", agent).returncode == 0
        assert not _path(home, agent).exists()  # install created it, uninstall removes it


@pytest.mark.parametrize("agent", ["gemini", "copilot"])
@pytest.mark.parametrize("bad", ['{"hooks": {"AfterAgent": [}', "[1]", '{"hooks": {"Stop": {}}}'])
def test_malformed_settings_are_refused_and_left_untouched(
    home: Path, agent: str, bad: str
) -> None:
    path = _path(home, agent)
    path.parent.mkdir()
    path.write_text(bad)
    before = snapshot(home)
    r = tma1(home, "install", "--adapter", agent)
    assert r.returncode == 1 and str(path) in r.stderr
    assert snapshot(home) == before


def test_all_takes_each_agent_only_where_it_is_found(home: Path, tmp_path: Path) -> None:
    """Issue 28.4: `all` wired Codex (and so `doctor` failed on its trust) on machines
    without it. An agent counts as found by its config directory or its command on PATH."""
    settings = load_settings()
    bare = {"HOME": str(home), "PATH": str(tmp_path / "empty-bin")}
    (home / ".claude").mkdir(exist_ok=True)
    assert [a.name for a in get_adapters("all", settings, bare)] == ["claude-code"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "codex"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    with_codex = {**bare, "PATH": str(bin_dir)}
    assert [a.name for a in get_adapters("all", settings, with_codex)] == ["claude-code", "codex"]
    (home / ".gemini").mkdir()
    (home / ".copilot").mkdir()
    names = [a.name for a in get_adapters("all", settings, with_codex)]
    assert names == ["claude-code", "codex", "gemini", "copilot"]
    r = tma1(home, "install", "--adapter", "all", PATH=f"{bin_dir}:/usr/bin:/bin")
    assert r.returncode == 0, r.stderr
    assert _path(home, "gemini").exists() and _path(home, "copilot").exists()
    assert (home / ".codex" / "hooks.json").exists()
    assert tma1(home, "uninstall", "--adapter", "all").returncode == 0
    assert not _path(home, "gemini").exists()


def test_gemini_cli_home_and_copilot_home_are_honoured(home: Path, tmp_path: Path) -> None:
    env = env_for(home, GEMINI_CLI_HOME=str(tmp_path / "g"), COPILOT_HOME=str(tmp_path / "c"))
    adapters = {
        a.name: a for a in (get_adapters(n, load_settings(), env)[0] for n in ("gemini", "copilot"))
    }
    paths = {n: [getattr(r, "path", None) for r in a.registrations] for n, a in adapters.items()}
    assert tmp_path / "g" / ".gemini" / "settings.json" in paths["gemini"]
    assert tmp_path / "c" / "settings.json" in paths["copilot"]


def test_each_new_adapter_says_what_its_agent_cannot_be_told() -> None:
    for name in ("gemini", "copilot"):
        (a,) = get_adapters(name, load_settings(), {"HOME": os.devnull})
        assert isinstance(a, Adapter) and a.cannot_be_told
    (claude,) = get_adapters("claude-code", load_settings(), {"HOME": os.devnull})
    assert claude.cannot_be_told == []


# --- payloads from the real binaries ------------------------------------------------------


def _gemini_fixture() -> list[dict[str, Any]]:
    lines = (FIXTURES / "gemini-0.61.0-hooks.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _copilot_fixture() -> list[dict[str, Any]]:
    lines = (FIXTURES / "copilot-1.0.102-hooks.jsonl").read_text().splitlines()
    return [json.loads(line)["payload"] for line in lines if line.strip()]


def _parse(payload: dict[str, Any], agent: str) -> Any:
    return parse_payload(normalize(payload, agent), ts=1, source=agent)


def test_gemini_payloads_map_onto_tma1s_events_and_tools() -> None:
    evs = [_parse(p, "gemini") for p in _gemini_fixture() if p["hook_event_name"] != "PreCompress"]
    got = [(e.event_type, e.tool_name, e.tool_success) for e in evs]
    assert got == [
        ("SessionStart", None, None),
        ("UserPromptSubmit", None, None),
        ("PreToolUse", "Read", None),
        ("PostToolUse", "Read", True),
        ("PreToolUse", "Edit", None),
        ("PostToolUse", "Edit", True),
        ("PreToolUse", "Bash", None),
        ("PostToolUseFailure", "Bash", False),
        ("Stop", None, None),
        ("SessionEnd", None, None),
    ]
    fail = evs[7]
    assert fail.tool_command == "./build.sh" and fail.failure_kind == "exit"
    assert fail.tool_error_summary == "src/app.py:3: error: boom"
    assert (
        fail.metadata["agent_event"] == "AfterTool"
        and fail.metadata["agent_tool"] == "run_shell_command"
    )
    assert evs[3].tool_file_path == "/tmp/i19/g/proj/app.py"
    assert evs[1].metadata["prompt"] == "please build"
    assert evs[8].stop_hook_active is False
    # Gemini's chat file is no transcript tma1's sensor reads: kept aside.
    assert all(e.transcript_path is None for e in evs)
    assert evs[0].metadata["agent_transcript_path"].endswith(".jsonl")


def test_gemini_shell_success_and_a_tool_error() -> None:
    ok = {
        "session_id": "s",
        "hook_event_name": "AfterTool",
        "tool_name": "run_shell_command",
        "tool_input": {"command": "ls"},
        "tool_response": {
            "llmContent": "<untrusted_context>\nOutput: a\nb\nProcess Group PGID: 1\n"
            "</untrusted_context>",
            "returnDisplay": "a\nb",
        },
    }
    e = _parse(ok, "gemini")
    assert (e.event_type, e.tool_success) == ("PostToolUse", True)
    # a command that prints a line like Gemini's own does not fool it: the last one counts
    tricky = json.loads(json.dumps(ok))
    tricky["tool_response"]["llmContent"] = "Output: Exit Code: 1\nExit Code: 2\n"
    e = _parse(tricky, "gemini")
    assert e.event_type == "PostToolUseFailure" and e.tool_result.startswith("Exit code 2")
    err = {
        "session_id": "s",
        "hook_event_name": "AfterTool",
        "tool_name": "read_file",
        "tool_input": {"file_path": "/x"},
        "tool_response": {
            "llmContent": "",
            "error": {"message": "File not found: /x", "type": "x"},
        },
    }
    e = _parse(err, "gemini")
    assert (e.event_type, e.tool_name, e.tool_result) == (
        "PostToolUseFailure",
        "Read",
        "File not found: /x",
    )


def test_copilot_claude_format_payloads_and_the_exit_code_in_the_text() -> None:
    payloads = [p for p in _copilot_fixture() if "hook_event_name" in p]
    evs = [_parse(p, "copilot") for p in payloads]
    got = [(e.event_type, e.tool_name, e.tool_success) for e in evs]
    assert got == [
        ("UserPromptSubmit", None, None),
        ("PreToolUse", "Bash", None),
        ("PostToolUseFailure", "Bash", False),  # result_type "success", exit code 1
        ("Stop", None, None),
    ]
    assert evs[2].tool_error_summary == "src/app.py:3: error: boom"
    assert evs[3].metadata["stop_hook_active"] is False
    ok = dict(
        payloads[2],
        tool_result={
            "result_type": "success",
            "text_result_for_llm": "hi\n<shellId: 3 completed with exit code 0>",
        },
    )
    e = _parse(ok, "copilot")
    assert (e.event_type, e.tool_success, e.tool_result) == ("PostToolUse", True, "hi")
    view = {
        "session_id": "s",
        "hook_event_name": "PostToolUse",
        "tool_name": "view",
        "tool_input": {"path": "/p/a.py"},
        "tool_result": {"result_type": "success", "text_result_for_llm": "x = 1"},
    }
    e = _parse(view, "copilot")
    assert (e.tool_name, e.tool_file_path, e.tool_success) == ("Read", "/p/a.py", True)
    denied = dict(view, tool_result={"result_type": "denied", "text_result_for_llm": "no"})
    assert _parse(denied, "copilot").tool_success is False
    assert _parse(denied, "copilot").event_type == "PostToolUse"  # a refusal, not a failure


def test_sources_and_answer_shapes() -> None:
    gemini = envelope_for("gemini", "gemini")
    assert json.loads(gemini.context("PostToolUseFailure", "x"))["hookSpecificOutput"] == {
        "hookEventName": "PostToolUseFailure",
        "additionalContext": "x",
    }
    gem = json.loads(gemini.context("UserPromptSubmit", "<tma1-context>x</tma1-context>"))
    assert gem == {
        "hookSpecificOutput": {
            "hookEventName": "BeforeAgent",
            "additionalContext": "<tma1-context>x</tma1-context>",
        }
    }
    cop = json.loads(envelope_for("copilot", "copilot").context("UserPromptSubmit", "ctx"))
    assert cop == {"additionalContext": "ctx"}
    assert envelope_for(None, "claude-code").context("UserPromptSubmit", "ctx") == "ctx"


def test_the_stop_block_is_the_decision_form_for_both() -> None:
    from tma1.engine.digest import stop_block_reason

    for agent in ("gemini", "copilot"):
        body = envelope_for(agent, agent).stop_block("tma1: do not stop yet")
        assert json.loads(body) == {"decision": "block", "reason": "tma1: do not stop yet"}
        assert stop_block_reason(body) == "tma1: do not stop yet"


def test_gemini_prompt_loses_the_hook_context_gemini_put_in_front_of_it() -> None:
    """Seen on Gemini CLI 0.61.0 after `--resume`: the SessionStart bundle arrives inside
    the next BeforeAgent prompt; the stored prompt is what the user typed."""
    typed = "what changed?"
    bundle = (
        "<hook_context>&lt;tma1-context&gt;\ntma1 (session resume): what this session "
        "should know.\n&lt;/tma1-context&gt;</hook_context>\n\n"
    )
    out = normalize(
        {"hook_event_name": "BeforeAgent", "session_id": "g", "prompt": bundle + typed}, "gemini"
    )
    assert out["hook_event_name"] == "UserPromptSubmit" and out["prompt"] == typed
    plain = normalize(
        {"hook_event_name": "BeforeAgent", "session_id": "g", "prompt": typed}, "gemini"
    )
    assert plain["prompt"] == typed
    inner = "fix <hook_context>x</hook_context> parsing"  # not in front: the user's own words
    kept = normalize(
        {"hook_event_name": "BeforeAgent", "session_id": "g", "prompt": inner}, "gemini"
    )
    assert kept["prompt"] == inner
