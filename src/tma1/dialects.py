"""Hook payloads of Gemini CLI and GitHub Copilot CLI, put in Claude Code's shape.

tma1's event model (events.py) is Claude Code's: PreToolUse / PostToolUse /
PostToolUseFailure / UserPromptSubmit / Stop / SessionStart / SessionEnd, and the tools
Read / Edit / Write / Bash. The hook script tags each agent's events with `?source=…`;
`normalize` rewrites a Gemini or Copilot payload into that model before `parse_payload`
sees it (the agent's own event name is kept in the metadata as `agent_event`), and
`agent_event_name` gives the name an answer must carry back. Payload shapes as the real
binaries sent them: docs/hooks.md, tests/fixtures/agents/.
"""

from __future__ import annotations

import re
from typing import Any

# Gemini CLI 0.61 hook events → tma1's. PreCompress is left out on purpose: Gemini fires
# it (trigger "auto") before every model request, whether it compresses or not.
GEMINI_EVENTS = {
    "BeforeTool": "PreToolUse",
    "AfterTool": "PostToolUse",
    "BeforeAgent": "UserPromptSubmit",
    "AfterAgent": "Stop",
    "SessionStart": "SessionStart",
    "SessionEnd": "SessionEnd",
}
_GEMINI_BACK = {v: k for k, v in GEMINI_EVENTS.items()}
GEMINI_TOOLS = {
    "read_file": "Read",
    "read_many_files": "Read",
    "replace": "Edit",
    "edit": "Edit",
    "write_file": "Write",
    "run_shell_command": "Bash",
}
# Copilot CLI's own (lower-case) tool names; its Claude-format hooks already say `Bash`,
# and may say the others either way.
COPILOT_TOOLS = {
    "bash": "Bash",
    "view": "Read",
    "edit": "Edit",
    "str_replace": "Edit",
    "create": "Write",
    "write": "Write",
}

# Gemini's run_shell_command result (llmContent): "Output: …\nExit Code: 1\n…", the
# Exit Code line only when the command failed; wrapped in <untrusted_context>.
_GEMINI_EXIT = re.compile(r"^Exit Code: (-?\d+)\s*$", re.MULTILINE)
_GEMINI_OUTPUT = re.compile(
    r"^Output: (.*?)(?=^(?:Error|Exit Code|Signal|Background PIDs|Process Group PGID): |\Z)",
    re.MULTILINE | re.DOTALL,
)
# Copilot's bash result ends "<shellId: 0 completed with exit code 1>".
_COPILOT_EXIT = re.compile(r"<shellId: [^>]*?exit code (-?\d+)>")


def normalize(payload: Any, agent: str) -> Any:
    """`payload` in Claude Code's shape (a new dict; non-dicts are returned as they are)."""
    if not isinstance(payload, dict):
        return payload
    if agent == "gemini":
        return _gemini(payload)
    if agent == "copilot":
        return _copilot(payload)
    return payload


def agent_event_name(agent: str | None, hook_event_name: str) -> str:
    """The agent's own name for one of tma1's events (what an answer names)."""
    if agent == "gemini":
        return _GEMINI_BACK.get(hook_event_name, hook_event_name)
    return hook_event_name


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_text(v) for v in value)
    if isinstance(value, dict):
        return _text(value.get("text", ""))
    return ""


def _own_transcript(out: dict[str, Any]) -> None:
    """The agent's transcript is in a format tma1's transcript sensor does not read
    (Claude Code and Codex only): kept as metadata, out of the sensor's way."""
    for key in ("transcript_path", "transcriptPath"):
        if key in out:
            out["agent_transcript_path"] = out.pop(key)


def _rename_tool(out: dict[str, Any], tools: dict[str, str]) -> None:
    """The tool by tma1's name, the agent's own kept as metadata."""
    tool = out.get("tool_name")
    if isinstance(tool, str) and tool in tools:
        out["tool_name"] = tools[tool]
        out["agent_tool"] = tool


def _failed(out: dict[str, Any], error: str) -> None:
    out["hook_event_name"] = "PostToolUseFailure"
    out["error"] = error
    out.pop("tool_response", None)


# Gemini CLI hands a SessionStart hook's context to the model inside the next prompt, and
# its BeforeAgent `prompt` carries that block in front of what the user typed.
_GEMINI_HOOK_CONTEXT = re.compile(r"\A\s*<hook_context>.*?</hook_context>\s*", re.S)


def _gemini(p: dict[str, Any]) -> dict[str, Any]:
    out = dict(p)
    prompt = p.get("prompt")
    if p.get("hook_event_name") == "BeforeAgent" and isinstance(prompt, str):
        # The user's words only: the block in front is tma1's own bundle, not a prompt.
        out["prompt"] = _GEMINI_HOOK_CONTEXT.sub("", prompt, count=1)
    _own_transcript(out)
    name = p.get("hook_event_name")
    if isinstance(name, str) and name in GEMINI_EVENTS:
        out["hook_event_name"] = GEMINI_EVENTS[name]
        out["agent_event"] = name
    _rename_tool(out, GEMINI_TOOLS)
    resp = p.get("tool_response")
    if name == "AfterTool" and isinstance(resp, dict):
        content = _text(resp.get("llmContent"))
        err = resp.get("error")
        err_text = _text(err.get("message")) if isinstance(err, dict) else _text(err)
        if p.get("tool_name") == "run_shell_command":
            body = content.replace("<untrusted_context>", "").replace("</untrusted_context>", "")
            m = _GEMINI_OUTPUT.search(body)
            output = (m.group(1).rstrip("\n") if m else body.strip()).removesuffix("(empty)")
            codes = _GEMINI_EXIT.findall(body)
            code = int(codes[-1]) if codes else 0
            out["tool_response"] = {"stdout": output, "exit_code": code}
            if code != 0:
                _failed(out, f"Exit code {code}\n{output}")
        elif err_text:
            _failed(out, err_text)
        else:
            out["tool_response"] = content
    return out


def _copilot(p: dict[str, Any]) -> dict[str, Any]:
    out = dict(p)
    _own_transcript(out)
    _rename_tool(out, COPILOT_TOOLS)
    result = p.get("tool_result", p.get("tool_response"))
    if p.get("hook_event_name") in ("PostToolUse", "PostToolUseFailure") and isinstance(
        result, dict
    ):
        text = _text(result.get("text_result_for_llm", result.get("textResultForLlm", "")))
        kind = result.get("result_type", result.get("resultType"))
        hits = list(_COPILOT_EXIT.finditer(text)) if out.get("tool_name") == "Bash" else []
        m = hits[-1] if hits else None
        code = int(m.group(1)) if m else None
        output = text[: m.start()].rstrip("\n") if m else text
        out.pop("tool_result", None)
        if kind == "failure" or (code is not None and code != 0):
            _failed(out, f"Exit code {code}\n{output}" if code is not None else text)
        else:
            out["tool_response"] = {"stdout": output, "exit_code": code} if m else text
            if kind == "denied":
                out["tool_response"] = f"operation blocked by hook or user: {text}"
    return out
