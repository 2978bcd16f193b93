"""Agent adapters: the hook script, and its registration with Claude Code, Codex, Gemini
CLI and GitHub Copilot CLI."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path

from tma1.adapters.base import Adapter
from tma1.config import Settings

ADAPTER_NAMES = ("claude-code", "codex", "gemini", "copilot")
# The command each agent is run as. `all` takes an agent only where it is found on this
# machine (its config directory, or this command on PATH): installing must not create
# ~/.codex or ~/.gemini for an agent nobody uses (doctor would then fail on it forever).
EXECUTABLES = {"claude-code": "claude", "codex": "codex", "gemini": "gemini", "copilot": "copilot"}


def get_adapters(
    name: str,
    settings: Settings,
    env: Mapping[str, str] | None = None,
    *,
    transport: str = "command",
    token: str | None = None,
) -> list[Adapter]:
    """`claude-code`, `codex`, `gemini`, `copilot` or `all`. `transport` applies to Claude
    Code (the others have command hooks only)."""
    from tma1.adapters import claude_code, codex, copilot, gemini

    builders: dict[str, Callable[..., Adapter]] = {
        "claude-code": partial(claude_code.adapter, transport=transport, token=token),
        "codex": codex.adapter,
        "gemini": gemini.adapter,
        "copilot": copilot.adapter,
    }
    if name == "every":
        return [builders[n](settings, env) for n in ADAPTER_NAMES]
    if name == "all":
        return [
            a for n in ADAPTER_NAMES if found_on_machine(a := builders[n](settings, env), env)
        ]
    return [builders[name](settings, env)]


def found_on_machine(
    adapter: Adapter, env: Mapping[str, str] | None = None, *, besides_ours: bool = False
) -> str | None:
    """Why the agent looks installed here (its command on PATH, or its config directory),
    or None. `besides_ours`: a config directory that holds only what `tma1 install` put
    there (an older `install --adapter all` made it) does not count."""
    env = os.environ if env is None else env
    exe = EXECUTABLES[adapter.name]
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
