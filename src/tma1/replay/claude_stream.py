"""Claude Code stream-json output → replay items.

`claude -p --output-format stream-json --verbose` prints one JSON object a line: a
`system` `init` entry (`session_id`, `cwd`, `model`, tools) at the start of each turn,
the conversation's `assistant` and `user` entries in the Messages API shape, sub-agent
entries marked with `parent_tool_use_id` (and, in current versions, `agent_id`), other
`system` subtypes (task progress, …), and a `result` entry at the end. The session id is
`session_id`, not the transcript's `sessionId`, and the user's prompt is not printed.

The entries are the transcript's entries under other names, so they are renamed and
handed to the transcript converter (`claude_transcript.convert`): the same hooks, usage,
refusals, lanes and Stop at the end of each turn. Added here: a `UserPromptSubmit` at the
session's first `init` (the prompt `claude -p` was given is not in the output; its text is
unknown).

Time: Claude Code ≤ 2.0 printed no timestamps at all, and even current versions print
none on `system` and `result` entries. Entries without one get a synthetic time: the
previous entry's time (+1 ms each), or, when the output has no timestamp at all, a
timeline from 2025-01-01T00:00:00Z with `SPACING_MS` between entries in file order. The
output says so (`Converted.synthetic_time`), as for hook logs.
"""

from __future__ import annotations

from typing import Any

from tma1.clock import epoch_ms
from tma1.replay import claude_transcript
from tma1.replay.claude_hooklog import BASE_MS, SPACING_MS
from tma1.replay.formats import format_of
from tma1.replay.model import Converted, Records, obj

# This converter's format (`AgentSpec.replay` names it).
FORMAT = format_of(__name__)

UNKNOWN_PROMPT = "[the prompt given to claude -p; stream-json does not print it]"
_CONVERSATION = frozenset({"assistant", "user"})


def _transcript_entry(
    rec: dict[str, Any], sid: str, cwd: str | None, ts: int, line: int
) -> dict[str, Any]:
    """A stream-json conversation entry under the transcript's names."""
    parent_tool = rec.get("parent_tool_use_id")
    agent = rec.get("agent_id")
    entry: dict[str, Any] = {
        "type": rec["type"],
        "message": rec.get("message"),
        "uuid": rec.get("uuid") if isinstance(rec.get("uuid"), str) else f"stream-json:{line}",
        "sessionId": sid,
        "timestamp": ts,
        "isSidechain": isinstance(parent_tool, str) and bool(parent_tool),
    }
    if cwd:
        entry["cwd"] = cwd
    if entry["isSidechain"]:
        # Current versions name the sub-agent; older ones only the Task call it runs under
        # (one lane per Task call either way).
        entry["agentId"] = agent if isinstance(agent, str) and agent else f"task-{parent_tool}"
        if isinstance(rec.get("subagent_type"), str):
            entry["subagent_type"] = rec["subagent_type"]
    if "tool_use_result" in rec:
        entry["toolUseResult"] = rec["tool_use_result"]
    for flag in ("isMeta", "isCompactSummary"):  # as in a transcript, when printed
        if rec.get(flag) is True:
            entry[flag] = True
    return entry


def convert(records: Records) -> Converted:
    path = records.path
    # The entries under the transcript's names, for claude_transcript.convert; the reader's
    # problems and ours come before the transcript converter's.
    staged = Records(path, problems=list(records.problems))
    stamped = [
        epoch_ms(rec.get("timestamp"))
        for _, rec in records.records
        if isinstance(rec, dict) and rec.get("type") in _CONVERSATION
    ]
    first_ts = next((t for t in stamped if t is not None), None)
    cwd: dict[str, str] = {}
    prompted: set[str] = set()
    task_types: dict[str, str] = {}  # Task tool_use id → subagent_type
    last_ts: int | None = None
    for n, (line, rec) in enumerate(records.records):
        if not isinstance(rec, dict):
            staged.problem(line, "not a JSON object; skipped")
            continue
        sid = rec.get("session_id")
        etype = rec.get("type")
        if not isinstance(sid, str) or not sid:
            if etype in _CONVERSATION:
                staged.problem(line, f"{etype} entry without session_id")
            continue
        ts = epoch_ms(rec.get("timestamp"))
        if first_ts is None:
            ts = BASE_MS + n * SPACING_MS  # no timestamp anywhere: a synthetic timeline
        elif ts is None:
            ts = last_ts + 1 if last_ts is not None else first_ts
        last_ts = ts if last_ts is None else max(ts, last_ts)
        if etype == "system" and rec.get("subtype") == "init":
            if isinstance(rec.get("cwd"), str) and rec["cwd"]:
                cwd[sid] = rec["cwd"]
            if sid not in prompted:
                prompted.add(sid)
                staged.records.append(
                    (line, {"type": "user", "message": {"role": "user", "content": UNKNOWN_PROMPT},
                            "uuid": f"stream-json:{line}:prompt", "sessionId": sid,
                            "timestamp": ts, "isSidechain": False,
                            **({"cwd": cwd[sid]} if sid in cwd else {})})
                )  # fmt: skip
            continue
        if etype == "system" and rec.get("subtype") == "compact_boundary":
            staged.records.append((line, {**rec, "sessionId": sid, "timestamp": ts}))
            continue
        if etype not in _CONVERSATION:
            continue  # result, task progress, hook and status notes: no hook event
        entry = _transcript_entry(rec, sid, cwd.get(sid), ts, line)
        for block in obj(rec.get("message")).get("content") or []:
            if (
                isinstance(block, dict)
                and block.get("type") == "tool_use"
                and block.get("name") in claude_transcript.TASK_TOOLS
                and isinstance(block.get("input"), dict)
                and isinstance(block["input"].get("subagent_type"), str)
            ):
                task_types[str(block.get("id"))] = block["input"]["subagent_type"]
        if entry["isSidechain"] and "subagent_type" not in entry:
            kind = task_types.get(str(rec.get("parent_tool_use_id")))
            if kind:
                entry["subagent_type"] = kind
        staged.records.append((line, entry))
    out = claude_transcript.convert(staged)
    out.format = FORMAT
    out.records = len(records.records)
    if first_ts is None:
        out.synthetic_time = (
            "Claude Code stream-json without timestamps: synthetic timeline from "
            f"2025-01-01T00:00:00Z, {SPACING_MS // 1000} s between entries in file order"
        )
    elif None in stamped:
        out.synthetic_time = (
            f"Claude Code stream-json: {stamped.count(None)} of {len(stamped)} conversation "
            "entries without a timestamp were placed 1 ms after the entry before them"
        )
    return out
