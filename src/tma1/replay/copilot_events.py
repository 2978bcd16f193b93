"""GitHub Copilot CLI session logs (`~/.copilot/session-state/<id>/events.jsonl`) →
replay items.

Copilot CLI 1.0 writes each session as `{type, data, id, timestamp, parentId}` lines:
`session.start` (`data.sessionId`, `data.context.cwd`), `user.message` (`data.content`),
`assistant.message` (`data.content`, `data.toolRequests`), `tool.execution_start`
(`toolCallId`, `toolName`, `arguments`), `tool.execution_complete` (`success`,
`result.content`, `shellExecution.exitCode`), `session.shutdown`, and more that fire no
hook.

What Copilot would have sent tma1's (Claude-format) hooks (docs/hooks.md), with
`?source=copilot`: SessionStart; UserPromptSubmit for each user message; PreToolUse and
PostToolUse for each tool call (`tool_result: {result_type, text_result_for_llm}`); Stop
when an assistant message asks for no tool; SessionEnd at shutdown. tma1.dialects maps
them as it does live (a shell's exit status from the text's `<shellId: … exit code N>`).
"""

from __future__ import annotations

from typing import Any

from tma1.clock import epoch_ms
from tma1.replay.formats import format_of
from tma1.replay.model import Converted, Records, numbered_hook, obj

# This converter's format (`AgentSpec.replay` names it).
FORMAT = format_of(__name__)


def convert(records: Records) -> Converted:
    out = Converted.of(records, FORMAT)
    sid: str | None = None
    cwd: str | None = None
    calls: dict[str, dict[str, Any]] = {}

    def emit(ts: int | None, line: int, payload: dict[str, Any]) -> None:
        if sid is None:
            out.problem(line, "before session.start; skipped")
        else:
            numbered_hook(out, "copilot", sid, cwd, ts, line, payload)

    for line, rec in records.records:
        if not isinstance(rec, dict) or not isinstance(rec.get("data"), dict):
            out.problem(line, "not a Copilot event; skipped")
            continue
        kind, data, ts = rec.get("type"), rec["data"], epoch_ms(rec.get("timestamp"))
        if kind == "session.start":
            if isinstance(data.get("sessionId"), str):
                sid = data["sessionId"]
            ctx = data.get("context")
            if isinstance(ctx, dict) and isinstance(ctx.get("cwd"), str):
                cwd = ctx["cwd"]
            emit(ts, line, {"hook_event_name": "SessionStart", "source": "new"})
        elif kind == "user.message" and isinstance(data.get("content"), str):
            emit(ts, line, {"hook_event_name": "UserPromptSubmit", "prompt": data["content"]})
        elif kind == "tool.execution_start":
            name = data.get("toolName") if isinstance(data.get("toolName"), str) else "unknown"
            call: dict[str, Any] = {"tool_name": name, "tool_input": obj(data.get("arguments"))}
            if isinstance(data.get("toolCallId"), str):
                calls[data["toolCallId"]] = call
            emit(ts, line, {"hook_event_name": "PreToolUse", **call})
        elif kind == "tool.execution_complete":
            done = calls.pop(str(data.get("toolCallId")), None)
            if done is None:
                out.problem(line, "no tool start; skipped")
                continue
            result = obj(data.get("result"))
            text = result.get("content") if isinstance(result.get("content"), str) else ""
            error = data.get("error")
            if not text and isinstance(error, dict) and isinstance(error.get("message"), str):
                text = error["message"]
            tool_result = {
                "result_type": "success" if data.get("success") is not False else "failure",
                "text_result_for_llm": text,
            }
            emit(ts, line, {"hook_event_name": "PostToolUse", **done, "tool_result": tool_result})
        elif kind == "assistant.message" and not data.get("toolRequests"):
            emit(
                ts,
                line,
                {"hook_event_name": "Stop", "stop_reason": "end_turn", "stop_hook_active": False},
            )
        elif kind == "session.shutdown":
            emit(ts, line, {"hook_event_name": "SessionEnd", "reason": "complete"})
    return out
