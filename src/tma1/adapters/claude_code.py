"""Claude Code: the hook script registered in `~/.claude/settings.json`."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

from tma1.adapters.base import Adapter
from tma1.adapters.files import agent_dir
from tma1.adapters.hookscript import script_name, script_path
from tma1.adapters.mcp_registration import claude_registration
from tma1.adapters.registration import JsonHooksRegistration, ScriptRegistration
from tma1.config import Settings

NAME = "claude-code"
EVENTS = (
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "UserPromptSubmit",
    "Stop",
    "SessionStart",
    "SessionEnd",
    "PreCompact",
    # Sub-agent lanes (design §2.16): the frames around a Task sub-agent's tool calls.
    "SubagentStart",
    "SubagentStop",
)
# Seconds. The script itself gives up after 0.5 s; this only bounds a wedged shell.
TIMEOUT_S = 5


def settings_path(env: Mapping[str, str] | None = None) -> Path:
    return agent_dir(env, "CLAUDE_CONFIG_DIR", ".claude") / "settings.json"


def adapter(settings: Settings, env: Mapping[str, str] | None = None) -> Adapter:
    script = script_path(settings, NAME)
    handler = {"type": "command", "command": shlex.quote(str(script)), "timeout": TIMEOUT_S}
    return Adapter(
        name=NAME,
        title="Claude Code",
        registrations=[
            ScriptRegistration(path=script, settings=settings, agent=NAME),
            JsonHooksRegistration(
                path=settings_path(env),
                events=EVENTS,
                handler=handler,
                marker=script_name(NAME),
                matcher="",
                label="Claude Code hooks",
            ),
            claude_registration(settings, env),
        ],
        notes=[
            "Claude Code picks up settings.json changes by itself; a session started "
            "before this may need /hooks or a restart to see them."
        ],
    )
