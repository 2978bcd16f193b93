"""What counts as the agent following a finding (design §2.13): the follow actions a
`RuleSpec` declares, as pure predicates over the events after an emit.

A rule's `Follow` names its action in words, the check that judges it, the tools whose
calls the check looks at, and which other inputs it needs (the emit's related files,
compaction and session-end markers, the failing commands that named its test). The
follow-rate gate (`tma1.gates.follow`) gathers those inputs and asks the check; nothing
there knows a kind by name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from tma1.checks import check_of, files_read_by
from tma1.events import COMPACTION_HOOKS, READ_TOOLS, SHELL_TOOLS, WRITE_TOOLS, is_compaction_hook

END_EVENTS = frozenset({"SessionEnd"})
# Events other than tool calls a `Follow(markers=True)` check sees (a SessionStart counts
# when it starts the compacted conversation: `is_compaction_hook`).
MARKER_EVENTS = COMPACTION_HOOKS | END_EVENTS | {"SessionStart"}
# The window end of an emit whose (window+1)-th tool call has not come yet.
FAR_FUTURE = 2**62


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
    # Only for a `Follow` with a test lookback: prefixes of the failing commands that
    # reported the emit's subject (a test id).
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


# (emit, the events of its window, the tool calls among them, whether the agent made any
# tool call at all) -> followed. Absence actions ("no re-run") need `acted`: an agent that
# has done nothing yet has not followed anything.
FollowCheck = Callable[[EmitRef, Sequence[Call], Sequence[Call], bool], bool]


@dataclass(frozen=True, slots=True)
class Follow:
    """A rule's follow action (design §2.13) and the inputs its check needs."""

    action: str  # in words, as `tma1 gates` and the docs report it
    check: FollowCheck
    # The tools whose calls the check looks at; calls of other tools (Grep, Glob, Task, …)
    # only count towards the window's end (and are not fetched).
    tools: frozenset[str]
    related_files: bool = True  # the check reads the emit's related files
    # Compactions, session ends and compact SessionStarts (and the transcript's
    # compactions) in the window count as events the check sees.
    markers: bool = False
    # The failing commands of the session that named the emit's subject (a test id) in
    # this span before the emit are handed to the check as `EmitRef.test_commands`.
    test_lookback_ms: int | None = None


# --- what counts as an action ---------------------------------------------------------------


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


# --- the shared follow actions ---------------------------------------------------------------


def _read_of_related(emit: EmitRef, span: Sequence[Call], tools: Sequence[Call], _: bool) -> bool:
    return any(is_read_of(c, emit.related_files) for c in tools)


def _read_or_edit_of_related(
    emit: EmitRef, span: Sequence[Call], tools: Sequence[Call], _: bool
) -> bool:
    related = emit.related_files
    return any(is_read_of(c, related) or is_edit_of(c, related) for c in tools)


# A finding about files is followed by a read of one (Codex reads with a shell command).
READ_OF_RELATED = Follow(
    action="a Read of a related file",
    check=_read_of_related,
    tools=READ_TOOLS | SHELL_TOOLS,
)
# The default of a rule that declares no follow action of its own.
READ_OR_EDIT_OF_RELATED = Follow(
    action="a read or an edit of a related file",
    check=_read_or_edit_of_related,
    tools=READ_TOOLS | WRITE_TOOLS | SHELL_TOOLS,
)
# A kind in the emit log that no rule declares any more: never followed.
UNDEFINED = Follow(action="none defined", check=_read_or_edit_of_related, tools=frozenset())
