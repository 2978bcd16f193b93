"""Codex CLI rollouts (`~/.codex/sessions/…/rollout-*.jsonl`) → replay items.

Both formats seen in the wild:

- current: `{timestamp, type, payload}` lines — `session_meta`, `turn_context`,
  `response_item` (`function_call` / `custom_tool_call` / `local_shell_call` and their
  `*_output`, `message`), `event_msg` (`user_message`, `token_count`, `turn_aborted`,
  `task_complete`, `agent_message`, `item_completed` of an `AgentMessage`), `compacted`;
- legacy (Codex CLI ≤ 0.2x): a header `{id, timestamp, instructions, git}`, then bare
  response items and `{"record_type": "state"}` lines, with no timestamps: the items get
  a synthetic timeline from the header's time (stated in the output).

What Codex would have sent its hooks (docs/agent-protocols.md), with `?source=codex`:
`SessionStart`, `UserPromptSubmit` for each user message, `PreToolUse`/`PostToolUse` for
shell calls (tool `Bash`, `tool_input.command` the script) and `apply_patch` (tool
`apply_patch`, `tool_input.command` the patch), a string `tool_response`
`"Exit code: N\\nOutput:\\n…"` (Codex fires PostToolUse for non-zero exits too), and
`Stop` at the end of each turn that was not aborted, carrying the turn's last agent
message as `last_assistant_message` (as the live Codex Stop payload does: the handed-back
reading of a Stop needs it). `update_plan` fires no hook.
`token_count` → occupancy = `last_token_usage.input_tokens` (design §2.12), through the
live tailer's own parser (`sensors.transcripts.parse_codex_usage_lines`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tma1.clock import epoch_ms
from tma1.events import shell_script
from tma1.replay.formats import format_of
from tma1.replay.model import Converted, Records, SessionHooks, obj
from tma1.sensors.transcripts import CodexState, parse_codex_usage_lines

# This converter's format (`AgentSpec.replay` names it).
FORMAT = format_of(__name__)

LEGACY_SPACING_MS = 5_000
SHELL_NAMES = frozenset({"shell", "container.exec", "local_shell", "exec_command", "shell_command"})
NO_HOOK_TOOLS = frozenset({"update_plan"})
_PREAMBLES = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions")


def tool_call(name: str, args: Any, cwd: str | None) -> tuple[str, dict[str, Any], str | None]:
    """(hook tool_name, tool_input, cwd) for a Codex call."""
    if not isinstance(args, dict):
        args = {"input": args} if isinstance(args, str) else {}
    workdir = args.get("workdir") if isinstance(args.get("workdir"), str) else None
    cwd = workdir or cwd
    if name == "apply_patch":
        patch = args.get("input", args.get("patch", args.get("command")))
        return "apply_patch", {"command": patch if isinstance(patch, str) else ""}, cwd
    if name in SHELL_NAMES:
        command = args.get("command", args.get("cmd"))
        if isinstance(command, list) and command and command[0] == "apply_patch":
            patch = command[1] if len(command) > 1 else ""
            return "apply_patch", {"command": patch}, cwd
        script = shell_script(command)
        if (
            script is not None
            and script.lstrip().startswith("apply_patch")
            and "*** Begin Patch" in script
        ):
            return "apply_patch", {"command": script}, cwd
        return "Bash", {"command": script or ""}, cwd
    return name, args, cwd


def tool_response(output: Any) -> str:
    """A Codex tool output as the string its PostToolUse hook carries."""
    if isinstance(output, dict):
        data: Any = output
    elif isinstance(output, str):
        try:
            data = json.loads(output)
        except ValueError:
            return output
    else:
        return json.dumps(output, ensure_ascii=False) if output is not None else ""
    if isinstance(data, dict) and "output" in data:
        meta = obj(data.get("metadata"))
        code = meta.get("exit_code")
        text = data["output"] if isinstance(data["output"], str) else json.dumps(data["output"])
        if isinstance(code, int) and not isinstance(code, bool):
            return f"Exit code: {code}\nOutput:\n{text}"
        return text
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


@dataclass(slots=True)
class _Rollout(SessionHooks):
    """One rollout's session, turn and calls, and the hooks Codex would have fired."""

    agent = "codex"
    source = "codex"
    turn_open: bool = False
    turn_aborted: bool = False
    turn_stopped: bool = False
    last: tuple[int, int, str] = (0, 0, "")
    calls: dict[str, tuple[dict[str, Any], int]] = field(default_factory=dict)  # (Pre, ts)
    usage_state: CodexState = field(default_factory=CodexState)

    def prompt(self, ts: int, seq: int, origin: str, text: str) -> None:
        self.close_turn()
        self.turn_open, self.turn_aborted, self.turn_stopped = True, False, False
        self.last = (ts, seq, origin)
        self.hook(
            ts, seq, origin, {"hook_event_name": "UserPromptSubmit", "prompt": text}, str(seq)
        )

    def touch(self, ts: int, seq: int, origin: str) -> None:
        self.turn_open = True
        self.last = (ts, seq, origin)

    def close_turn(self) -> None:
        if self.turn_open and not self.turn_aborted and not self.turn_stopped:
            ts, seq, origin = self.last
            self.stop(ts, seq, origin, str(seq))
        self.turn_open = False
        self.turn_stopped = True
        self.last_text = None

    def said(self, ts: int, seq: int, origin: str, text: str | None) -> None:
        """An agent message: it moves the turn on and may be the one the Stop carries."""
        self.touch(ts, seq, origin)
        if text and text.strip():
            self.last_text = text.strip()

    def call(self, ts: int, seq: int, origin: str, call_id: str, name: str, args: Any) -> None:
        if name in NO_HOOK_TOOLS:
            return
        tool, tool_input, cwd = tool_call(name, args, self.cwd)
        payload: dict[str, Any] = {
            "hook_event_name": "PreToolUse",
            "tool_name": tool,
            "tool_input": tool_input,
            "tool_use_id": call_id,
        }
        if cwd:
            payload["cwd"] = cwd
        self.calls[call_id] = (payload, ts)
        self.touch(ts, seq, origin)
        self.hook(ts, seq, origin, payload, call_id)

    def output(self, ts: int, seq: int, origin: str, call_id: str, output: Any) -> None:
        call = self.calls.get(call_id)
        if call is None:
            return  # update_plan, or a call from before the file began
        pre, call_ts = call
        post = {**pre, "hook_event_name": "PostToolUse", "tool_response": tool_response(output)}
        self.touch(max(ts, call_ts), seq, origin)
        self.hook(max(ts, call_ts), seq, origin, post, call_id)

    def token_counts(self, seq: int, origin: str, rec: dict[str, Any]) -> None:
        """Occupancy through the live tailer's own parser (sensors/transcripts.py)."""
        for u in parse_codex_usage_lines([rec], session_id=self.sid, state=self.usage_state):
            self.usage(u, u.ts, seq, origin, f"codex-usage:{self.sid}:{u.ts}:{seq}")

    def response_item(
        self, p: dict[str, Any], ts: int, seq: int, origin: str, line: int, *, prompts: bool
    ) -> None:
        ptype = p.get("type")
        call_id = p.get("call_id") if isinstance(p.get("call_id"), str) else None
        if ptype in ("function_call", "custom_tool_call"):
            if ptype == "custom_tool_call":
                args: Any = {"input": p.get("input")}
            else:
                raw = p.get("arguments")
                try:
                    args = json.loads(raw) if isinstance(raw, str) else raw
                except ValueError:
                    args = {"input": raw}  # apply_patch sends the patch itself
            if call_id and isinstance(p.get("name"), str):
                self.call(ts, seq, origin, call_id, p["name"], args)
            else:
                self.out.problem(line, f"{ptype} without call_id or name")
        elif ptype == "local_shell_call":
            action = obj(p.get("action"))
            cid = call_id or (p.get("id") if isinstance(p.get("id"), str) else None)
            if cid:
                self.call(ts, seq, origin, cid, "local_shell", {
                    "command": action.get("command"),
                    "workdir": action.get("working_directory"),
                })  # fmt: skip
        elif ptype in (
            "function_call_output",
            "custom_tool_call_output",
            "local_shell_call_output",
        ):
            if call_id:
                self.output(ts, seq, origin, call_id, p.get("output"))
        elif ptype == "message":
            if p.get("role") == "user" and prompts:
                text = _message_text(p.get("content"))
                if text and not _is_preamble(text):
                    self.prompt(ts, seq, origin, text)
            elif p.get("role") == "assistant":
                self.said(ts, seq, origin, _message_text(p.get("content")))


def _message_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)
        ]
        return "\n".join(parts) if parts else None
    return None


def _is_preamble(text: str) -> bool:
    return text.lstrip().startswith(_PREAMBLES)


def convert(records: Records) -> Converted:
    out = Converted.of(records, FORMAT)
    current = any(
        isinstance(r, dict) and "payload" in r and "timestamp" in r for _, r in records.records
    )
    (_convert_current if current else _convert_legacy)(records, out)
    return out


def _convert_current(records: Records, out: Converted) -> None:
    path = records.path
    ro = _Rollout(out)
    has_user_events = any(
        isinstance(r, dict)
        and r.get("type") == "event_msg"
        and isinstance(r.get("payload"), dict)
        and r["payload"].get("type") == "user_message"
        for _, r in records.records
    )
    for line, rec in records.records:
        origin, seq = f"{path}:{line}", line * 100
        if not isinstance(rec, dict):
            out.problem(line, "not a JSON object; skipped")
            continue
        if rec.get("record_type") is not None:
            continue
        ts = epoch_ms(rec.get("timestamp"))
        p = rec.get("payload")
        if ts is None or not isinstance(p, dict):
            out.problem(line, "no readable timestamp or payload; skipped")
            continue
        rtype, ptype = rec.get("type"), p.get("type")
        if rtype == "session_meta":
            meta = p["meta"] if isinstance(p.get("meta"), dict) else p
            if isinstance(meta.get("id"), str):
                ro.sid = meta["id"]
            if isinstance(meta.get("cwd"), str):
                ro.cwd = meta["cwd"]
            if ro.sid:
                ro.start(ts, seq, origin)
            continue
        if not ro.sid:
            out.problem(line, "record before session_meta; skipped")
            continue
        ro.start(ts, seq, origin)
        if rtype in ("turn_context", "compacted", "event_msg"):
            ro.token_counts(seq, origin, rec)
        if rtype == "turn_context":
            if isinstance(p.get("cwd"), str):
                ro.cwd = p["cwd"]
            if isinstance(p.get("model"), str):
                ro.model = p["model"]
        elif rtype == "event_msg":
            if ptype == "user_message" and isinstance(p.get("message"), str):
                if not _is_preamble(p["message"]):
                    ro.prompt(ts, seq, origin, p["message"])
            elif ptype == "turn_aborted":
                ro.turn_aborted = True
            elif ptype == "task_complete":
                last = p.get("last_agent_message")
                ro.said(ts, seq, origin, last if isinstance(last, str) else None)
                ro.close_turn()
            elif ptype == "agent_message":
                msg = p.get("message")
                ro.said(ts, seq, origin, msg if isinstance(msg, str) else None)
            elif ptype == "item_completed" and obj(p.get("item")).get("type") == "AgentMessage":
                # Codex ≥ 0.17x: the turn's items as they complete; an agent message is the
                # Stop's `last_assistant_message` even where no `message` item follows.
                ro.said(ts, seq, origin, _message_text(obj(p.get("item")).get("content")))
        elif rtype == "response_item":
            ro.response_item(p, ts, seq, origin, line, prompts=not has_user_events)
    ro.close_turn()


def _convert_legacy(records: Records, out: Converted) -> None:
    path = records.path
    ro = _Rollout(out)
    base: int | None = None
    k = 0
    for line, rec in records.records:
        origin, seq = f"{path}:{line}", line * 100
        if not isinstance(rec, dict):
            out.problem(line, "not a JSON object; skipped")
            continue
        if "record_type" in rec:
            continue
        if base is None and "instructions" in rec and "id" in rec:
            ro.sid = str(rec["id"])
            base = epoch_ms(rec.get("timestamp"))
            if base is None:
                out.problem(line, "header without a readable timestamp")
                base = 0
            git = obj(rec.get("git"))
            if isinstance(git.get("cwd"), str):
                ro.cwd = git["cwd"]
            continue
        if base is None:
            out.problem(line, "item before the rollout header; skipped")
            continue
        k += 1
        ts = base + k * LEGACY_SPACING_MS
        ro.start(base, seq, origin)
        ro.response_item(rec, ts, seq, origin, line, prompts=True)
    ro.close_turn()
    out.synthetic_time = (
        f"legacy Codex rollout without per-item timestamps: item n is placed at the header's "
        f"time + n × {LEGACY_SPACING_MS // 1000} s"
    )
