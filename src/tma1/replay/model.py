"""What every converter produces: a time-ordered list of things that happened.

A recorded session, whatever its format, becomes `ReplayItem`s: hook payloads exactly as
the agent would have posted them, file changes as the watcher would have stored them, and
token usage as the transcript tailer would have stored it. The driver feeds them through
the live code path with a virtual clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from tma1.events import FileChange, Usage

HOOK = "hook"


def obj(value: object) -> dict[str, Any]:
    """A JSON value as an object: recorded files hold anything where a dict is expected."""
    return value if isinstance(value, dict) else {}


FILE_CHANGE = "file_change"
USAGE = "usage"


@dataclass(slots=True)
class ReplayItem:
    ts: int  # epoch ms
    kind: str  # hook | file_change | usage
    session_id: str
    payload: dict[str, Any] | None = None  # hook payload, without our "ts"
    source: str | None = None  # ?source= of the live request ("codex" or None)
    envelope: str | None = None  # ?envelope= of the live request
    change: FileChange | None = None
    usage: Usage | None = None
    origin: str = ""  # "file:line" it came from, for humans
    # Orders items with the same ts: position in the source file.
    seq: int = 0
    # Identifies the same recorded thing seen in two inputs (dropped the second time).
    key: str | None = None

    @property
    def hook_event(self) -> str | None:
        name = obj(self.payload).get("hook_event_name")
        return name if isinstance(name, str) else None


def hook_item(
    ts: int,
    session_id: str,
    payload: dict[str, Any],
    origin: str,
    seq: int,
    key: str | None = None,
    source: str | None = None,
) -> ReplayItem:
    """A hook payload as it was posted; the live request's envelope follows its source."""
    return ReplayItem(
        ts, HOOK, session_id, payload, source, source, origin=origin, seq=seq, key=key
    )


@dataclass(slots=True)
class SessionHooks:
    """The hooks one recorded session would have fired, into `out`: each payload gets the
    session, its cwd and model unless it names its own, and a key that says which agent,
    session, event and `key` it is (the same recorded thing read twice is one item)."""

    agent: ClassVar[str]  # the key's namespace
    source: ClassVar[str | None] = None  # ?source= of the live request
    out: Converted
    sid: str = ""
    cwd: str | None = None
    model: str | None = None
    started: bool = False
    last_text: str | None = None  # the turn's last assistant message: the Stop's message

    def hook(self, ts: int, seq: int, origin: str, payload: dict[str, Any], key: str) -> None:
        body: dict[str, Any] = {"session_id": self.sid, **payload}
        if self.cwd and "cwd" not in body:
            body["cwd"] = self.cwd
        if self.model:
            body.setdefault("model", self.model)
        key = f"{self.agent}:{self.sid}:{payload['hook_event_name']}:{key}"
        self.out.items.append(hook_item(ts, self.sid, body, origin, seq, key, self.source))

    def usage(self, u: Usage, ts: int, seq: int, origin: str, key: str) -> None:
        item = ReplayItem(ts, USAGE, u.session_id, usage=u, origin=origin, seq=seq, key=key)
        self.out.items.append(item)

    def start(self, ts: int, seq: int, origin: str) -> None:
        """SessionStart, once, just before the session's first record."""
        if not self.started:
            self.started = True
            start = {"hook_event_name": "SessionStart", "source": "startup"}
            self.hook(ts, seq - 50, origin, start, "")

    def stop(self, ts: int, seq: int, origin: str, key: str) -> None:
        """Stop, just after the turn's last record, carrying its last assistant message."""
        stop: dict[str, Any] = {"hook_event_name": "Stop", "stop_hook_active": False}
        if self.last_text:
            stop["last_assistant_message"] = self.last_text
        self.hook(ts, seq + 99, origin, stop, key)


def numbered_hook(
    out: Converted,
    source: str,
    sid: str,
    cwd: str | None,
    ts: int | None,
    line: int,
    payload: dict[str, Any],
) -> None:
    """A hook payload keyed by its place among `out`'s items (Gemini and Copilot record no
    id to key it by); one without a time is a problem."""
    if ts is None:
        out.problem(line, "no timestamp; event skipped")
        return
    seq = len(out.items) + 1
    body = {"session_id": sid, **({"cwd": cwd} if cwd else {}), **payload}
    origin, key = f"{out.path}:{line}", f"{source}:{sid}:{seq}"
    out.items.append(hook_item(ts, sid, body, origin, seq, key, source))


@dataclass(frozen=True, slots=True)
class Problem:
    """An unreadable or unusable part of an input: reported, skipped, never fatal."""

    path: str
    line: int  # 1-based; 0 = the file as a whole
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.message}"


@dataclass(frozen=True, slots=True)
class Note:
    """Something worth telling the reader that is not a hook event (e.g. a refusal)."""

    ts: int
    session_id: str
    kind: str  # modified_since_read | validation_rejected | blocked_by_hook | ...
    detail: str
    origin: str = ""


@dataclass(slots=True)
class Records:
    """Every JSON value a file holds, with its line, and what could not be read."""

    path: str
    records: list[tuple[int, Any]] = field(default_factory=list)  # (line, value)
    problems: list[Problem] = field(default_factory=list)

    def problem(self, line: int, message: str) -> None:
        self.problems.append(Problem(self.path, line, message))


@dataclass(slots=True)
class Converted:
    path: str
    format: str
    items: list[ReplayItem] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    # Set when the input has no timestamps and we made a timeline up; says how.
    synthetic_time: str | None = None
    records: int = 0  # records read from the file (lines or array elements)

    @classmethod
    def of(cls, records: Records, fmt: str) -> Converted:
        """Nothing converted yet from `records`; the reader's problems come first."""
        return cls(records.path, fmt, problems=list(records.problems), records=len(records.records))

    def problem(self, line: int, message: str) -> None:
        self.problems.append(Problem(self.path, line, message))
