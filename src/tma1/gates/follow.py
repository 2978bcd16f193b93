"""Gate 2, the action follow-rate: did the agent do what an emit suggested?

A *tool call* is a PreToolUse event. The follow window of an emit is the next `window`
tool calls of the same session with `ts` strictly after the emit's `ts`, and the other
events (compaction, session end) until the tool call after those. A kind with no emits
has rate None and pass None.

`judge` is the one place a verdict is made. Its inputs (`FollowInputs`: the emits with
their window ends, the session events after them, the transcript compactions, the
failing test commands) come from the database (tma1.store.gate_queries, through
tma1.gates.live) or from events held in memory (`judge_events`, a replay that keeps
no database); either source may hand over more events than a window holds. What counts
as the action, and which of those inputs it needs, is each rule's `RuleSpec.follow`
(`tma1.engine.following`): nothing here names a kind.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Any

from tma1.engine.following import (
    FAR_FUTURE,
    MARKER_EVENTS,
    UNDEFINED,
    Call,
    EmitRef,
    Follow,
    window_of,
)
from tma1.engine.rules import SPECS
from tma1.events import HookEvent, json_text
from tma1.gates.common import (
    DEFAULT_WINDOW,
    FOLLOW_MIN_EMITS,
    FOLLOW_TARGET,
    KINDS,
    loads_list,
    overall_pass,
    overall_status,
    ratio,
    sample_verdict,
    split_stable_key,
)

# Each rule declares its follow action and that action's inputs in its spec (design
# §2.13, §5); a kind no rule declares (an emit of a rule since removed) is never followed.
FOLLOWS: dict[str, Follow] = {kind: spec.follow for kind, spec in SPECS.items()}
FOLLOW_ACTIONS: dict[str, str] = {kind: f.action for kind, f in FOLLOWS.items()}
# Per kind, the tools whose calls its follow action looks at; calls of other tools (Grep,
# Glob, Task, …) only count towards the window's end.
TOOLS_BY_KIND: dict[str, tuple[str, ...]] = {k: tuple(sorted(f.tools)) for k, f in FOLLOWS.items()}
# The kinds whose follow action sees compactions and session ends, or failing test commands.
MARKER_KINDS: tuple[str, ...] = tuple(k for k, f in FOLLOWS.items() if f.markers)
TEST_LOOKBACKS: dict[str, int] = {
    k: f.test_lookback_ms for k, f in FOLLOWS.items() if f.test_lookback_ms is not None
}


def follow_of(kind: str) -> Follow:
    return FOLLOWS.get(kind, UNDEFINED)


def emit_ref(
    emit_id: int,
    ts: int,
    session_id: str,
    kind: str,
    stable_key: str | None,
    related_files: str | Sequence[str] | None,
    *,
    acted: bool,
    window_end: int,
) -> EmitRef:
    """An emit-log row's fields (`related_files` a list or its JSON) → EmitRef."""
    related: Sequence[str] = ()
    if follow_of(kind).related_files:
        related = (
            related_files
            if isinstance(related_files, list)
            else loads_list(related_files if isinstance(related_files, str) else None)
        )
    return EmitRef(
        id=emit_id,
        ts=ts,
        session_id=session_id,
        kind=kind,
        subject=split_stable_key(stable_key or "")[2],
        related_files=tuple(related),
        acted=acted,
        window_end=window_end,
    )


def followed(emit: EmitRef, calls: Sequence[Call], window: int) -> bool:
    """Did the agent take the kind's follow action (design §2.13) within `window` tool calls?

    `calls` are the session's events after the emit, sorted. Absence actions ("no re-run")
    need at least one observed tool call: an agent that has done nothing yet has not
    followed anything.
    """
    span = window_of(calls, window)
    tool_calls = [c for c in span if c.is_tool_call]
    acted = bool(tool_calls) if emit.acted is None else emit.acted
    return follow_of(emit.kind).check(emit, span, tool_calls, acted)


# --- the verdicts --------------------------------------------------------------------------


@dataclass
class FollowInputs:
    """Everything the verdicts depend on, however it was gathered.

    `calls`: per emit id, session events after the emit — tool calls (PreToolUse) and,
    for a kind whose follow action sees them, markers (MARKER_EVENTS) — at least those
    inside its window. `compactions`: per session, the ts of the compactions the
    transcript tailer saw, ascending (they count like PreCompact hooks for such a kind).
    `test_commands`: per emit id of a kind with a test lookback, the failing commands
    that reported its test (`test_commands_from_rows`)."""

    emits: list[EmitRef] = field(default_factory=list)
    calls: dict[int, list[Call]] = field(default_factory=dict)
    compactions: dict[str, list[int]] = field(default_factory=dict)
    test_commands: dict[int, tuple[str, ...]] = field(default_factory=dict)


def _order(c: Call) -> tuple[int, bool, int]:
    return (c.ts, not c.is_tool_call, c.id)


def _in_window(ref: EmitRef, calls: Iterable[Call]) -> list[Call]:
    """The events of `calls` that can matter to `ref`'s verdict, sorted."""
    follow = follow_of(ref.kind)
    tools, markers = follow.tools, follow.markers
    lo, hi = ref.ts, ref.window_end
    span = [
        c
        for c in calls
        if lo < c.ts < hi
        and (c.tool_name in tools if c.is_tool_call else markers and c.event_type in MARKER_EVENTS)
    ]
    span.sort(key=_order)
    return span


def judge(inputs: FollowInputs, window: int) -> list[tuple[EmitRef, bool]]:
    """(emit, followed) for every emit of `inputs`, in their order."""
    out: list[tuple[EmitRef, bool]] = []
    for ref in inputs.emits:
        follow = follow_of(ref.kind)
        if follow.test_lookback_ms is not None:
            ref = replace(ref, test_commands=inputs.test_commands.get(ref.id, ()))
        calls: list[Call] = list(inputs.calls.get(ref.id, ()))
        if follow.markers:
            seen = inputs.compactions.get(ref.session_id, [])
            lo = bisect_right(seen, ref.ts)
            hi = bisect_left(seen, ref.window_end)
            calls.extend(Call(ts, 0, "PostCompact") for ts in seen[lo:hi])
        out.append((ref, followed(ref, _in_window(ref, calls), window)))
    return out


def test_commands_from_rows(
    rows: Iterable[tuple[int, str | None, str | None, str | None]],
) -> dict[int, tuple[str, ...]]:
    """(emit id, its stable key, a failing command's prefix, that failure's test ids as
    JSON) — every failure of the emit's session in its kind's test lookback up to it — →
    per emit, the prefixes of the failing commands whose output named its test."""
    found: dict[int, dict[str, None]] = defaultdict(dict)
    decoded: dict[str, list[str]] = {}  # a failure sits in the lookback of several emits
    for emit_id, key, prefix, test_ids in rows:
        if not prefix or not test_ids or prefix in found[emit_id]:
            continue
        subject = split_stable_key(key or "")[2]
        # The substring test is cheap and rules out most rows before JSON decoding.
        if not subject or subject not in test_ids:
            continue
        ids = decoded.get(test_ids)
        if ids is None:
            ids = decoded[test_ids] = loads_list(test_ids)
        if subject in ids:
            found[emit_id][prefix] = None
    return {k: tuple(v) for k, v in found.items() if v}


_event_ts = attrgetter("ts")


def judge_events(
    emits: Iterable[Mapping[str, Any]],
    events: Mapping[str, Sequence[HookEvent]],
    *,
    compactions: Mapping[str, Sequence[int]] | None = None,
    since: int = 0,
    window: int = DEFAULT_WINDOW,
) -> list[tuple[EmitRef, bool]]:
    """`judge` of emit-log rows over events held in memory (a replay that keeps no
    database). `events`: each session's events in the order they were stored (ts
    ascending, then id); `compactions`: each session's transcript compactions (ts)."""
    inputs = FollowInputs(compactions={sid: sorted(ts) for sid, ts in (compactions or {}).items()})
    for row in emits:
        ts = int(row["ts"])
        if ts < since:
            continue
        session = events.get(row["session_id"], ())
        later = session[bisect_right(session, ts, key=_event_ts) :]
        tool_calls = [e for e in later if e.event_type == "PreToolUse"]
        wend = tool_calls[window].ts if len(tool_calls) > window else FAR_FUTURE
        ref = emit_ref(
            int(row["id"]),
            ts,
            row["session_id"],
            str(row["kind"]),
            row["stable_key"],
            row["related_files"],
            acted=bool(tool_calls),
            window_end=wend,
        )
        inputs.emits.append(ref)
        inputs.calls[ref.id] = [_call_of(e) for e in later if e.ts < wend]
        lookback = follow_of(ref.kind).test_lookback_ms
        if lookback is not None:
            inputs.test_commands[ref.id] = _test_commands_of(ref, session, lookback)
    return judge(inputs, window)


def _call_of(e: HookEvent) -> Call:
    if e.event_type == "PreToolUse":
        return Call(
            e.ts,
            e.id or 0,
            "PreToolUse",
            e.tool_name,
            e.tool_file_path,
            tuple(e.tool_files) if e.tool_name == "apply_patch" else (),
            e.tool_command,
            e.tool_command_prefix,
        )
    meta = json_text(e.metadata) if e.event_type == "SessionStart" and e.metadata else None
    return Call(e.ts, e.id or 0, e.event_type, metadata=meta)


def _test_commands_of(
    ref: EmitRef, session: Sequence[HookEvent], lookback_ms: int
) -> tuple[str, ...]:
    """`test_commands_from_rows` for one emit, over its session's events in memory."""
    lo = bisect_left(session, ref.ts - lookback_ms, key=_event_ts)
    hi = bisect_right(session, ref.ts, key=_event_ts)
    found: dict[str, None] = {}
    for e in session[lo:hi]:
        prefix = e.tool_command_prefix
        if e.failure_kind is not None and prefix and ref.subject and ref.subject in e.test_ids:
            found[prefix] = None
    return tuple(found)


def follow_report(
    verdicts: Iterable[tuple[str, bool]], *, since: int, now_ms: int, days: int, window: int
) -> dict[str, Any]:
    emits: dict[str, int] = defaultdict(int)
    done: dict[str, int] = defaultdict(int)
    for kind, ok in verdicts:
        emits[kind] += 1
        done[kind] += int(ok)
    kinds = list(KINDS) + sorted(k for k in emits if k not in KINDS)
    per_kind = {}
    for kind in kinds:
        rate = ratio(done[kind], emits[kind])
        per_kind[kind] = {
            "emits": emits[kind],
            "followed": done[kind],
            "rate": rate,
            **sample_verdict(rate, FOLLOW_TARGET, emits[kind], FOLLOW_MIN_EMITS),
            "action": FOLLOW_ACTIONS.get(kind, "none defined"),
        }
    total, total_done = sum(emits.values()), sum(done.values())
    return {
        "days": days,
        "window": window,
        "since": since,
        "until": now_ms,
        "target": FOLLOW_TARGET,
        "min_emits": FOLLOW_MIN_EMITS,
        "kinds": per_kind,
        "overall": {"emits": total, "followed": total_done, "rate": ratio(total_done, total)},
        "pass": overall_pass(v["pass"] for v in per_kind.values()),
        "status": overall_status(v["status"] for v in per_kind.values()),
    }
