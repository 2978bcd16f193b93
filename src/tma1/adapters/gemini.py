"""Gemini CLI: the hook script registered in `~/.gemini/settings.json` ($GEMINI_CLI_HOME).

Gemini's hooks file has Claude Code's shape (`{"hooks": {Event: [{matcher, hooks}]}}`)
under its own event names; tma1 normalises them (tma1.dialects). Verified on the real
binary (tests/agents/test_agent_gemini.py); docs/hooks.md has what each event carries.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tma1.adapters.base import Adapter
from tma1.adapters.files import agent_dir
from tma1.adapters.hookscript import script_name, script_path, shell_handler
from tma1.adapters.registration import JsonHooksRegistration, ScriptRegistration
from tma1.config import Settings

NAME = "gemini"
# PreCompress is not registered: Gemini 0.61 fires it before every model request.
EVENTS = ("SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "AfterAgent", "SessionEnd")
# Milliseconds (Gemini's unit). The script gives up after 0.5 s.
TIMEOUT_MS = 5000
# Keys under "hooks" that are Gemini settings, not events.
CONFIG_KEYS = frozenset({"enabled", "disabled", "notifications"})
CANNOT_BE_TOLD = [
    "Gemini CLI shows hook context to the model with < and > escaped "
    "(&lt;tma1-context&gt;): the digest arrives, its tags as entities.",
    "Gemini CLI runs hooks only in a trusted folder (or with --skip-trust); in an "
    "untrusted one it sends tma1 nothing.",
    "Gemini CLI's hook events carry no tool call id.",
    "tma1 does not read this agent's transcript, so it cannot warn about context "
    "pressure (context_pressure never fires).",
]


def settings_path(env: Mapping[str, str] | None = None) -> Path:
    # $GEMINI_CLI_HOME stands in for the home directory: the config is in its `.gemini`.
    return agent_dir(env, "GEMINI_CLI_HOME", "") / ".gemini" / "settings.json"


def adapter(settings: Settings, env: Mapping[str, str] | None = None) -> Adapter:
    script = script_path(settings, NAME)
    return Adapter(
        name=NAME,
        title="Gemini CLI",
        registrations=[
            ScriptRegistration(path=script, settings=settings, agent=NAME),
            JsonHooksRegistration(
                path=settings_path(env),
                events=EVENTS,
                handler=shell_handler(script, TIMEOUT_MS, name="tma1"),
                marker=script_name(NAME),
                matcher="*",
                label="Gemini CLI hooks",
                config_keys=CONFIG_KEYS,
            ),
        ],
        notes=[
            "Gemini CLI runs hooks only in folders it trusts (or with --skip-trust); "
            "a session started before this needs a restart to see them."
        ],
        cannot_be_told=list(CANNOT_BE_TOLD),
    )
