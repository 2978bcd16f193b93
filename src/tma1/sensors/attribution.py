"""Who wrote a file change: the session whose tool call explains it (design §2.10;
docs/sensors.md, "Who wrote it").

A write interval runs from a write tool's PreToolUse on a path to its Post, a shell interval
from a Bash Pre to its Post for the whole project; both get 2 s of slack past the Post (cut
at the session's Stop/SessionEnd) and none before the Pre. Intervals live in memory: they
are minutes long, and a restart forgets at most the calls in flight.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

from tma1.clock import MINUTE_MS, SECOND_MS
from tma1.events import WRITE_TOOLS, HookEvent
from tma1.paths import norm_path
from tma1.sensors.baseline import git_blob_hash

SLACK_MS = 2 * SECOND_MS
OPEN_MAX_MS = 10 * MINUTE_MS
RECENT_KEEP_MS = 15 * MINUTE_MS
# Events after which none of the session's tool calls can still be running.
TURN_ENDS = frozenset({"Stop", "UserPromptSubmit", "SessionEnd"})
# Events after which the session writes nothing until its next prompt: the 2 s slack of
# its calls ends here (a save 1.2 s after a SessionEnd is not the session's own).
SLACK_ENDS = frozenset({"Stop", "SessionEnd"})


@dataclass(slots=True)
class Interval:
    session_id: str
    kind: str  # write | shell
    project: str | None
    paths: frozenset[str]
    start: int
    end: int | None = None  # None: the Post is pending
    # Blob hashes of the content a Write call carries: proof that a change is this call's.
    content_hashes: frozenset[str] = frozenset()
    # The session's Stop/SessionEnd after this call: the slack ends there.
    stopped_at: int | None = None

    def last_ts(self) -> int:
        if self.end is None:
            return self.start + OPEN_MAX_MS
        if self.stopped_at is not None:
            # The slack past the Post ends at the session's Stop/SessionEnd (design §2.10).
            return min(self.end + SLACK_MS, max(self.stopped_at, self.end))
        return self.end + SLACK_MS

    def explains(self, project: str, path: str, ts: int, content_hash: str | None = None) -> bool:
        if not (path in self.paths if self.kind == "write" else self.project == project):
            return False
        # The 2 s slack extends past the Post (the watcher stamps a change when it sees it,
        # after the write). Before the Pre there is none: a change stamped before the call
        # started is someone else's — the human edit right before the agent's stale Edit —
        # unless it carries exactly the content this Write call wrote (the Pre was stamped
        # late, after the write).
        lead = SLACK_MS if content_hash in self.content_hashes else 0
        return self.start - lead <= ts <= self.last_ts()


def _written_hashes(ev: HookEvent) -> frozenset[str]:
    """The blob hash of a Write call's `content` (when the stored tool_input is whole)."""
    if not ev.tool_input or ev.tool_name != "Write":
        return frozenset()
    try:
        data = json.loads(ev.tool_input)
    except ValueError:
        return frozenset()  # capped: the content is not whole
    content = data.get("content") if isinstance(data, dict) else None
    if not isinstance(content, str):
        return frozenset()
    return frozenset({git_blob_hash(content.encode("utf-8", "surrogatepass"))})


def _call_key(ev: HookEvent) -> tuple[str, ...]:
    if ev.tool_use_id:
        return (ev.session_id, "id", ev.tool_use_id)
    # No tool_use_id (old versions): pair a Post with the oldest open Pre of the same call.
    return (ev.session_id, ev.tool_name or "", ev.tool_command or "", *sorted(ev.tool_files))


def _interval(ev: HookEvent, is_write: bool, *, start: int, end: int | None = None) -> Interval:
    """The interval of one write or shell call of `ev`'s session."""
    return Interval(
        session_id=ev.session_id,
        kind="write" if is_write else "shell",
        project=ev.project,
        paths=frozenset(norm_path(p, ev.cwd) for p in ev.tool_files) if is_write else frozenset(),
        start=start,
        end=end,
        content_hashes=_written_hashes(ev) if is_write else frozenset(),
    )


class Attribution:
    """In-memory write and shell intervals; `explain` answers who wrote (project, path, ts)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_path: dict[str, list[Interval]] = {}
        self._shell: dict[str, list[Interval]] = {}
        self._open: dict[tuple[str, ...], list[Interval]] = {}

    def note(self, ev: HookEvent) -> Interval | None:
        """Track `ev`; return the interval it opened or closed (None if it is no tool call
        that writes)."""
        if ev.event_type in TURN_ENDS:
            self._close_session(ev.session_id, ev.ts, stopped=ev.event_type in SLACK_ENDS)
            return None
        is_write = ev.tool_name in WRITE_TOOLS and bool(ev.tool_files)
        is_shell = ev.is_shell and ev.project is not None
        if not (is_write or is_shell):
            return None
        key = _call_key(ev)
        if ev.event_type == "PreToolUse":
            iv = _interval(ev, is_write, start=ev.ts)
            with self._lock:
                self._open.setdefault(key, []).append(iv)
                self._index(iv)
            return iv
        if ev.event_type not in ("PostToolUse", "PostToolUseFailure"):
            return None
        with self._lock:
            pending = self._open.get(key)
            if pending:
                iv = pending.pop(0)
                if not pending:
                    del self._open[key]
                iv.end = max(ev.ts, iv.start)
                return iv
            # A Post without its Pre (Pre hooks not installed, or the Pre was lost): the
            # call ran for duration_ms before it; without one, assume up to 2 s (the
            # watcher may have stored the write before this Post arrived).
            iv = _interval(ev, is_write, start=ev.ts - (ev.duration_ms or SLACK_MS), end=ev.ts)
            self._index(iv)
            return iv

    def _close_session(self, session_id: str, ts: int, *, stopped: bool) -> None:
        """The turn is over, so every call of the session has ended, Post or not (Claude
        Code before 2.0.5x fired no hook at all for a failed Bash). `stopped` (a Stop or
        SessionEnd): the slack of the session's calls ends at `ts` as well."""
        with self._lock:
            for key in [k for k in self._open if k[0] == session_id]:
                for iv in self._open.pop(key):
                    iv.end = max(ts, iv.start)
            if not stopped:
                return
            for index in (self._by_path, self._shell):
                for group in index.values():
                    for iv in group:
                        if (
                            iv.session_id == session_id
                            and iv.stopped_at is None
                            and iv.end is not None
                            and iv.end <= ts < iv.end + SLACK_MS
                        ):
                            iv.stopped_at = ts

    def _index(self, iv: Interval) -> None:
        if iv.kind == "write":
            for p in iv.paths:
                self._by_path.setdefault(p, []).append(iv)
        elif iv.project is not None:
            self._shell.setdefault(iv.project, []).append(iv)

    def explain(
        self, project: str, path: str, ts: int, content_hash: str | None = None
    ) -> str | None:
        """The session whose write explains the change; a write of the path beats a shell
        call, and among equals the latest-starting interval wins."""
        with self._lock:
            for group in (self._by_path.get(path, ()), self._shell.get(project, ())):
                best: Interval | None = None
                for iv in group:
                    if iv.explains(project, path, ts, content_hash) and (
                        best is None or iv.start >= best.start
                    ):
                        best = iv
                if best is not None:
                    return best.session_id
        return None

    def prune(self, now: int) -> None:
        horizon = now - RECENT_KEEP_MS
        indexes: tuple[dict[Any, list[Interval]], ...] = (self._by_path, self._shell, self._open)
        with self._lock:
            for index in indexes:
                for k in list(index):
                    kept = [iv for iv in index[k] if iv.last_ts() >= horizon]
                    if kept:
                        index[k] = kept
                    else:
                        del index[k]

    def size(self) -> int:
        with self._lock:
            return sum(len(v) for index in (self._by_path, self._shell) for v in index.values())
