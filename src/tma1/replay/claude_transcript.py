"""Claude Code transcripts (JSONL, or a JSON array of the same entries) → replay items.

What a current Claude Code would have sent its hooks, reconstructed from the transcript:

- `SessionStart` at a session's first entry;
- a user prompt → `UserPromptSubmit` (not meta entries, compaction summaries, local
  command output, or built-in local slash commands, which never reach the model);
- `tool_use` → `PreToolUse` at its line's timestamp;
- `tool_result` → `PostToolUse`, or `PostToolUseFailure` when `is_error` or the content
  starts with `Exit code N` (N ≠ 0), at its line's timestamp. Transcripts older than the
  `PostToolUseFailure` event (Claude Code < 2.0.5x) fired nothing for a failed call; we
  replay them as a current Claude Code would have run;
- validation rejections (`<tool_use_error>`, "String to replace not found", "File has
  been modified since read", …) are dropped with their `PreToolUse`: Claude Code rejects
  them before any hook runs (docs/agent-protocols.md). "File has been modified since
  read" is kept as a note: it is Claude Code's own stale-view guard firing;
- calls refused by a hook or by the user keep their `PreToolUse` (the hook ran) and have
  no `PostToolUse`;
- the end of each turn → `Stop` carrying the turn's last assistant text as
  `last_assistant_message` (none after a user interrupt: Claude Code fires no Stop then;
  none when the turn ended on an API error such as a rate limit: Claude Code sends
  `StopFailure` then, which tma1 does not install — flagged `isApiErrorMessage`, or, in
  old transcripts, a `<synthetic>` message in the error's words such as "Claude AI usage
  limit reached|<epoch>": the model is not there to continue, so no block could help);
- assistant usage → occupancy (design §2.12) through the live tailer's own parser
  (`sensors.transcripts.parse_claude_usage_lines`: prompt size = input + cache read +
  cache creation, deduplicated by `message.id`, sidechains excluded);
- compaction (a compact summary, or a `compact_boundary` system entry) → a usage row of
  kind `compaction`;
- lanes (design §2.16): a sub-agent's tool calls carry `agent_id` (and `agent_type` when
  known) in their hook payloads, as Claude Code's hooks do inside sub-agents. The agent
  is the entry's `agentId` (Claude Code ≥ 2.x, whose sub-agent transcripts live in
  `<session>/subagents/agent-<id>.jsonl`, with the type in `agent-<id>.meta.json`), else,
  for older transcripts that keep sidechains inline, the first entry of the sidechain
  (chains follow `parentUuid`; parallel sub-agents are separate chains); the type is the
  `subagent_type` of the Task call whose prompt started the sidechain.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tma1.clock import epoch_ms
from tma1.events import Usage
from tma1.replay.formats import format_of
from tma1.replay.model import Converted, Note, Records, SessionHooks, obj
from tma1.sensors.transcripts import parse_claude_usage_lines
from tma1.sensors.turn_ends import CLAUDE_INTERRUPTED, turn_end

# This converter's format (`AgentSpec.replay` names it).
FORMAT = format_of(__name__)

# Built-in commands that run locally: no UserPromptSubmit, nothing reaches the model.
_LOCAL_COMMANDS = frozenset(
    {
        "clear",
        "compact",
        "model",
        "mcp",
        "config",
        "cost",
        "help",
        "status",
        "memory",
        "permissions",
        "login",
        "logout",
        "doctor",
        "resume",
        "exit",
        "quit",
        "hooks",
        "agents",
        "ide",
        "vim",
        "terminal-setup",
        "add-dir",
        "bug",
        "release-notes",
        "export",
        "context",
        "usage",
        "upgrade",
        "statusline",
        "output-style",
        "privacy-settings",
        "rewind",
        "todos",
    }
)
# The words of Claude Code's own messages for a turn that ended on an API error, as old
# transcripts write them (a `<synthetic>` assistant message, no `isApiErrorMessage`).
_API_ERROR_TEXT = re.compile(
    r"^(?:Claude AI usage limit reached\|\d+|API Error\b|Prompt is too long\b|"
    r"Credit balance is too low\b|Invalid API key\b|.{0,40}\blimit reached\b)"
)
_COMMAND_NAME = re.compile(r"<command-name>/?([\w:-]+)</command-name>")
_EXIT_CODE = re.compile(r"^\s*(?:Exit code|Command exited with non-zero status code)\s+(-?\d+)")

# Rejected before any hook runs (validation): neither PreToolUse nor PostToolUse fires.
_VALIDATION_PREFIXES = (
    "File does not exist",
    "String to replace not found",
    "File has not been read yet",
    "File has been modified since read",
    "No changes to make",
    "InputValidationError",
    "Error: No such tool available",
)
_VALIDATION_RES = (
    re.compile(r"^Found \d+ matches of the string to replace"),
    re.compile(r"^cd to '.*' was blocked"),
    re.compile(r"^File content \(.*\) exceeds maximum allowed"),
)
# The PreToolUse hook ran (and refused), or the user refused: no PostToolUse.
_REFUSAL_MARKERS = (
    "operation blocked by hook",
    "hook error",
    "doesn't want to proceed",
    "doesn't want to take this action",
    "requested permissions to",
    "was rejected by the user",
    "[Request interrupted by user for tool use]",
)

OK, FAILURE, REJECTED, REFUSED = "ok", "failure", "rejected", "refused"


def result_text(content: Any) -> str:
    """A tool_result's content as text (a string, or text blocks joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, str):
                parts.append(block)
        return "\n".join(parts)
    return ""


def classify_result(text: str, is_error: bool) -> str:
    """ok | failure | rejected (no hook at all) | refused (PreToolUse only). Pure."""
    head = text.lstrip()[:400]
    if "<tool_use_error>" in head:
        return REJECTED
    if is_error:
        if head.startswith(_VALIDATION_PREFIXES) or any(r.match(head) for r in _VALIDATION_RES):
            return REJECTED
        if any(m in head for m in _REFUSAL_MARKERS):
            return REFUSED
        return FAILURE
    m = _EXIT_CODE.match(head)
    if m and int(m.group(1)) != 0:
        return FAILURE
    return OK


def entry_usages(entry: dict[str, Any], ts: int, sid: str, seen: set[str]) -> list[Usage]:
    """Occupancy rows of one entry via the live tailer's parser (sensors/transcripts.py),
    with the entry's (possibly re-timed) ts and session. Zero readings are dropped: they
    are client-made messages, not a context size."""
    rows = parse_claude_usage_lines(
        [{**entry, "timestamp": ts, "sessionId": sid}], session_id=sid, seen=seen
    )
    return [u for u in rows if u.occupancy > 0 or u.kind == "compaction"]


def _prompt_text(content: Any) -> str | None:
    """The text of a user prompt, or None when the entry carries tool results."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_result":
            return None
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "image":
            texts.append("[image]")
    return "\n".join(texts) if texts else None


def is_real_prompt(text: str) -> bool:
    s = text.lstrip()
    if s.startswith(("<local-command-stdout>", "<local-command-stderr>", "Caveat: The messages")):
        return False
    m = _COMMAND_NAME.search(s[:500])
    return not (m and m.group(1) in _LOCAL_COMMANDS)


@dataclass(slots=True)
class _Call:
    tool_use_id: str
    name: str
    tool_input: Any
    ts: int
    seq: int
    origin: str
    cwd: str | None
    result: tuple[int, int, str, Any, str, bool] | None = None  # ts, seq, origin, ...
    agent_id: str | None = None  # the sub-agent's lane (None: the main agent)
    agent_type: str | None = None


@dataclass(slots=True)
class _Session(SessionHooks):
    agent = "claude"
    turn_active: bool = False  # the main agent answered since the last prompt: a Stop is due
    turn_interrupted: bool = False
    last: tuple[int, int] = (0, 0)
    last_uuid: str = ""
    api_error: str | None = None  # the turn's last message is an API error (rate limit…)
    calls: dict[str, _Call] = field(default_factory=dict)  # in the order first used
    seen_messages: set[str] = field(default_factory=set)
    # Lanes: sidechain entry uuid → its agent; agent → type; Task prompt → subagent_type.
    lane_of: dict[str, str] = field(default_factory=dict)
    agent_types: dict[str, str] = field(default_factory=dict)
    task_types: dict[str, str] = field(default_factory=dict)


def _entries(records: Records, out: Converted) -> list[tuple[int, dict[str, Any], int]]:
    """Readable user/assistant/system entries as (line, entry, ts), deduplicated by uuid."""
    seen: set[str] = set()
    kept: list[tuple[int, dict[str, Any], int]] = []
    for line, rec in records.records:
        if not isinstance(rec, dict):
            out.problem(line, "not a JSON object; skipped")
            continue
        etype = rec.get("type")
        if etype not in ("user", "assistant", "system"):
            continue  # summary, file-history-snapshot and newer types carry no hook events
        uuid = rec.get("uuid")
        if isinstance(uuid, str):
            if uuid in seen:
                continue
            seen.add(uuid)
        ts = epoch_ms(rec.get("timestamp"))
        if ts is None:
            out.problem(line, f"{etype} entry without a readable timestamp; skipped")
            continue
        if not isinstance(rec.get("sessionId"), str) or not rec["sessionId"]:
            out.problem(line, f"{etype} entry without sessionId")
            continue
        kept.append((line, rec, ts))
    return kept


TASK_TOOLS = frozenset({"Task", "Agent"})


def subagent_meta_type(path: str) -> str | None:
    """`agentType` from the `agent-<id>.meta.json` Claude Code writes beside a sub-agent
    transcript (`<session>/subagents/agent-<id>.jsonl`), when there is one."""
    p = Path(path)
    if p.parent.name != "subagents" or not p.name.startswith("agent-"):
        return None
    try:
        meta = json.loads(p.with_name(p.name.removesuffix(".jsonl") + ".meta.json").read_text())
    except (OSError, ValueError):
        return None
    kind = meta.get("agentType") if isinstance(meta, dict) else None
    return kind if isinstance(kind, str) and kind else None


def entry_lane(s: _Session, e: dict[str, Any], file_type: str | None) -> tuple[str, str | None]:
    """(agent_id, agent_type) of a sidechain entry; records what later entries need."""
    uuid = e.get("uuid") if isinstance(e.get("uuid"), str) else None
    agent = e.get("agentId") if isinstance(e.get("agentId"), str) and e["agentId"] else None
    if agent is None:
        parent = e.get("parentUuid")
        agent = s.lane_of.get(parent) if isinstance(parent, str) else None
        if agent is None:
            agent = f"sidechain-{uuid}" if uuid else "sidechain"
    if uuid:
        s.lane_of[uuid] = agent
    if agent not in s.agent_types:
        kind = e.get("subagent_type") if isinstance(e.get("subagent_type"), str) else file_type
        if kind is None and e.get("type") == "user":
            prompt = _prompt_text(obj(e.get("message")).get("content"))
            kind = s.task_types.get(prompt.strip()) if prompt else None
        if kind:
            s.agent_types[agent] = kind
    return agent, s.agent_types.get(agent)


# A resumed session can carry a copy of earlier history in which every entry has the
# moment of the copy as its timestamp and the new session's id (seen in real logs: 100+
# entries within 2 ms, interleaved with the original session's real-time hook entries).
# No live conversation writes this many entries this fast.
COPY_RUN_MIN = 20
COPY_RUN_GAP_MS = 5


def copied_entries(entries: list[tuple[int, dict[str, Any], int]]) -> set[int]:
    """Indexes (into `entries`) of user/assistant entries whose timestamp is a copy's."""
    per_session: dict[str, list[tuple[int, int]]] = {}
    for i, (_, e, ts) in enumerate(entries):
        if e["type"] in ("user", "assistant"):
            per_session.setdefault(e["sessionId"], []).append((ts, i))
    marked: set[int] = set()
    for rows in per_session.values():
        rows.sort()
        start = 0
        for j in range(1, len(rows) + 1):
            if j == len(rows) or rows[j][0] - rows[j - 1][0] > COPY_RUN_GAP_MS:
                if j - start >= COPY_RUN_MIN:
                    marked.update(i for _, i in rows[start:j])
                start = j
    return marked


def retime_copies(
    entries: list[tuple[int, dict[str, Any], int]], path: str
) -> tuple[list[tuple[int, dict[str, Any], int]], list[Note]]:
    """Give copied entries the time and session of their real-time neighbours (file order):
    the next genuine entry's timestamp (a tool_use is followed by its PreToolUse hook line,
    a result by its PostToolUse line), never before the previous one, and the session of
    the previous genuine entry (else the next)."""
    marked = copied_entries(entries)
    if not marked:
        return entries, []
    n = len(entries)
    next_real: list[int | None] = [None] * n
    nxt: int | None = None
    for i in range(n - 1, -1, -1):
        next_real[i] = nxt
        if i not in marked:
            nxt = i
    out: list[tuple[int, dict[str, Any], int]] = []
    prev: int | None = None
    moved: dict[tuple[str, str], int] = {}
    for i, (line, e, ts) in enumerate(entries):
        if i not in marked:
            prev = i
            out.append((line, e, ts))
            continue
        p, q = prev, next_real[i]
        lo = entries[p][2] if p is not None else None
        hi = entries[q][2] if q is not None else None
        new_ts = (
            hi if hi is not None and (lo is None or hi >= lo) else (lo if lo is not None else ts)
        )
        ref = p if p is not None else q
        sid = entries[ref][1]["sessionId"] if ref is not None else e["sessionId"]
        moved[(e["sessionId"], sid)] = moved.get((e["sessionId"], sid), 0) + 1
        out.append((line, {**e, "sessionId": sid}, new_ts))
    notes = [
        Note(
            0,
            to,
            "retimed_copy",
            f"{count} entries of session {frm} carry one copied timestamp (history copied on "
            f"resume); re-timed from neighbouring entries and attributed to session {to}",
            path,
        )
        for (frm, to), count in moved.items()
    ]
    return out, notes


def _synthetic_error(entry: dict[str, Any], said: str | None) -> bool:
    """An assistant entry Claude Code wrote itself for an API error (old transcripts)."""
    model = obj(entry.get("message")).get("model")
    return model == "<synthetic>" and bool(said) and bool(_API_ERROR_TEXT.match(said or ""))


@dataclass(slots=True, frozen=True)
class _Entry:
    """One transcript entry, as `convert` places it: its session, where it was read (origin,
    seq) and whose it is (the main agent's, or a sub-agent's lane)."""

    line: int
    e: dict[str, Any]
    ts: int
    origin: str
    seq: int
    side: bool  # a sub-agent's (sidechain) entry
    agent: str | None
    agent_type: str | None
    content: Any

    @property
    def uuid(self) -> str:
        return str(self.e.get("uuid") or self.line)


def convert(records: Records) -> Converted:
    out = Converted.of(records, FORMAT)
    sessions: dict[str, _Session] = {}
    path = records.path
    file_type = subagent_meta_type(path)
    entries, retimed = retime_copies(_entries(records, out), path)
    out.notes.extend(retimed)
    for line, e, ts in entries:
        sid = e["sessionId"]
        s = sessions.get(sid)
        if s is None:
            s = sessions[sid] = _Session(out, sid)
        if isinstance(e.get("cwd"), str) and e["cwd"]:
            s.cwd = e["cwd"]
        side = bool(e.get("isSidechain"))
        agent, agent_type = entry_lane(s, e, file_type) if side else (None, None)
        x = _Entry(line, e, ts, f"{path}:{line}", line * 100, side, agent, agent_type,
                   obj(e.get("message")).get("content"))  # fmt: skip
        if not side:  # a sub-agent's transcript does not start it
            s.start(ts, x.seq, x.origin)
        if e["type"] == "system":
            for u in entry_usages(e, ts, sid, s.seen_messages):  # compact_boundary
                s.usage(u, ts, x.seq, x.origin, f"claude-compaction:{sid}:{u.message_id}")
        elif e["type"] == "assistant":
            if not side:
                _assistant_turn(s, x)
            _tool_uses(s, x)
        else:
            _user_entry(s, x, path)
    for s in sessions.values():
        _close_turn(s, path)
        for call in s.calls.values():
            _emit_call(s, call)
    return out


def _close_turn(s: _Session, path: str) -> None:
    # A turn that ended on an API error (a rate limit) ends with StopFailure in a current
    # Claude Code, not Stop: a hook tma1 does not install, and no answer could block it
    # (the model is not there to continue).
    if s.turn_active and not s.turn_interrupted and s.api_error is None:
        ts, seq = s.last
        s.stop(ts, seq, f"{path}:{seq // 100}", s.last_uuid)
    s.turn_active = s.turn_interrupted = False
    s.last_text = s.api_error = None


def _assistant_turn(s: _Session, x: _Entry) -> None:
    """A main-chain answer: the turn goes on (a Stop is due), its usage, its text, and
    whether it is an API error."""
    s.turn_active = True
    s.last = (x.ts, x.seq)
    s.last_uuid = x.uuid
    for u in entry_usages(x.e, x.ts, s.sid, s.seen_messages):
        s.usage(u, x.ts, x.seq + 1, x.origin, f"claude-usage:{s.sid}:{u.message_id}")
    if said := _assistant_text(x.content):
        s.last_text = said
    error = x.e.get("error") if isinstance(x.e.get("error"), str) else "unknown"
    s.api_error = error if x.e.get("isApiErrorMessage") is True else None
    if s.api_error is None and _synthetic_error(x.e, said):
        s.api_error = "synthetic"


def _tool_uses(s: _Session, x: _Entry) -> None:
    """The calls an assistant entry makes, held until their results come."""
    for i, block in enumerate(x.content if isinstance(x.content, list) else []):
        if not isinstance(block, dict) or block.get("type") != "tool_use":
            continue
        tid, name = block.get("id"), block.get("name")
        if not isinstance(tid, str) or not isinstance(name, str):
            s.out.problem(x.line, "tool_use without id or name")
            continue
        tool_input = block.get("input")
        s.calls[tid] = _Call(
            tid, name, tool_input, x.ts, x.seq + 2 + i, x.origin, s.cwd,
            agent_id=x.agent, agent_type=x.agent_type,
        )  # fmt: skip
        if name in TASK_TOOLS and isinstance(tool_input, dict):
            prompt, kind = tool_input.get("prompt"), tool_input.get("subagent_type")
            if isinstance(prompt, str) and isinstance(kind, str) and kind:
                s.task_types[prompt.strip()] = kind


def _user_entry(s: _Session, x: _Entry, path: str) -> None:
    """A user entry: a compaction summary, a prompt, an interrupt or tool results."""
    if x.e.get("isCompactSummary"):
        if not x.side:
            compaction = Usage(ts=x.ts, session_id=s.sid, occupancy=0, kind="compaction")
            s.usage(compaction, x.ts, x.seq, x.origin, f"claude-compaction:{s.sid}:{x.ts}")
        return
    prompt = _prompt_text(x.content)
    if prompt is not None:
        if x.side or x.e.get("isMeta"):
            return
        if prompt.lstrip().startswith(CLAUDE_INTERRUPTED):
            _interrupted(s, x)
        elif is_real_prompt(prompt):
            _close_turn(s, path)
            s.last = (x.ts, x.seq)
            submit = {"hook_event_name": "UserPromptSubmit", "prompt": prompt}
            s.hook(x.ts, x.seq, x.origin, submit, x.uuid)
        return
    if not x.side:
        s.last = (x.ts, x.seq)
        s.last_uuid = x.uuid
    _tool_results(s, x)


def _tool_results(s: _Session, x: _Entry) -> None:
    """The results a user entry carries, each joined to its call."""
    for i, block in enumerate(x.content if isinstance(x.content, list) else []):
        if not isinstance(block, dict) or block.get("type") != "tool_result":
            continue
        tid = block.get("tool_use_id")
        call = s.calls.get(tid) if isinstance(tid, str) else None
        if call is None:
            s.out.problem(x.line, f"tool_result for an unknown tool_use {tid!r}; skipped")
            continue
        text = result_text(block.get("content"))
        tur = x.e.get("toolUseResult")
        # A result written a few ms before its call (async writes) still follows it.
        call.result = (max(x.ts, call.ts), x.seq + 2 + i, x.origin, tur, text,
                       bool(block.get("is_error")))  # fmt: skip
        if text.lstrip().startswith(CLAUDE_INTERRUPTED) and not x.side:
            _interrupted(s, x)


def _interrupted(s: _Session, x: _Entry) -> None:
    """The user interrupted the turn: no Stop follows, and the live tailer stores each
    marker line as a turn-end row (what tells the session bundle the turn is over)."""
    key = str(x.uuid or x.ts)
    s.usage(turn_end(x.ts, s.sid, key), x.ts, x.seq, x.origin, f"claude-turn-end:{s.sid}:{key}")
    s.turn_interrupted = True


def _assistant_text(content: Any) -> str | None:
    """The text blocks of an assistant message (Claude Code's `last_assistant_message`)."""
    if isinstance(content, str):
        return content.strip() or None
    parts = [
        b["text"]
        for b in (content if isinstance(content, list) else [])
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    return "\n".join(parts).strip() or None


def _emit_call(s: _Session, call: _Call) -> None:
    pre = {
        "hook_event_name": "PreToolUse",
        "tool_name": call.name,
        "tool_input": call.tool_input if call.tool_input is not None else {},
        "tool_use_id": call.tool_use_id,
    }
    if call.cwd:
        pre["cwd"] = call.cwd
    if call.agent_id is not None:  # as Claude Code's hooks inside a sub-agent
        pre["agent_id"] = call.agent_id
        if call.agent_type is not None:
            pre["agent_type"] = call.agent_type
    if call.result is None:
        s.hook(call.ts, call.seq, call.origin, pre, call.tool_use_id)  # no result: Pre only
        return
    ts, seq, origin, tur, text, is_error = call.result
    verdict = classify_result(text, is_error)
    file_path = call.tool_input.get("file_path") if isinstance(call.tool_input, dict) else None
    if verdict == REJECTED:
        kind = (
            "modified_since_read" if "modified since read" in text[:200] else "validation_rejected"
        )
        what = f"{call.name} {file_path}" if file_path else call.name
        s.out.notes.append(Note(ts, s.sid, kind, f"{what}: {text.strip()[:160]}", origin))
        return
    s.hook(call.ts, call.seq, call.origin, pre, call.tool_use_id)
    if verdict == REFUSED:
        s.out.notes.append(Note(ts, s.sid, "refused", f"{call.name}: {text.strip()[:160]}", origin))
        return
    if verdict == FAILURE:
        post = {**pre, "hook_event_name": "PostToolUseFailure", "error": text}
    else:
        response = tur if isinstance(tur, dict) else {"stdout": text}
        post = {**pre, "hook_event_name": "PostToolUse", "tool_response": response}
    s.hook(ts, seq, origin, post, call.tool_use_id)
