"""GitHub Copilot CLI: the hook script registered in `~/.copilot/settings.json`
($COPILOT_HOME), in the Claude-Code format Copilot also reads (PascalCase events, nested
matcher groups, `command`): those events then carry Claude Code's payload fields
(`hook_event_name`, `session_id`, `tool_name` "Bash"). Verified on the real binary driven
offline (`COPILOT_OFFLINE`, a BYOK provider on loopback: tests/agents/test_agent_copilot.py).
`normalize` reads the exit status out of its result text; its answers carry their context
at the top level.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tma1.adapters.base import Adapter
from tma1.adapters.dialect import failed, own_transcript, rename_tool, text_of
from tma1.adapters.files import agent_dir
from tma1.adapters.hookscript import script_name, script_path, shell_handler
from tma1.adapters.registration import JsonHooksRegistration, ScriptRegistration
from tma1.adapters.spec import AgentSpec, Envelope, ReplayFormat
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


def adapter(settings: Settings, env: Mapping[str, str] | None = None, **_: object) -> Adapter:
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


# Copilot CLI's own (lower-case) tool names; its Claude-format hooks already say `Bash`,
# and may say the others either way.
TOOLS = {
    "bash": "Bash",
    "view": "Read",
    "edit": "Edit",
    "str_replace": "Edit",
    "create": "Write",
    "write": "Write",
}
# Its bash result ends "<shellId: 0 completed with exit code 1>".
_EXIT = re.compile(r"<shellId: [^>]*?exit code (-?\d+)>")


def normalize(p: dict[str, Any]) -> dict[str, Any]:
    """A Copilot CLI (Claude-format) hook payload in tma1's shape (a new dict)."""
    out = dict(p)
    own_transcript(out)
    rename_tool(out, TOOLS)
    result = p.get("tool_result", p.get("tool_response"))
    if p.get("hook_event_name") in ("PostToolUse", "PostToolUseFailure") and isinstance(
        result, dict
    ):
        text = text_of(result.get("text_result_for_llm", result.get("textResultForLlm", "")))
        kind = result.get("result_type", result.get("resultType"))
        hits = list(_EXIT.finditer(text)) if out.get("tool_name") == "Bash" else []
        m = hits[-1] if hits else None
        code = int(m.group(1)) if m else None
        output = text[: m.start()].rstrip("\n") if m else text
        out.pop("tool_result", None)
        if kind == "failure" or (code is not None and code != 0):
            failed(out, f"Exit code {code}\n{output}" if code is not None else text)
        else:
            out["tool_response"] = {"stdout": output, "exit_code": code} if m else text
            if kind == "denied":
                out["tool_response"] = f"operation blocked by hook or user: {text}"
    return out


_EVENT_KINDS = frozenset({"session", "user", "assistant", "tool", "system", "hook", "subagent"})


def _session_events(value: dict[str, Any]) -> bool:
    """A line of `~/.copilot/session-state/<id>/events.jsonl`: `{type, data, id, …}`."""
    t = value.get("type")
    return (
        isinstance(t, str)
        and t.split(".", 1)[0] in _EVENT_KINDS
        and isinstance(value.get("data"), dict)
    )


SPEC = AgentSpec(
    name=NAME,
    title="GitHub Copilot CLI",
    executable="copilot",
    adapter=adapter,
    order=40,
    normalize=normalize,
    tools=TOOLS,
    # Copilot CLI 1.0 reads `additionalContext` at the top level of a Claude-format hook's
    # answer; it ignores it inside `hookSpecificOutput` (tried on the binary).
    envelope=Envelope(context_form="top_level", stop_form="decision"),
    replay=(
        ReplayFormat(
            "copilot-events",
            _session_events,
            "tma1.replay.copilot_events",
            order=10,
            title="Copilot CLI session logs",
            where="~/.copilot/session-state/<id>/events.jsonl",
        ),
    ),
)
