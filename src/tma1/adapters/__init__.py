"""Agent adapters: the hook script, and its registration with Claude Code, Codex, Gemini
CLI and GitHub Copilot CLI."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial

from tma1.adapters.base import Adapter
from tma1.config import Settings

ADAPTER_NAMES = ("claude-code", "codex", "gemini", "copilot")
# `all` takes these only where the agent's config directory exists already (the agent has
# run here): installing must not create ~/.gemini or ~/.copilot for an agent nobody uses.
OPTIONAL_IN_ALL = ("gemini", "copilot")


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
    if name == "all":
        adapters = [builders[n](settings, env) for n in ADAPTER_NAMES]
        return [
            a for a in adapters if a.name not in OPTIONAL_IN_ALL or a.hooks.path.parent.is_dir()
        ]
    return [builders[name](settings, env)]
