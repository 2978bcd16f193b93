"""Agent adapters: the hook script, and its registration with Claude Code and Codex."""

from __future__ import annotations

from collections.abc import Mapping

from tma1.adapters.base import Adapter
from tma1.config import Settings

ADAPTER_NAMES = ("claude-code", "codex")


def get_adapters(
    name: str,
    settings: Settings,
    env: Mapping[str, str] | None = None,
    *,
    transport: str = "command",
    token: str | None = None,
) -> list[Adapter]:
    """`claude-code`, `codex` or `all`. `transport` applies to Claude Code (Codex has
    command hooks only)."""
    from collections.abc import Callable

    from tma1.adapters import claude_code, codex

    def claude(s: Settings, e: Mapping[str, str] | None) -> Adapter:
        return claude_code.adapter(s, e, transport=transport, token=token)

    builders: dict[str, Callable[[Settings, Mapping[str, str] | None], Adapter]] = {
        "claude-code": claude,
        "codex": codex.adapter,
    }
    if name == "all":
        return [builders[n](settings, env) for n in ADAPTER_NAMES]
    if name not in builders:
        raise ValueError(f"unknown adapter {name!r}; use claude-code, codex or all")
    return [builders[name](settings, env)]
