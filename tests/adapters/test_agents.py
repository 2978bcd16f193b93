"""The agents' registry (`tma1.adapters.agents`): each agent is one module with its
`AgentSpec`, and everything agent-specific is read from there — install's choices, the
hook script's query, `?source=`, the answer envelopes, replay's formats, the docs' table.

The acceptance test of issue 29: an imaginary fifth agent, one module dropped into a copy
of the package and nothing else changed, is installed by `tma1 install`, has its payloads
normalised into HookEvents, is answered by a real `tma1 serve` through the real hook script
in its own envelope, and its recorded session log replays."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import REPO, free_port

import tma1
from tma1.adapters import agents
from tma1.adapters.agents import NAMES, SPECS, envelope_for, markdown_table
from tma1.adapters.hookscript import render_script
from tma1.config import Settings

FIFTH = Path(__file__).resolve().parent / "fixtures" / "fifth_agent.py"
HOOKS_DOC = REPO / "docs" / "hooks.md"


def test_every_module_of_the_package_is_an_agent_in_order() -> None:
    assert NAMES == ("claude-code", "codex", "gemini", "copilot")
    modules = {p.stem for p in Path(agents.__file__).parent.glob("*.py")}
    assert {m.replace("_", "-") for m in modules if not m.startswith("_")} == set(NAMES)
    assert agents.SOURCES == {
        "": "claude-code",
        "claude": "claude-code",
        "claude-code": "claude-code",
        "codex": "codex",
        "gemini": "gemini",
        "copilot": "copilot",
    }


def test_a_module_added_to_the_package_is_found_after_the_four(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(FIFTH, tmp_path / "fifth.py")
    monkeypatch.setattr(agents, "__path__", [*agents.__path__, str(tmp_path)])
    try:
        assert [s.name for s in agents._discover()] == [*NAMES, "fifth"]
    finally:
        sys.modules.pop("tma1.adapters.agents.fifth", None)


def test_the_engine_knows_no_agent() -> None:
    """The engine writes the text and takes the form (`Envelope`) as given: it imports no
    agent, spec or dialect, and its answers name no agent. (Its other ports' file-backed
    implementations leaving `engine/` is issue 29's layout test.)"""
    import ast

    agent_modules = ("tma1.adapters.agents", "tma1.adapters.spec", "tma1.adapters.dialect")

    engine = Path(tma1.__file__).resolve().parent / "engine"
    for path in engine.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith((*agent_modules, "tma1.dialects"))
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith(agent_modules) for a in node.names)
    for name in ("digest.py", "delivery.py"):
        text = (engine / name).read_text(encoding="utf-8").lower()
        assert not any(f'"{agent}"' in text for agent in (*NAMES, "gemini", "copilot"))


def test_the_hook_script_posts_each_agents_query() -> None:
    settings = Settings(data_dir=Path("/tmp/x"))
    for name, spec in SPECS.items():
        script = render_script(settings, name, "sh")
        assert f"/api/hooks{spec.query}" in script or (spec.query == "" and name == "claude-code")
    assert SPECS["codex"].query == "?source=codex&envelope=codex"


def test_envelopes() -> None:
    """Claude Code's command hook: a prompt's context as plain stdout, every other event's
    (and the Stop block) as hookSpecificOutput; its http transport JSON only; Codex JSON and
    a decision block; the summary instructions only in Claude Code's plain form."""
    text = "<tma1-context>x</tma1-context>"
    claude = envelope_for(None, "claude-code")
    assert claude.context("UserPromptSubmit", text) == text
    for hook in ("PostToolUse", "PostToolUseFailure", "SessionStart"):
        assert json.loads(claude.context(hook, text))["hookSpecificOutput"]["hookEventName"] == hook
    assert json.loads(claude.stop_block("R")) == {
        "hookSpecificOutput": {"hookEventName": "Stop", "additionalContext": "R"}
    }
    http = envelope_for("json", "claude-code")
    assert json.loads(http.context("UserPromptSubmit", text))["hookSpecificOutput"]
    codex = envelope_for("codex", "codex")
    assert json.loads(codex.context("UserPromptSubmit", text)) == {
        "hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": text}
    }
    assert json.loads(codex.stop_block("R")) == {"decision": "block", "reason": "R"}
    assert codex.context("UserPromptSubmit", "") == ""
    assert claude.compact and not http.compact and not codex.compact
    # A Codex hook posted without an envelope, or an envelope tma1 does not know.
    assert not envelope_for(None, "codex").compact
    assert not envelope_for("banana", "claude-code").compact


def test_the_docs_table_of_agents_is_the_registry() -> None:
    """docs/hooks.md's table between the markers is `markdown_table()`; regenerate it with
    `python -c 'from tma1.adapters.agents import markdown_table; print(markdown_table())'`."""
    doc = HOOKS_DOC.read_text(encoding="utf-8")
    start, end = "<!-- agents:begin -->\n", "<!-- agents:end -->"
    assert start in doc and end in doc
    assert doc.split(start, 1)[1].split(end, 1)[0].strip() == markdown_table().strip()
    for name in NAMES:
        assert f"`{name}`" in markdown_table()


# --- the fifth agent --------------------------------------------------------------------


@pytest.fixture(scope="module")
def fifth_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the tma1 package with the fifth agent's module added, and only that."""
    root = tmp_path_factory.mktemp("fifth") / "site"
    pkg = Path(tma1.__file__).resolve().parent
    shutil.copytree(pkg, root / "tma1", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(FIFTH, root / "tma1" / "adapters" / "agents" / "fifth.py")
    return root


def _env(tree: Path, home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TMA1_", "FIFTH_"))}
    return {**env, "HOME": str(home), "PYTHONPATH": str(tree), **extra}


def _tma1(tree: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tma1.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tree,
    )


def _fifth(sid: str, event: str, **fields: object) -> dict[str, object]:
    return {"session_id": sid, "cwd": "/work/fifth", "hook_event_name": event, **fields}


BUILD = {"command": "go build ./..."}
BROKEN = {"status": 1, "output": "./main.go:7:2: undefined: x"}


def _failing_turn(sid: str) -> list[dict[str, object]]:
    calls = []
    for _ in range(3):
        calls.append(_fifth(sid, "before_tool", tool_name="run", tool_input=BUILD))
        calls.append(_fifth(sid, "after_tool", tool_name="run", tool_input=BUILD, result=BROKEN))
    return [_fifth(sid, "turn_start", prompt="build it"), *calls, _fifth(sid, "turn_end")]


def test_a_fifth_agent_is_installed_from_its_module_alone(fifth_tree: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = _env(fifth_tree, home, TMA1_DATA_DIR=str(tmp_path / "data"))
    helped = _tma1(fifth_tree, env, "install", "--help")
    assert "{claude-code,codex,gemini,copilot,fifth,all}" in helped.stdout.replace("\n", "")
    r = _tma1(fifth_tree, env, "install", "--adapter", "fifth")
    assert r.returncode == 0, r.stderr
    hooks = json.loads((home / ".fifth" / "hooks.json").read_text())["hooks"]
    assert set(hooks) == {"turn_start", "before_tool", "after_tool", "turn_end"}
    script = Path(hooks["turn_end"][0]["hooks"][0]["command"].strip("'"))
    assert script.name == "tma1-hook-fifth.sh"
    assert "?source=fifth&envelope=fifth" in script.read_text()
    # Uninstall removes exactly what install added.
    assert _tma1(fifth_tree, env, "uninstall", "--adapter", "fifth").returncode == 0
    assert not (home / ".fifth" / "hooks.json").exists()


def test_a_fifth_agents_payloads_become_hook_events(fifth_tree: Path, tmp_path: Path) -> None:
    code = (
        "import json, sys\n"
        "from tma1.adapters.agents import normalize\n"
        "from tma1.events import parse_payload\n"
        "for p in json.load(sys.stdin):\n"
        "    e = parse_payload(normalize(p, 'fifth'), ts=1, source='fifth')\n"
        "    print(json.dumps([e.hook_event_name, e.tool_name, e.tool_command,"
        " e.tool_success, e.agent_source, e.metadata.get('agent_event')]))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps([*_failing_turn("n1")[:3], _failing_turn("n1")[-1]]),
        env=_env(fifth_tree, tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert [json.loads(line) for line in r.stdout.splitlines()] == [
        ["UserPromptSubmit", None, None, None, "fifth", "turn_start"],
        ["PreToolUse", "Bash", "go build ./...", None, "fifth", "before_tool"],
        ["PostToolUseFailure", "Bash", "go build ./...", False, "fifth", "after_tool"],
        ["Stop", None, None, None, "fifth", "turn_end"],
    ]


@pytest.fixture
def fifth_server(fifth_tree: Path, tmp_path: Path) -> Iterator[tuple[dict[str, str], Path]]:
    """A real `tma1 serve` of the copy, with the fifth agent installed into a temp HOME."""
    port = free_port()
    env = _env(
        fifth_tree, tmp_path / "home", TMA1_DATA_DIR=str(tmp_path / "data"), TMA1_PORT=str(port)
    )
    assert _tma1(fifth_tree, env, "install", "--adapter", "fifth").returncode == 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "tma1.cli", "serve", "--port", str(port), "--no-watch"],
        env=env,
        cwd=fifth_tree,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/api/ping", timeout=1).raise_for_status()
                break
            except httpx.HTTPError:
                assert proc.poll() is None and time.monotonic() < deadline, "serve did not start"
                time.sleep(0.2)
        yield env, tmp_path / "home" / ".fifth" / "hooks.json"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


def test_a_fifth_agent_is_answered_in_its_envelope(
    fifth_server: tuple[dict[str, str], Path],
) -> None:
    """Through the real hook script `tma1 install` wrote: three failed builds, then the
    end of the turn is blocked in the fifth agent's own form."""
    env, hooks_file = fifth_server
    hooks = json.loads(hooks_file.read_text())["hooks"]
    answers = []
    for payload in _failing_turn("live-5"):
        command = hooks[payload["hook_event_name"]][0]["hooks"][0]["command"]
        r = subprocess.run(
            ["sh", "-c", command],
            input=json.dumps(payload),
            env={**env, "TMA1_HOOK_TIMEOUT": "10"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0
        answers.append(r.stdout)
    assert answers[:-1] == [""] * 7
    stop = json.loads(answers[-1])
    assert set(stop) == {"decision", "reason"} and stop["decision"] == "block"
    assert "go build" in stop["reason"]


def test_a_fifth_agents_recorded_log_replays(fifth_tree: Path, tmp_path: Path) -> None:
    log = tmp_path / "fifth-session.log"
    t0 = 1_738_576_800_000
    lines = [{"at": t0 + 10_000 * i, "fifth_event": p} for i, p in enumerate(_failing_turn("r5"))]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    r = _tma1(fifth_tree, _env(fifth_tree, tmp_path), "replay", "--json", str(log))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [i["format"] for i in out["inputs"]] == ["fifth-log"]
    (stop,) = [d for d in out["deliveries"] if d["hook_event"] == "Stop"]
    assert json.loads(stop["body"])["decision"] == "block"
    assert "go build" in json.loads(stop["body"])["reason"]


def test_replay_names_a_fifth_agents_format(fifth_tree: Path, tmp_path: Path) -> None:
    """`tma1 replay --help` and its note on a file it cannot read list the formats from
    the agents' specs: the fifth agent's is there, its title and where it comes from."""
    env = _env(fifth_tree, tmp_path)
    r = _tma1(fifth_tree, env, "replay", "--help")
    assert r.returncode == 0, r.stderr
    assert "Fifth Agent session logs (~/.fifth/sessions/*.log)" in " ".join(r.stdout.split())
    other = tmp_path / "other.jsonl"
    other.write_text('{"neither": "format"}\n')
    r = _tma1(fifth_tree, env, "replay", str(other))
    assert "format not recognised" in r.stderr
    assert "Fifth Agent session logs" in r.stderr
