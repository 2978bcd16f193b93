"""Helpers for an agent's payload dialect (`AgentSpec.normalize`): putting another agent's
hook payload into tma1's event model, which is Claude Code's (tma1.events) —
PreToolUse / PostToolUse / PostToolUseFailure / UserPromptSubmit / Stop / SessionStart /
SessionEnd, and the tools Read / Edit / Write / Bash. What the agent called things is kept
in the metadata (`agent_event`, `agent_tool`). Payload shapes as the real binaries sent
them: docs/hooks.md, tests/fixtures/agents/.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def text_of(value: Any) -> str:
    """The text of a string, a list of texts, or a `{"text": …}` part."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(text_of(v) for v in value)
    if isinstance(value, dict):
        return text_of(value.get("text", ""))
    return ""


def own_transcript(out: dict[str, Any]) -> None:
    """The agent's transcript is in a format tma1's transcript sensor does not read
    (Claude Code and Codex only): kept as metadata, out of the sensor's way."""
    for key in ("transcript_path", "transcriptPath"):
        if key in out:
            out["agent_transcript_path"] = out.pop(key)


def rename_event(out: dict[str, Any], events: Mapping[str, str]) -> None:
    """The hook event by tma1's name, the agent's own kept as metadata."""
    name = out.get("hook_event_name")
    if isinstance(name, str) and name in events:
        out["hook_event_name"] = events[name]
        out["agent_event"] = name


def rename_tool(out: dict[str, Any], tools: Mapping[str, str]) -> None:
    """The tool by tma1's name, the agent's own kept as metadata."""
    tool = out.get("tool_name")
    if isinstance(tool, str) and tool in tools:
        out["tool_name"] = tools[tool]
        out["agent_tool"] = tool


def failed(out: dict[str, Any], error: str) -> None:
    """Make the event a failed tool call with `error` (its first line `Exit code N` for a
    shell command, as Claude Code writes it)."""
    out["hook_event_name"] = "PostToolUseFailure"
    out["error"] = error
    out.pop("tool_response", None)
