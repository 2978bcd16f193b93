"""Register `tma1 mcp` with the agents: Claude Code's `~/.claude.json` (`mcpServers.tma1`)
and Codex's `~/.codex/config.toml` (`[mcp_servers.tma1]`).

Same rules as the hook registrations (registration.py): the change is planned first from
the file's bytes (pure), malformed files are refused untouched, a reinstall replaces our
entry in place (an identical one leaves the bytes alone), and uninstall removes exactly
what install added — giving back the user's original bytes when nothing else changed in
between. TOML is edited with tomlkit, which keeps comments and layout.
"""

from __future__ import annotations

import contextlib
import copy
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import InlineTable, Table

from tma1.adapters import jsonhooks
from tma1.adapters.files import FilePlan, agent_dir, read_bytes, refusal
from tma1.adapters.registration import InstallState
from tma1.config import DEFAULT_HOST, DEFAULT_PORT, Settings

SERVER_NAME = "tma1"
CLAUDE_KEY = "mcpServers"
CODEX_KEY = "mcp_servers"
# ~/.claude.json also holds Claude Code's history; past this size we keep no copy of it
# in install-state.json and uninstall rewrites in the file's own style instead.
MAX_ORIGINAL_BYTES = 1024 * 1024

Doc = dict[str, Any]


@dataclass(frozen=True)
class McpCommand:
    command: str
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()


def mcp_command(settings: Settings, argv0: str | None = None) -> McpCommand:
    """How an agent starts `tma1 mcp`: this installation's own `tma1`, by absolute path.

    Agents start MCP servers with their own PATH (Codex with a minimal environment), so
    a bare `tma1` might find another installation or nothing. A non-default server address
    is passed in `env` for the same reason, and a non-default data dir: the token that
    every read needs is there.
    """
    argv0 = sys.argv[0] if argv0 is None else argv0
    script = Path(argv0)
    args: tuple[str, ...]
    if script.name == "tma1" and script.is_file():
        command, args = str(script.resolve()), ("mcp",)
    else:  # `python -m tma1.cli`, tests: the interpreter of this venv (not resolved: a
        # venv's python is a symlink, and resolving it would leave the venv).
        command, args = str(Path(sys.executable).absolute()), ("-m", "tma1.cli", "mcp")
    env: list[tuple[str, str]] = []
    if settings.host != DEFAULT_HOST:
        env.append(("TMA1_HOST", settings.host))
    if settings.port != DEFAULT_PORT:
        env.append(("TMA1_PORT", str(settings.port)))
    data_dir = settings.data_dir.expanduser().absolute()
    if data_dir != (Path.home() / ".tma1").absolute():
        env.append(("TMA1_DATA_DIR", str(data_dir)))
    return McpCommand(command=command, args=args, env=tuple(env))


def claude_config_path(env: Mapping[str, str] | None = None) -> Path:
    return agent_dir(env, "CLAUDE_CONFIG_DIR", "") / ".claude.json"


def codex_config_path(env: Mapping[str, str] | None = None) -> Path:
    return agent_dir(env, "CODEX_HOME", ".codex") / "config.toml"


_decode = jsonhooks.decode_text  # one UTF-8 refusal message for both files


# --- Claude Code: JSON ------------------------------------------------------------------


# --- Codex: TOML --------------------------------------------------------------------------


def codex_entry(cmd: McpCommand) -> dict[str, Any]:
    entry: dict[str, Any] = {"command": cmd.command, "args": list(cmd.args)}
    if cmd.env:
        entry["env"] = dict(cmd.env)
    return entry


def parse_codex(path: Path, data: bytes | None) -> tomlkit.TOMLDocument:
    text = _decode(path, data)
    try:
        doc = tomlkit.parse(text)
    except TOMLKitError as exc:
        raise refusal(f"{path} is not valid TOML ({exc})") from None
    servers = doc.get(CODEX_KEY)
    if servers is not None and not isinstance(servers, Table | InlineTable):
        what = f"{CODEX_KEY} is a {type(servers).__name__}, not a table"
        raise refusal(f"{path}: {what}", "fix it")
    return doc


def _plain(value: Any) -> Any:
    unwrap = getattr(value, "unwrap", None)
    return unwrap() if callable(unwrap) else value


def codex_server(doc: tomlkit.TOMLDocument) -> Any:
    servers = doc.get(CODEX_KEY)
    return None if servers is None else servers.get(SERVER_NAME)


def add_codex_server(text: str, entry: dict[str, Any]) -> str:
    """The new text with `[mcp_servers.tma1]` = entry; the rest of the file as it was."""
    doc = tomlkit.parse(text)
    servers = doc.get(CODEX_KEY)
    current = codex_server(doc)
    if isinstance(current, Table | InlineTable):
        # Update in place: the table keeps its position and its surrounding whitespace.
        for key in [k for k in current if k not in entry]:
            del current[key]
        for key, value in entry.items():
            if _plain(current.get(key)) != value:
                current[key] = value
        return tomlkit.dumps(doc)
    if isinstance(servers, InlineTable):  # `mcp_servers = { … }`: stay inline
        inline = tomlkit.inline_table()
        inline.update(entry)
        servers[SERVER_NAME] = inline
        return tomlkit.dumps(doc)
    table = tomlkit.table()
    for key, value in entry.items():
        table.add(key, value)
    if servers is None:
        servers = tomlkit.table(is_super_table=True)  # renders as [mcp_servers.tma1] only
        doc.add(CODEX_KEY, servers)
    elif current is not None:
        del servers[SERVER_NAME]  # `tma1 = "…"`: not a table we can update; ours by name
    keys = list(doc.keys())
    if keys and keys[-1] != CODEX_KEY:
        table.add(tomlkit.nl())  # a blank line before the next table, as people write it
    servers[SERVER_NAME] = table
    return tomlkit.dumps(doc)


def remove_codex_server(text: str) -> str:
    """`[mcp_servers.tma1]` removed; `mcp_servers` too when it is left empty and was only
    implied by our header (a `[mcp_servers]` the user wrote stays)."""
    doc = tomlkit.parse(text)
    servers = doc.get(CODEX_KEY)
    if servers is None or SERVER_NAME not in servers:
        return text
    was_last = list(doc.keys())[-1:] == [CODEX_KEY] and list(servers.keys())[-1:] == [SERVER_NAME]
    del servers[SERVER_NAME]
    if len(servers) == 0 and isinstance(servers, Table) and servers.is_super_table():
        del doc[CODEX_KEY]
    out = tomlkit.dumps(doc)
    if was_last and isinstance(servers, Table) and out.endswith("\n\n"):
        # Appending a table at the end made tomlkit put a blank line before it; that line
        # was ours too.
        out = out[:-1]
    return out


# --- registrations (the protocol of registration.py) -------------------------------------


def _record_install(
    state: InstallState, path: Path, change: FilePlan, had_entry: bool, had_container: bool
) -> None:
    key = str(path)
    if key in state.files and had_entry:
        return  # a reinstall: keep what the first install found
    keep = change.before is not None and len(change.before) <= MAX_ORIGINAL_BYTES
    state.files[key] = {
        "created_file": change.before is None,
        "created_container": not had_container,
        "original": change.before.decode("utf-8") if keep and change.before else None,
    }


@dataclass
class ClaudeMcpRegistration:
    """`mcpServers.tma1` in Claude Code's `~/.claude.json` (user scope: every project)."""

    path: Path
    command: McpCommand
    label: str = "Claude Code MCP server"

    def plan_install(self, state: InstallState) -> FilePlan:
        before = read_bytes(self.path)
        doc = jsonhooks.parse_json_object(self.path, before, CLAUDE_KEY)
        self._had = (SERVER_NAME in (doc.get(CLAUDE_KEY) or {}), CLAUDE_KEY in doc)
        # An existing entry keeps its place among the user's.
        wanted = copy.deepcopy(doc)
        wanted.setdefault(CLAUDE_KEY, {})[SERVER_NAME] = {
            "type": "stdio",
            "command": self.command.command,
            "args": list(self.command.args),
            "env": dict(self.command.env),
        }
        after = jsonhooks.installed_bytes(self.path, before, doc, wanted)
        return FilePlan(self.path, before, after, self.label, mode=_mode(before), backup=True)

    def plan_uninstall(self, state: InstallState) -> FilePlan:
        before = read_bytes(self.path)
        doc = jsonhooks.parse_json_object(self.path, before, CLAUDE_KEY)
        if before is None or SERVER_NAME not in (doc.get(CLAUDE_KEY) or {}):
            return FilePlan(self.path, before, before, self.label, backup=True)
        rec = state.files.get(str(self.path), {})
        wanted = copy.deepcopy(doc)
        del wanted[CLAUDE_KEY][SERVER_NAME]
        if rec.get("created_container", True) and not wanted[CLAUDE_KEY]:
            del wanted[CLAUDE_KEY]
        after = jsonhooks.uninstalled_bytes(self.path, before, wanted, rec)
        # A file that install created and uninstall deletes needs no backup.
        return FilePlan(self.path, before, after, self.label, backup=after is not None)

    def record(self, change: FilePlan, state: InstallState, *, installing: bool) -> None:
        if installing:
            had_entry, had_container = getattr(self, "_had", (False, False))
            _record_install(state, self.path, change, had_entry, had_container)
            return
        state.files.pop(str(self.path), None)


@dataclass
class CodexMcpRegistration:
    """`[mcp_servers.tma1]` in Codex's `~/.codex/config.toml` ($CODEX_HOME)."""

    path: Path
    command: McpCommand
    label: str = "Codex MCP server"

    def plan_install(self, state: InstallState) -> FilePlan:
        self._dir_existed = self.path.parent.is_dir()
        before = read_bytes(self.path)
        doc = parse_codex(self.path, before)
        current = codex_server(doc)
        self._had = (current is not None, CODEX_KEY in doc)
        entry = codex_entry(self.command)
        if current is not None and _plain(current) == entry and before is not None:
            return FilePlan(self.path, before, before, self.label, backup=True)
        text = _decode(self.path, before)
        after = add_codex_server(text, entry).encode("utf-8")
        return FilePlan(self.path, before, after, self.label, mode=_mode(before), backup=True)

    def plan_uninstall(self, state: InstallState) -> FilePlan:
        before = read_bytes(self.path)
        doc = parse_codex(self.path, before)
        if before is None or codex_server(doc) is None:
            return FilePlan(self.path, before, before, self.label, backup=True)
        rec = state.files.get(str(self.path), {})
        text = remove_codex_server(_decode(self.path, before))
        after: bytes | None = text.encode("utf-8")
        original = rec.get("original")
        if original is not None and _same_toml(original, text):
            after = original.encode("utf-8")  # nothing else changed: the user's exact bytes
        elif rec.get("created_file") and not text.strip():
            after = None
        # A file that install created and uninstall deletes needs no backup.
        return FilePlan(self.path, before, after, self.label, backup=after is not None)

    def record(self, change: FilePlan, state: InstallState, *, installing: bool) -> None:
        if installing:
            had_entry, had_container = getattr(self, "_had", (False, False))
            _record_install(state, self.path, change, had_entry, had_container)
            if not getattr(self, "_dir_existed", True):
                state.files[str(self.path)]["created_dir"] = True
            return
        rec = state.files.pop(str(self.path), None)
        if rec and rec.get("created_dir") and change.after is None:
            with contextlib.suppress(OSError):
                self.path.parent.rmdir()  # only when empty


def _mode(before: bytes | None) -> int | None:
    # A new ~/.claude.json or config.toml may later hold credentials: private from the start.
    return 0o600 if before is None else None


def _same_toml(original: str, text: str) -> bool:
    try:
        return tomlkit.parse(original).unwrap() == tomlkit.parse(text).unwrap()
    except TOMLKitError:
        return False
