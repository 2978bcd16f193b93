"""Gate 2, the action follow-rate: did the agent do what an emit suggested?

A *tool call* is a PreToolUse event. The follow window of an emit is the next `window`
tool calls of the same session with `ts` strictly after the emit's `ts`, and the other
events (compaction, session end) until the tool call after those. A kind with no emits
has rate None and pass None.

`judge` is the one place a verdict is made. Its inputs (`FollowInputs`: the emits with
their window ends, the session events after them, the transcript compactions, the
failing test commands) come from the database (tma1.store.gate_queries, through
tma1.gates.live) or from events held in memory (`judge_events`, a replay that keeps
no database); either source may hand over more events than a window holds.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Any, NamedTuple

from tma1.checks import check_of, file_of_test_id, files_read_by
from tma1.engine.anomaly import Kind
from tma1.engine.rules import SPECS
from tma1.events import (
    COMPACTION_HOOKS,
    READ_TOOLS,
    SHELL_TOOLS,
    WRITE_TOOLS,
    HookEvent,
    is_compaction_hook,
    json_text,
)
from tma1.gates.common import (
    DEFAULT_WINDOW,
    FOLLOW_MIN_EMITS,
    FOLLOW_TARGET,
    KINDS,
    MINUTE_MS,
    loads_list,
    overall_pass,
    overall_status,
    ratio,
    sample_verdict,
    split_stable_key,
)

# test_stuck counts failures of the last 30 min (seed); the failing command is looked for
# in that same span before the emit.
TEST_LOOKBACK_MS = 30 * MINUTE_MS
# Each rule declares its follow action in its spec (design §2.13, §5).
FOLLOW_ACTIONS: dict[str, str] = {kind: spec.follow_action for kind, spec in SPECS.items()}

END_EVENTS = frozenset({"SessionEnd"})
# Events other than tool calls that can follow a context_pressure emit (a SessionStart
# counts when it starts the compacted conversation: `is_compaction_hook`).
MARKER_EVENTS = COMPACTION_HOOKS | END_EVENTS | {"SessionStart"}
# The window end of an emit whose (window+1)-th tool call has not come yet.
FAR_FUTURE = 2**62

# Kinds whose follow action involves the emit's related files.
FILE_KINDS = frozenset(
    {
        Kind.STALE_FILE_VIEW.value,
        Kind.BUILD_BROKEN_AFTER_MY_EDIT.value,
        Kind.EXTERNAL_MODIFIED_DURING_SESSION.value,
        Kind.TEST_STUCK.value,
    }
)
_READ_OR_SHELL = tuple(sorted(READ_TOOLS | SHELL_TOOLS))
_SHELL = tuple(sorted(SHELL_TOOLS))
# Per kind, the tools whose calls its follow action looks at (see `followed`); calls of
# other tools (Grep, Glob, Task, …) only count towards the window's end.
_SEED_TOOLS: dict[str, tuple[str, ...]] = {
    Kind.STALE_FILE_VIEW.value: _READ_OR_SHELL,
    Kind.BUILD_BROKEN_AFTER_MY_EDIT.value: _READ_OR_SHELL,
    Kind.EXTERNAL_MODIFIED_DURING_SESSION.value: _READ_OR_SHELL,
    # Writes too: a re-run after an edit is the suggestion followed (blind_rerun).
    Kind.REPEATED_FAILED_BUILD.value: tuple(sorted(set(_SHELL) | WRITE_TOOLS)),
    Kind.CONTEXT_PRESSURE.value: _SHELL,
    Kind.TEST_STUCK.value: tuple(sorted(READ_TOOLS | WRITE_TOOLS | SHELL_TOOLS)),
}
# A rule added beyond the seed's six is followed when the agent reads or edits one of its
# related files within the window (`followed`), the seed's default action for a finding
# about files.
TOOLS_BY_KIND: dict[str, tuple[str, ...]] = {
    k: _SEED_TOOLS.get(k, tuple(sorted(READ_TOOLS | WRITE_TOOLS | SHELL_TOOLS))) for k in KINDS
}


class Call(NamedTuple):
    """A session event after an emit, as the follow-rate check sees it. (A NamedTuple: the
    gate builds tens of thousands per request, and tuples are the cheapest to make.)"""

    ts: int
    id: int
    event_type: str
    tool_name: str | None = None
    file_path: str | None = None
    files: tuple[str, ...] = ()
    command: str | None = None
    command_prefix: str | None = None
    metadata: str | None = None

    @property
    def is_tool_call(self) -> bool:
        return self.event_type == "PreToolUse"

    @property
    def is_shell(self) -> bool:
        return self.tool_name in SHELL_TOOLS or (
            self.tool_name is None and self.command is not None
        )

    def touched(self) -> tuple[str, ...]:
        if self.files:
            return self.files
        return (self.file_path,) if self.file_path else ()


@dataclass(frozen=True, slots=True)
class EmitRef:
    """What follow-rate needs to know of one emit."""

    id: int
    ts: int
    session_id: str
    kind: str
    subject: str
    related_files: tuple[str, ...] = ()
    # test_stuck only: prefixes of the failing commands that reported the test id.
    test_commands: tuple[str, ...] = field(default=())
    # Whether any tool call at all followed the emit (None: judge from the calls given;
    # the inputs may hold only the calls of tools that can matter).
    acted: bool | None = None
    # The ts of the (window+1)-th tool call after the emit: the window ends before it.
    window_end: int = FAR_FUTURE

    @property
    def window_closed(self) -> bool:
        """Nothing that arrives later can change the verdict."""
        return self.window_end != FAR_FUTURE


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
    if kind in FILE_KINDS or kind not in _SEED_TOOLS:
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


# --- what counts as the follow action ----------------------------------------------------


def same_file(a: str, b: str) -> bool:
    """Equal paths, or one is a relative tail of the other (`tests/x.py` vs `/r/tests/x.py`)."""
    if a == b:
        return True
    if not a or not b or (a[0] == "/" and b[0] == "/"):
        return False  # two different absolute POSIX paths (the common case, kept cheap)
    a, b = a.replace("\\", "/"), b.replace("\\", "/")
    a, b = a.removeprefix("./"), b.removeprefix("./")
    if a == b:
        return True
    if a.startswith("/") and not b.startswith("/"):
        return a.endswith("/" + b)
    if b.startswith("/") and not a.startswith("/"):
        return b.endswith("/" + a)
    return False


_GIT_COMMIT = re.compile(r"(?:^|[\s;&|(])git\s+(?:-C\s+\S+\s+|-c\s+\S+\s+)*commit\b")


def _shell_reads(command: str, files: Sequence[str]) -> bool:
    """A shell command that prints a related file (Codex has no Read tool)."""
    return any(same_file(read, f) for read in files_read_by(command) for f in files)


def _touches(call: Call, files: Sequence[str]) -> bool:
    return any(same_file(p, f) for p in call.touched() for f in files)


def is_read_of(call: Call, files: Sequence[str]) -> bool:
    if not call.is_tool_call or not files:
        return False
    if call.tool_name in READ_TOOLS:
        return _touches(call, files)
    if call.is_shell and call.command:
        return _shell_reads(call.command, files)
    return False


def is_edit_of(call: Call, files: Sequence[str]) -> bool:
    if not call.is_tool_call or call.tool_name not in WRITE_TOOLS or not files:
        return False
    return _touches(call, files)


def is_rerun(call: Call, prefixes: Iterable[str]) -> bool:
    """A run of the same command — by prefix, or (design §2.15: build subjects are check
    identities) of the same check however spelled (its cwd is not fetched: a `cd DIR &&`
    still counts)."""
    if not call.is_tool_call or not call.is_shell or not call.command_prefix:
        return False
    wanted = set(prefixes)
    if call.command_prefix in wanted:
        return True
    check = check_of(call.command) if call.command else None
    return check is not None and check.identity in wanted


def blind_rerun(tool_calls: Sequence[Call], prefixes: Iterable[str]) -> bool:
    """A re-run of the failing command before any edit: the agent retried without a fix.

    Design §2.13 says "no re-run"; but the finding's own suggestion is "fix it, then run
    it once more", and an agent that does exactly that must not score as ignoring it.
    """
    wanted = tuple(prefixes)
    for call in tool_calls:
        if call.tool_name in WRITE_TOOLS:
            return False
        if is_rerun(call, wanted):
            return True
    return False


def is_git_commit(call: Call) -> bool:
    return call.is_tool_call and call.is_shell and bool(_GIT_COMMIT.search(call.command or ""))


def is_compaction_or_end(call: Call) -> bool:
    if call.event_type in END_EVENTS:
        return True
    source = None
    if call.event_type == "SessionStart" and call.metadata:
        try:
            meta = json.loads(call.metadata)
        except ValueError:
            return False
        source = meta.get("source") if isinstance(meta, dict) else None
    return is_compaction_hook(call.event_type, source)


def window_of(calls: Sequence[Call], window: int) -> list[Call]:
    """The events before the (`window`+1)-th tool call (calls sorted by ts, id)."""
    out: list[Call] = []
    seen = 0
    for c in calls:
        if c.is_tool_call:
            if seen == window:
                break
            seen += 1
        out.append(c)
    return out


def followed(emit: EmitRef, calls: Sequence[Call], window: int) -> bool:
    """Did the agent take the kind's follow action (design §2.13) within `window` tool calls?

    `calls` are the session's events after the emit, sorted. Absence actions ("no re-run")
    need at least one observed tool call: an agent that has done nothing yet has not
    followed anything.
    """
    span = window_of(calls, window)
    tool_calls = [c for c in span if c.is_tool_call]
    acted = bool(tool_calls) if emit.acted is None else emit.acted
    kind = emit.kind
    if kind in (
        Kind.STALE_FILE_VIEW,
        Kind.BUILD_BROKEN_AFTER_MY_EDIT,
        Kind.EXTERNAL_MODIFIED_DURING_SESSION,
    ):
        return any(is_read_of(c, emit.related_files) for c in tool_calls)
    if kind == Kind.REPEATED_FAILED_BUILD:
        return acted and not blind_rerun(tool_calls, (emit.subject,))
    if kind == Kind.TEST_STUCK:
        files = list(emit.related_files)
        if tf := file_of_test_id(emit.subject, guess=True):
            files.append(tf)
        if any(is_read_of(c, files) or is_edit_of(c, files) for c in tool_calls):
            return True
        prefixes = emit.test_commands
        return acted and bool(prefixes) and not any(is_rerun(c, prefixes) for c in tool_calls)
    if kind == Kind.CONTEXT_PRESSURE:
        return any(is_compaction_or_end(c) or is_git_commit(c) for c in span)
    # A rule beyond the seed's six (TOOLS_BY_KIND): a read or an edit of its files.
    related = emit.related_files
    return any(is_read_of(c, related) or is_edit_of(c, related) for c in tool_calls)


# --- the verdicts --------------------------------------------------------------------------


@dataclass
class FollowInputs:
    """Everything the verdicts depend on, however it was gathered.

    `calls`: per emit id, session events after the emit — tool calls (PreToolUse) and
    markers (MARKER_EVENTS) — at least those inside its window. `compactions`: per
    session, the ts of the compactions the transcript tailer saw, ascending (they count
    like PreCompact hooks). `test_commands`: per test_stuck emit id, the failing
    commands that reported its test (`test_commands_from_rows`)."""

    emits: list[EmitRef] = field(default_factory=list)
    calls: dict[int, list[Call]] = field(default_factory=dict)
    compactions: dict[str, list[int]] = field(default_factory=dict)
    test_commands: dict[int, tuple[str, ...]] = field(default_factory=dict)


def _order(c: Call) -> tuple[int, bool, int]:
    return (c.ts, not c.is_tool_call, c.id)


def _in_window(ref: EmitRef, calls: Iterable[Call]) -> list[Call]:
    """The events of `calls` that can matter to `ref`'s verdict, sorted."""
    tools = TOOLS_BY_KIND.get(ref.kind, ())
    markers = ref.kind == Kind.CONTEXT_PRESSURE.value
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
        if ref.kind == Kind.TEST_STUCK.value:
            ref = replace(ref, test_commands=inputs.test_commands.get(ref.id, ()))
        calls: list[Call] = list(inputs.calls.get(ref.id, ()))
        if ref.kind == Kind.CONTEXT_PRESSURE.value:
            seen = inputs.compactions.get(ref.session_id, [])
            lo = bisect_right(seen, ref.ts)
            hi = bisect_left(seen, ref.window_end)
            calls.extend(Call(ts, 0, "PostCompact") for ts in seen[lo:hi])
        out.append((ref, followed(ref, _in_window(ref, calls), window)))
    return out


def test_commands_from_rows(
    rows: Iterable[tuple[int, str | None, str | None, str | None]],
) -> dict[int, tuple[str, ...]]:
    """(test_stuck emit id, its stable key, a failing command's prefix, that failure's test
    ids as JSON) — every failure of the emit's session in the 30 minutes up to it — →
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
        if ref.kind == Kind.TEST_STUCK.value:
            inputs.test_commands[ref.id] = _test_commands_of(ref, session)
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


def _test_commands_of(ref: EmitRef, session: Sequence[HookEvent]) -> tuple[str, ...]:
    """`test_commands_from_rows` for one emit, over its session's events in memory."""
    lo = bisect_left(session, ref.ts - TEST_LOOKBACK_MS, key=_event_ts)
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
