"""GitHub Copilot CLI: the hook script registered in `~/.copilot/settings.json`
($COPILOT_HOME), in the Claude-Code format Copilot also reads (PascalCase events, nested
matcher groups, `command`): those events then carry Claude Code's payload fields
(`hook_event_name`, `session_id`, `tool_name` "Bash"). Verified on the real binary driven
offline (`COPILOT_OFFLINE`, a BYOK provider on loopback: tests/agents/test_agent_copilot.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tma1.adapters.base import Adapter
from tma1.adapters.files import agent_dir
from tma1.adapters.hookscript import script_name, script_path, shell_handler
from tma1.adapters.registration import JsonHooksRegistration, ScriptRegistration
from tma1.config import Settings

NAME = "copilot"
EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "Stop",
    "SessionEnd",
)
TIMEOUT_S = 5
CANNOT_BE_TOLD = [
    "Copilot CLI marks a failed shell command as a success in its hook "
    '(result_type "success"); tma1 reads the exit code from the result text '
    '("<shellId: … exit code N>").',
    "Copilot CLI's hook events carry no tool call id.",
    "tma1 does not read this agent's transcript, so it cannot warn about context "
    "pressure (context_pressure never fires).",
]


def settings_path(env: Mapping[str, str] | None = None) -> Path:
    return agent_dir(env, "COPILOT_HOME", ".copilot") / "settings.json"


def adapter(settings: Settings, env: Mapping[str, str] | None = None) -> Adapter:
    script = script_path(settings, NAME)
    return Adapter(
        name=NAME,
        title="GitHub Copilot CLI",
        registrations=[
            ScriptRegistration(path=script, settings=settings, agent=NAME),
            JsonHooksRegistration(
                path=settings_path(env),
                events=EVENTS,
                handler=shell_handler(script, TIMEOUT_S),
                marker=script_name(NAME),
                # Copilot refuses an empty matcher ("matcher cannot be empty") and then
                # drops the whole settings file; no matcher = every tool.
                matcher=None,
                label="Copilot CLI hooks",
            ),
        ],
        notes=[
            "Copilot CLI runs hooks only in folders it trusts (`--trust-folder`, "
            "COPILOT_ALLOW_ALL=true, or its trust prompt)."
        ],
        cannot_be_told=list(CANNOT_BE_TOLD),
    )
