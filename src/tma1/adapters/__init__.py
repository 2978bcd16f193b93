"""Agent adapters: the hook script, and its registration with Claude Code and Codex."""

from __future__ import annotations

from collections.abc import Mapping

from tma1.adapters.base import Adapter
from tma1.config import Settings

ADAPTER_NAMES = ("claude-code", "codex")


def get_adapters(
    name: str, settings: Settings, env: Mapping[str, str] | None = None
) -> list[Adapter]:
    """`claude-code`, `codex` or `all`."""
    from tma1.adapters import claude_code, codex

    builders = {"claude-code": claude_code.adapter, "codex": codex.adapter}
    if name == "all":
        return [builders[n](settings, env) for n in ADAPTER_NAMES]
    if name not in builders:
        raise ValueError(f"unknown adapter {name!r}; use claude-code, codex or all")
    return [builders[name](settings, env)]
