"""Codex CLI: the hook script registered in `~/.codex/hooks.json` ($CODEX_HOME)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

from tma1.adapters.base import Adapter
from tma1.adapters.files import agent_dir
from tma1.adapters.hookscript import script_name, script_path
from tma1.adapters.mcp_registration import codex_registration
from tma1.adapters.registration import JsonHooksRegistration, ScriptRegistration
from tma1.config import Settings

NAME = "codex"
# The Codex events tma1 reads (docs/agent-protocols.md; Codex 0.171's hooks schema has
# these and PermissionRequest, PreModelRequest, Interrupt, which tma1 does not use).
# Codex has no failure event: a failed shell call is a PostToolUse whose exit status is
# in the rollout (design §2.18). SessionEnd ends the session's attribution slack (design
# §2.10); PreCompact/PostCompact start a context epoch (§2.17); SubagentStart/Stop frame
# sub-agent lanes (§2.16).
EVENTS = (
    "SessionStart",
    "PreToolUse",
    "PostToolUse",
    "UserPromptSubmit",
    "Stop",
    "PreCompact",
    "PostCompact",
    "SessionEnd",
    "SubagentStart",
    "SubagentStop",
)
TIMEOUT_S = 5


def hooks_path(env: Mapping[str, str] | None = None) -> Path:
    return agent_dir(env, "CODEX_HOME", ".codex") / "hooks.json"


def adapter(settings: Settings, env: Mapping[str, str] | None = None) -> Adapter:
    script = script_path(settings, NAME)
    handler = {"type": "command", "command": shlex.quote(str(script)), "timeout": TIMEOUT_S}
    return Adapter(
        name=NAME,
        title="Codex",
        registrations=[
            ScriptRegistration(path=script, settings=settings, agent=NAME),
            JsonHooksRegistration(
                path=hooks_path(env),
                events=EVENTS,
                handler=handler,
                marker=script_name(NAME),
                # Codex honours matchers only on tool events; no matcher = every tool.
                matcher=None,
                label="Codex hooks",
            ),
            codex_registration(settings, env),
        ],
        notes=[
            "Codex runs a new or changed hook only after you trust it: open /hooks in "
            "Codex once. Older Codex versions also need `[features] codex_hooks = true` "
            "in ~/.codex/config.toml.",
        ],
    )
