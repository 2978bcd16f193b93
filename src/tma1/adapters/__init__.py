"""Agent adapters: the hook script, and its registration with Claude Code, Codex, Gemini
CLI and GitHub Copilot CLI."""

from __future__ import annotations

from collections.abc import Mapping

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
    from collections.abc import Callable

    from tma1.adapters import claude_code, codex, copilot, gemini

    def claude(s: Settings, e: Mapping[str, str] | None) -> Adapter:
        return claude_code.adapter(s, e, transport=transport, token=token)

    builders: dict[str, Callable[[Settings, Mapping[str, str] | None], Adapter]] = {
        "claude-code": claude,
        "codex": codex.adapter,
        "gemini": gemini.adapter,
        "copilot": copilot.adapter,
    }
    if name == "all":
        out = []
        for n in ADAPTER_NAMES:
            a = builders[n](settings, env)
            if n in OPTIONAL_IN_ALL and not _config_dir_exists(a):
                continue
            out.append(a)
        return out
    if name not in builders:
        raise ValueError(f"unknown adapter {name!r}; use {', '.join(ADAPTER_NAMES)} or all")
    return [builders[name](settings, env)]


def _config_dir_exists(adapter: Adapter) -> bool:
    from tma1.adapters.registration import JsonHooksRegistration

    return any(
        r.path.parent.is_dir()
        for r in adapter.registrations
        if isinstance(r, JsonHooksRegistration)
    )
