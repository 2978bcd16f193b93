"""Gemini CLI chat files (`~/.gemini/tmp/<project>/chats/session-*.jsonl`) → replay items.

Gemini CLI 0.61 writes a session as JSONL: a header `{sessionId, projectHash, startTime,
kind}`, then messages `{id, timestamp, type: "user"|"gemini", content, …}` and
`{"$set": {…}}` updates; a `gemini` message is written again, same `id`, once its
`toolCalls` (`{id, name, args, result: [{functionResponse: {response: {output|error}}}],
status, timestamp}`) are done — the last copy counts. Older versions wrote one JSON object
with a `messages` list; both are read. The working directory is not recorded as such: it
is taken from the "Workspace Directories" Gemini writes into the first (context) message.

What Gemini would have sent its hooks (docs/hooks.md), with `?source=gemini`:
SessionStart; BeforeAgent for each typed prompt (a user message that is not a tool's
answer); BeforeTool / AfterTool for each tool call (`tool_response.llmContent` the
recorded output, `error` when the call failed); AfterAgent when a model turn ends without
a tool call. tma1.dialects maps those onto tma1's events, as it does live.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from tma1.clock import epoch_ms
from tma1.replay.formats import format_of
from tma1.replay.model import Converted, Records, numbered_hook, obj

# This converter's format (`AgentSpec.replay` names it).
FORMAT = format_of(__name__)

_WORKSPACE = re.compile(r"\*\*Workspace Directories:\*\*\s*\n\s*- (\S[^\n]*)")
_CONTEXT_PREFIX = "<session_context>"


def _texts(content: Any) -> tuple[str, bool]:
    """(the text of a message's content, whether it holds a tool's answer)."""
    if isinstance(content, str):
        return content, False
    parts: list[str] = []
    tool_answer = False
    for part in content if isinstance(content, list) else ():
        if isinstance(part, dict):
            if "functionResponse" in part:
                tool_answer = True
            elif isinstance(part.get("text"), str):
                parts.append(part["text"])
    return "\n".join(parts), tool_answer


def _messages(records: Records, out: Converted) -> tuple[dict[str, Any], list[tuple[int, Any]]]:
    header: dict[str, Any] = {}
    # By id, in the order first written; a rewrite replaces the value, not the position.
    latest: dict[str | int, tuple[int, Any]] = {}

    def add(line: int, msg: Any) -> None:
        if not isinstance(msg, dict) or msg.get("type") not in ("user", "gemini"):
            return
        mid = msg.get("id")
        latest[mid if isinstance(mid, str) else len(latest)] = (line, msg)  # no id: a new key

    for line, value in records.records:
        if not isinstance(value, dict):
            out.problem(line, "not a JSON object; skipped")
            continue
        if "sessionId" in value and ("projectHash" in value or "startTime" in value):
            header.update({k: v for k, v in value.items() if k != "messages"})
        update = value.get("$set")
        msgs = value.get("messages")
        if isinstance(update, dict) and isinstance(update.get("messages"), list):
            msgs = update["messages"]
        if isinstance(msgs, list):
            for msg in msgs:
                add(line, msg)
        else:
            add(line, value)
    return header, list(latest.values())


def convert(records: Records) -> Converted:
    out = Converted.of(records, FORMAT)
    header, messages = _messages(records, out)
    sid = header.get("sessionId")
    if not isinstance(sid, str) or not sid:
        out.problem(0, "no sessionId header; file skipped")
        return out
    cwd: str | None = None
    for _, msg in messages:
        text, _ = _texts(msg.get("content"))
        m = _WORKSPACE.search(text)
        if m:
            cwd = m.group(1).strip()
            break
    emit = partial(numbered_hook, out, "gemini", sid, cwd)
    start = epoch_ms(header.get("startTime"))
    if start is None and messages:
        start = epoch_ms(messages[0][1].get("timestamp"))
    emit(start, 1, {"hook_event_name": "SessionStart", "source": "startup"})
    for line, msg in messages:
        ts = epoch_ms(msg.get("timestamp"))
        text, tool_answer = _texts(msg.get("content"))
        if msg["type"] == "user":
            if not tool_answer and text and not text.startswith(_CONTEXT_PREFIX):
                emit(ts, line, {"hook_event_name": "BeforeAgent", "prompt": text})
            continue
        calls = [c for c in msg.get("toolCalls") or () if isinstance(c, dict)]
        for call in calls:
            name = call.get("name") if isinstance(call.get("name"), str) else "unknown"
            tool = {"tool_name": name, "tool_input": obj(call.get("args"))}
            emit(ts, line, {"hook_event_name": "BeforeTool", **tool})
            response: dict[str, Any] = {"llmContent": "", "returnDisplay": ""}
            for r in call.get("result") or ():
                body = obj(obj(r).get("functionResponse")).get("response")
                if isinstance(body, dict):
                    if isinstance(body.get("output"), str):
                        response["llmContent"] += body["output"]
                    if isinstance(body.get("error"), str):
                        response["error"] = {"message": body["error"]}
            if call.get("status") == "error" and "error" not in response:
                response["error"] = {"message": response["llmContent"] or "tool call failed"}
            done = epoch_ms(call.get("timestamp")) or ts
            emit(done, line, {"hook_event_name": "AfterTool", **tool, "tool_response": response})
        if not calls and text:
            emit(
                ts,
                line,
                {
                    "hook_event_name": "AfterAgent",
                    "prompt_response": text,
                    "stop_hook_active": False,
                },
            )
    return out
