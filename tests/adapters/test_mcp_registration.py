"""MCP registration in `~/.claude.json` and `~/.codex/config.toml`: the pure edits, the
registrations through `tma1 install`/`uninstall` in a temporary $HOME, and the registered
command really starting `tma1 mcp`."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from conftest import REPO, LiveServer
from mcpkit import TOOL_NAMES, event, make_project, post, with_mcp

from tma1.adapters.files import InstallError
from tma1.adapters.mcp_registration import (
    ClaudeMcpRegistration,
    CodexMcpRegistration,
    McpCommand,
    add_codex_server,
    codex_entry,
    mcp_command,
    remove_codex_server,
)
from tma1.adapters.registration import InstallState
from tma1.config import Settings

VENV_TMA1 = REPO / ".venv" / "bin" / "tma1"
CMD = McpCommand(command="/opt/tma1/bin/tma1", args=("mcp",))

# A Claude Code ~/.claude.json as Claude writes it (JSON.stringify, 2 spaces), with the
# user's own MCP server, non-ASCII text and keys after mcpServers.
CLAUDE_JSON = """{
  "numStartups": 42,
  "theme": "dark",
  "mcpServers": {
    "github": {
      "type": "stdio",
      "command": "npx",
      "args": [
        "-y",
        "@modelcontextprotocol/server-github"
      ],
      "env": {
        "GITHUB_TOKEN": "ghp_x"
      }
    }
  },
  "projects": {
    "/home/zoë/app": {
      "allowedTools": [],
      "history": [
        {
          "display": "fix the naïve parser ✓"
        }
      ]
    }
  },
  "tipsHistory": {}
}
"""

# A Codex config.toml with comments, odd spacing, a user MCP server and tables after it.
CODEX_TOML = """# Codex settings — mine, keep my comments
model = "gpt-5-codex"   # the default model
approval_policy = "on-request"

[mcp_servers.docs]
# the docs server
command = "npx"
args = ["-y", "docs-mcp"]   # pinned
env = { DOCS_TOKEN = "t" }

[profiles.fast]
model = "o4-mini"

[shell_environment_policy]
inherit = "core"
"""


def _state(tmp_path: Path) -> InstallState:
    return InstallState.load(tmp_path / "data")


def _install(reg: Any, state: InstallState) -> None:
    change = reg.plan_install(state)
    change.apply()
    reg.record(change, state, installing=True)


def _uninstall(reg: Any, state: InstallState) -> None:
    change = reg.plan_uninstall(state)
    change.apply()
    reg.record(change, state, installing=False)


# --- pure TOML edits ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        CODEX_TOML,
        "",
        'model = "o3"\n',
        "# only a comment\n",
        "[mcp_servers]\n\n[profiles.a]\nx = 1\n",
        'mcp_servers = { docs = { command = "d" } }\n',
        '[mcp_servers.a]\ncommand = "a"\n\n[mcp_servers.b]\ncommand = "b"\n',
    ],
)
def test_toml_add_then_remove_is_byte_identical_without_any_state(text: str) -> None:
    entry = codex_entry(CMD)
    added = add_codex_server(text, entry)
    assert tomllib.loads(added)["mcp_servers"]["tma1"] == entry
    assert add_codex_server(added, entry) == added  # idempotent
    if text:
        before = tomllib.loads(text)
        after = tomllib.loads(added)
        after["mcp_servers"].pop("tma1")
        if not after["mcp_servers"] and "mcp_servers" not in before:
            after.pop("mcp_servers")
        assert after == before  # nothing of the user's changed
    assert remove_codex_server(added) == text


def test_toml_reinstall_updates_our_table_in_place() -> None:
    first = add_codex_server(CODEX_TOML, codex_entry(CMD))
    moved = McpCommand(command="/new/venv/bin/tma1", args=("mcp",), env=(("TMA1_PORT", "9"),))
    second = add_codex_server(first, codex_entry(moved))
    assert second.index("[mcp_servers.tma1]") == first.index("[mcp_servers.tma1]")
    assert tomllib.loads(second)["mcp_servers"]["tma1"] == {
        "command": "/new/venv/bin/tma1",
        "args": ["mcp"],
        "env": {"TMA1_PORT": "9"},
    }
    assert "# the docs server" in second and "# pinned" in second
    assert remove_codex_server(second) == CODEX_TOML


# --- registrations on files -------------------------------------------------------------


@pytest.mark.parametrize("with_state", [True, False], ids=["state", "no-state"])
def test_codex_install_uninstall_round_trip(tmp_path: Path, with_state: bool) -> None:
    path = tmp_path / ".codex" / "config.toml"
    path.parent.mkdir()
    path.write_text(CODEX_TOML, encoding="utf-8")
    os.chmod(path, 0o640)
    reg = CodexMcpRegistration(path=path, command=CMD)
    state = _state(tmp_path)
    _install(reg, state)
    installed = path.read_bytes()
    doc = tomllib.loads(installed.decode())
    assert doc["mcp_servers"]["tma1"] == {"command": CMD.command, "args": ["mcp"]}
    assert doc["mcp_servers"]["docs"]["env"] == {"DOCS_TOKEN": "t"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # the user's mode is kept

    again = reg.plan_install(state)
    assert not again.changed  # install twice = install once

    _uninstall(reg, state if with_state else _state(tmp_path / "elsewhere"))
    assert path.read_bytes() == CODEX_TOML.encode()


@pytest.mark.parametrize("with_state", [True, False], ids=["state", "no-state"])
def test_claude_install_uninstall_round_trip(tmp_path: Path, with_state: bool) -> None:
    path = tmp_path / ".claude.json"
    path.write_text(CLAUDE_JSON, encoding="utf-8")
    reg = ClaudeMcpRegistration(path=path, command=CMD)
    state = _state(tmp_path)
    _install(reg, state)
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["mcpServers"]["tma1"] == {
        "type": "stdio",
        "command": CMD.command,
        "args": ["mcp"],
        "env": {},
    }
    assert list(doc["mcpServers"]) == ["github", "tma1"]
    assert list(doc) == ["numStartups", "theme", "mcpServers", "projects", "tipsHistory"]
    assert not reg.plan_install(state).changed
    _uninstall(reg, state if with_state else _state(tmp_path / "elsewhere"))
    assert path.read_bytes() == CLAUDE_JSON.encode()


def test_uninstall_keeps_what_the_user_changed_after_install(tmp_path: Path) -> None:
    claude = tmp_path / ".claude.json"
    claude.write_text(CLAUDE_JSON, encoding="utf-8")
    codex = tmp_path / "config.toml"
    codex.write_text(CODEX_TOML, encoding="utf-8")
    state = _state(tmp_path)
    regs = [ClaudeMcpRegistration(claude, CMD), CodexMcpRegistration(codex, CMD)]
    for reg in regs:
        _install(reg, state)
    doc = json.loads(claude.read_text(encoding="utf-8"))
    doc["numStartups"] = 43  # Claude Code rewrites this file all the time
    claude.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    codex.write_text(codex.read_text().replace('"o4-mini"', '"o3"  # faster'), encoding="utf-8")
    for reg in regs:
        _uninstall(reg, state)
    assert claude.read_text(encoding="utf-8") == CLAUDE_JSON.replace(
        '"numStartups": 42', '"numStartups": 43'
    )
    assert codex.read_text() == CODEX_TOML.replace('"o4-mini"', '"o3"  # faster')


def test_absent_files_are_created_private_and_removed_again(tmp_path: Path) -> None:
    claude = tmp_path / ".claude.json"
    codex = tmp_path / ".codex" / "config.toml"
    state = _state(tmp_path)
    regs = [ClaudeMcpRegistration(claude, CMD), CodexMcpRegistration(codex, CMD)]
    for reg in regs:
        _install(reg, state)
    assert json.loads(claude.read_text())["mcpServers"]["tma1"]["command"] == CMD.command
    assert tomllib.loads(codex.read_text())["mcp_servers"]["tma1"]["args"] == ["mcp"]
    assert stat.S_IMODE(claude.stat().st_mode) == 0o600
    assert stat.S_IMODE(codex.stat().st_mode) == 0o600
    for reg in regs:
        _uninstall(reg, state)
    assert not claude.exists() and not codex.exists()
    assert not codex.parent.exists()  # install created ~/.codex, so uninstall removes it


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        (".claude.json", '{"mcpServers": {'),
        (".claude.json", "[1, 2]"),
        (".claude.json", '{"mcpServers": ["github"]}'),
        (".claude.json", b'{"a": "\xff"}'),
        ("config.toml", 'model = "o3\n'),
        ("config.toml", "[a]\nx = 1\n[a]\nx = 2\n"),
        ("config.toml", "mcp_servers = 3\n"),
    ],
)
def test_malformed_files_are_refused_and_left_untouched(
    tmp_path: Path, name: str, bad: str | bytes
) -> None:
    path = tmp_path / name
    data = bad if isinstance(bad, bytes) else bad.encode()
    path.write_bytes(data)
    cls = ClaudeMcpRegistration if name.endswith(".json") else CodexMcpRegistration
    reg = cls(path=path, command=CMD)
    with pytest.raises(InstallError) as err:
        reg.plan_install(_state(tmp_path))
    assert str(path) in str(err.value) and "Nothing was changed" in str(err.value)
    with pytest.raises(InstallError):
        reg.plan_uninstall(_state(tmp_path))
    assert path.read_bytes() == data


def test_command_is_this_installation_by_absolute_path(tmp_path: Path) -> None:
    fake = tmp_path / "venv" / "bin" / "tma1"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\n")
    cmd = mcp_command(Settings(), argv0=str(fake))
    assert cmd == McpCommand(command=str(fake.resolve()), args=("mcp",), env=())
    # Not started through the console script (python -m tma1.cli): this interpreter.
    cmd = mcp_command(Settings(host="::1", port=15000), argv0="/x/tma1/cli.py")
    assert cmd.command == str(Path(sys.executable).absolute())
    assert cmd.args == ("-m", "tma1.cli", "mcp")
    assert dict(cmd.env) == {"TMA1_HOST": "::1", "TMA1_PORT": "15000"}


# --- through the CLI, and the registered command really serving -----------------------------


def _tma1(
    home: Path, *args: str, port: int | None = None, data_dir: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TMA1_", "CLAUDE_", "CODEX_"))}
    env["HOME"] = str(home)
    if port is not None:
        env["TMA1_PORT"] = str(port)
    if data_dir is not None:
        env["TMA1_DATA_DIR"] = str(data_dir)
    # The console script, as a user runs it: the registration must name it.
    return subprocess.run(
        [str(VENV_TMA1), *args], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.skipif(not VENV_TMA1.exists(), reason="no console script in .venv")
def test_cli_install_registers_a_working_server_and_uninstall_round_trips(
    live: LiveServer, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    (home / ".claude").mkdir()  # both agents are on this machine: `all` takes them
    (home / ".claude.json").write_text(CLAUDE_JSON, encoding="utf-8")
    (home / ".codex" / "config.toml").write_text(CODEX_TOML, encoding="utf-8")
    # the live server's data dir: the registered server reads its token there
    data_dir = live.settings.data_dir
    r = _tma1(home, "install", "--adapter", "all", port=live.port, data_dir=data_dir)
    assert r.returncode == 0, r.stderr
    claude = json.loads((home / ".claude.json").read_text(encoding="utf-8"))["mcpServers"]["tma1"]
    codex = tomlkit.parse((home / ".codex" / "config.toml").read_text()).unwrap()
    codex = codex["mcp_servers"]["tma1"]
    assert claude["command"] == codex["command"] == str(VENV_TMA1.resolve())
    assert claude["args"] == codex["args"] == ["mcp"]
    # The live server is on a non-default port: the agents must be told, in env.
    assert claude["env"] == codex["env"] == {
        "TMA1_PORT": str(live.port),
        "TMA1_DATA_DIR": str(data_dir.absolute()),
    }

    proj = make_project(tmp_path / "proj")
    post(live, event("reg-1", proj, "SessionStart", source="startup"))
    for entry in (claude, codex):

        async def body(s: Any) -> tuple[set[str], Any]:
            tools = {t.name for t in (await s.list_tools()).tools}
            return tools, await s.call_tool("get_session_state", {})

        tools, state = with_mcp(
            proj, entry["env"], body, command=entry["command"], args=tuple(entry["args"])
        )
        assert tools == TOOL_NAMES
        assert not state.is_error and state.structured_content["session_id"] == "reg-1"

    r = _tma1(home, "uninstall", "--adapter", "all")
    assert r.returncode == 0, r.stderr
    assert (home / ".claude.json").read_text(encoding="utf-8") == CLAUDE_JSON
    assert (home / ".codex" / "config.toml").read_text() == CODEX_TOML
