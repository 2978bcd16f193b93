"""Gemini CLI: the hook script registered in `~/.gemini/settings.json` ($GEMINI_CLI_HOME).

Gemini's hooks file has Claude Code's shape (`{"hooks": {Event: [{matcher, hooks}]}}`)
under its own event names and tool names, which `normalize` puts into tma1's; its answers
name its own events. Verified on the real binary (tests/agents/test_agent_gemini.py);
docs/hooks.md has what each event carries.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tma1.adapters.base import Adapter
from tma1.adapters.dialect import failed, own_transcript, rename_event, rename_tool, text_of
from tma1.adapters.files import agent_dir
from tma1.adapters.hookscript import script_name, script_path, shell_handler
from tma1.adapters.registration import JsonHooksRegistration, ScriptRegistration
from tma1.adapters.spec import AgentSpec, Envelope, ReplayFormat
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


def adapter(settings: Settings, env: Mapping[str, str] | None = None, **_: object) -> Adapter:
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


# Gemini CLI 0.61 hook events → tma1's. PreCompress is left out on purpose: Gemini fires
# it (trigger "auto") before every model request, whether it compresses or not.
EVENT_NAMES = {
    "BeforeTool": "PreToolUse",
    "AfterTool": "PostToolUse",
    "BeforeAgent": "UserPromptSubmit",
    "AfterAgent": "Stop",
    "SessionStart": "SessionStart",
    "SessionEnd": "SessionEnd",
}
TOOLS = {
    "read_file": "Read",
    "read_many_files": "Read",
    "replace": "Edit",
    "edit": "Edit",
    "write_file": "Write",
    "run_shell_command": "Bash",
}

# Its run_shell_command result (llmContent): "Output: …\nExit Code: 1\n…", the Exit Code
# line only when the command failed; wrapped in <untrusted_context>.
_EXIT = re.compile(r"^Exit Code: (-?\d+)\s*$", re.MULTILINE)
_OUTPUT = re.compile(
    r"^Output: (.*?)(?=^(?:Error|Exit Code|Signal|Background PIDs|Process Group PGID): |\Z)",
    re.MULTILINE | re.DOTALL,
)
# Gemini CLI hands a SessionStart hook's context to the model inside the next prompt, and
# its BeforeAgent `prompt` carries that block in front of what the user typed.
_HOOK_CONTEXT = re.compile(r"\A\s*<hook_context>.*?</hook_context>\s*", re.S)


def normalize(p: dict[str, Any]) -> dict[str, Any]:
    """A Gemini CLI hook payload in tma1's shape (a new dict)."""
    out = dict(p)
    prompt = p.get("prompt")
    if p.get("hook_event_name") == "BeforeAgent" and isinstance(prompt, str):
        # The user's words only: the block in front is tma1's own bundle, not a prompt.
        out["prompt"] = _HOOK_CONTEXT.sub("", prompt, count=1)
    own_transcript(out)
    rename_event(out, EVENT_NAMES)
    rename_tool(out, TOOLS)
    resp = p.get("tool_response")
    if p.get("hook_event_name") == "AfterTool" and isinstance(resp, dict):
        content = text_of(resp.get("llmContent"))
        err = resp.get("error")
        err_text = text_of(err.get("message")) if isinstance(err, dict) else text_of(err)
        if p.get("tool_name") == "run_shell_command":
            body = content.replace("<untrusted_context>", "").replace("</untrusted_context>", "")
            m = _OUTPUT.search(body)
            output = (m.group(1).rstrip("\n") if m else body.strip()).removesuffix("(empty)")
            codes = _EXIT.findall(body)
            code = int(codes[-1]) if codes else 0
            out["tool_response"] = {"stdout": output, "exit_code": code}
            if code != 0:
                failed(out, f"Exit code {code}\n{output}")
        elif err_text:
            failed(out, err_text)
        else:
            out["tool_response"] = content
    return out


def _chat(value: dict[str, Any]) -> bool:
    """A chat file's header (`sessionId`, `projectHash`), a message, or a `$set` update."""
    t = value.get("type")
    return "$set" in value or t == "gemini" or ("projectHash" in value and "sessionId" in value)


SPEC = AgentSpec(
    name=NAME,
    title="Gemini CLI",
    executable="gemini",
    adapter=adapter,
    order=30,
    normalize=normalize,
    events=EVENT_NAMES,
    tools=TOOLS,
    # Its answers name its own events (BeforeAgent, AfterTool).
    envelope=Envelope(
        context_form="hook_specific",
        stop_form="decision",
        event_names={tma1: own for own, tma1 in EVENT_NAMES.items()},
    ),
    replay=(
        ReplayFormat(
            "gemini-chat",
            _chat,
            "tma1.replay.gemini_chat",
            order=20,
            title="Gemini CLI chat files",
            where="~/.gemini/tmp/<project>/chats/session-*.jsonl",
        ),
    ),
)
