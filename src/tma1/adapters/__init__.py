"""Agent adapters: the hook script, and its registration with each agent tma1 knows (one
module each in `tma1.adapters.agents`, its `AgentSpec`)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from tma1.adapters.base import Adapter
from tma1.config import Settings


def get_adapters(
    name: str,
    settings: Settings,
    env: Mapping[str, str] | None = None,
    *,
    transport: str = "command",
    token: str | None = None,
) -> list[Adapter]:
    """An agent's name, `all` (those found on this machine) or `every`. `transport` applies
    to the agents that have one besides the command hook (Claude Code)."""
    from tma1.adapters.agents import NAMES, SPECS

    def build(n: str) -> Adapter:
        return SPECS[n].adapter(settings, env, transport=transport, token=token)

    if name == "every":
        return [build(n) for n in NAMES]
    if name == "all":
        return [a for n in NAMES if found_on_machine(a := build(n), env)]
    return [build(name)]


def executable(agent: str) -> str:
    """The command the agent is run as. `all` takes an agent only where it is found on this
    machine (its config directory, or this command on PATH): installing must not create
    ~/.codex or ~/.gemini for an agent nobody uses (doctor would then fail on it forever)."""
    from tma1.adapters.agents import SPECS

    return SPECS[agent].executable


def found_on_machine(
    adapter: Adapter, env: Mapping[str, str] | None = None, *, besides_ours: bool = False
) -> str | None:
    """Why the agent looks installed here (its command on PATH, or its config directory),
    or None. `besides_ours`: a config directory that holds only what `tma1 install` put
    there (an older `install --adapter all` made it) does not count."""
    env = os.environ if env is None else env
    exe = executable(adapter.name)
    if shutil.which(exe, path=env.get("PATH")):
        return f"`{exe}` on PATH"
    config_dir = adapter.hooks.path.parent
    if not config_dir.is_dir():
        return None
    if besides_ours:
        ours = {Path(p).name for r in adapter.registrations if (p := getattr(r, "path", None))}
        ours |= {f"{n}.tma1-backup" for n in ours}
        if all(entry.name in ours for entry in config_dir.iterdir()):
            return None
    return str(config_dir)
