"""Claude Code hook payload logs (JSON arrays, or JSONL, of payloads without timestamps).

Some setups log every hook payload to a file (`logs/pre_tool_use.json`, …) but record no
time. We give them a synthetic timeline, said so in the output: payloads keep their file
order and are `SPACING_MS` apart from `BASE_MS`. A PostToolUse logged in another file is
placed just after the PreToolUse it answers (same session, tool and tool_input); a Post
with no matching Pre goes after the last event of its session.
"""

from __future__ import annotations

import json
from typing import Any

from tma1.replay.formats import CLAUDE_HOOKLOG
from tma1.replay.model import Converted, Records, hook_item

BASE_MS = 1_735_689_600_000  # 2025-01-01T00:00:00Z
SPACING_MS = 2_000
_POSTS = ("PostToolUse", "PostToolUseFailure")


def _key(p: dict[str, Any]) -> str:
    return json.dumps(
        [p.get("session_id"), p.get("tool_name"), p.get("tool_input")],
        sort_keys=True,
        default=str,
    )


def convert_many(inputs: list[Records]) -> list[Converted]:
    """One Converted per file, on one shared synthetic timeline."""
    outs = [Converted.of(r, CLAUDE_HOOKLOG) for r in inputs]
    timeline: list[tuple[int, int, dict[str, Any]]] = []  # (file index, line, payload)
    posts: list[tuple[int, int, dict[str, Any]]] = []
    for fi, rec in enumerate(inputs):
        for line, value in rec.records:
            if not isinstance(value, dict) or not isinstance(value.get("hook_event_name"), str):
                outs[fi].problem(line, "not a hook payload (no hook_event_name); skipped")
                continue
            (posts if value["hook_event_name"] in _POSTS else timeline).append((fi, line, value))

    # Where each Post goes: after the first unanswered Pre with the same key.
    open_pres: dict[str, list[int]] = {}
    for slot, (_, _, p) in enumerate(timeline):
        if p.get("hook_event_name") == "PreToolUse":
            open_pres.setdefault(_key(p), []).append(slot)
    after: dict[int, list[tuple[int, int, dict[str, Any]]]] = {}
    orphans: list[tuple[int, int, dict[str, Any]]] = []
    for post in posts:
        slots = open_pres.get(_key(post[2]))
        if slots:
            after.setdefault(slots.pop(0), []).append(post)
        else:
            orphans.append(post)

    last_slot = {str(p.get("session_id")): slot for slot, (_, _, p) in enumerate(timeline)}
    for post in orphans:
        slot = last_slot.get(str(post[2].get("session_id")), len(timeline) - 1)
        after.setdefault(max(slot, 0), []).append(post)

    def place(fi: int, line: int, p: dict[str, Any], ts: int, seq: int) -> None:
        sid, path = p.get("session_id"), inputs[fi].path
        sid = sid if isinstance(sid, str) else ""
        outs[fi].items.append(
            hook_item(ts, sid, p, f"{path}:{line}", seq, f"hooklog:{path}:{line}")
        )

    for slot, (fi, line, payload) in enumerate(timeline):
        ts = BASE_MS + slot * SPACING_MS
        place(fi, line, payload, ts, slot * 100)
        for j, (pfi, pline, answer) in enumerate(after.get(slot, [])):
            place(pfi, pline, answer, ts + SPACING_MS // 2, slot * 100 + 1 + j)
    if not timeline:
        for j, (pfi, pline, answer) in enumerate(posts):
            place(pfi, pline, answer, BASE_MS + j * SPACING_MS, j * 100)

    note = (
        f"hook payload log without timestamps: synthetic timeline from "
        f"2025-01-01T00:00:00Z, {SPACING_MS // 1000} s between payloads in file order; "
        f"PostToolUse placed {SPACING_MS // 2000} s after its PreToolUse"
    )
    for out in outs:
        out.synthetic_time = note
    return outs
