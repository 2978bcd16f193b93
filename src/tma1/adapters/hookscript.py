"""The hook script: rendered from `hook.sh` with this install's host, port and data dir."""

from __future__ import annotations

import shlex
from importlib import resources
from pathlib import Path

from tma1.config import Settings

TEMPLATE = "hook.sh"
SCRIPTS_DIR = "hooks"

# Query string per agent: Codex payloads are tagged, and its answers need the
# `hookSpecificOutput` envelope (docs/agent-protocols.md).
QUERIES = {"claude-code": "", "codex": "?source=codex&envelope=codex"}


def script_name(agent: str) -> str:
    """The script's file name; install recognises its own settings entries by it."""
    return f"tma1-hook-{agent}.sh"


def script_path(settings: Settings, agent: str) -> Path:
    # Absolute: agents run hooks from the project's directory, not from ours.
    return settings.data_dir.expanduser().absolute() / SCRIPTS_DIR / script_name(agent)


def template_text() -> str:
    return resources.files("tma1.adapters").joinpath(TEMPLATE).read_text(encoding="utf-8")


def render_script(settings: Settings, agent: str) -> str:
    if agent not in QUERIES:
        raise ValueError(f"unknown agent {agent!r}; expected one of {', '.join(QUERIES)}")
    values = {
        "@@AGENT@@": agent,
        "@@HOST@@": shlex.quote(settings.host),
        "@@PORT@@": shlex.quote(str(settings.port)),
        "@@DATA_DIR@@": shlex.quote(str(settings.data_dir.expanduser().absolute())),
        "@@QUERY@@": QUERIES[agent],
    }
    text = template_text()
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    return text


def write_script(settings: Settings, agent: str, path: Path | None = None) -> Path:
    """Write the rendered script (0755) atomically; the demo and the tests use this."""
    from tma1.adapters.files import atomic_write

    target = path or script_path(settings, agent)
    atomic_write(target, render_script(settings, agent).encode("utf-8"), mode=0o755)
    return target
