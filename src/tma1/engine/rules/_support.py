"""Small shared pieces of the rules: time windows, tool calls, file paths, formatting.

Everything here is a pure function of the window's data; no rule reads a clock or a store.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from tma1.checks import files_read_by
from tma1.clock import MINUTE_MS
from tma1.events import READ_TOOLS, WRITE_TOOLS, HookEvent, absolutize

# The seed's per-rule lookback. A constant, never a setting (seed: "change them in code").
RULE_WINDOW_MS = 30 * MINUTE_MS

# A Post without a tool_use_id is matched to a Pre of the same tool and files this recent.
_PAIRING_SLACK_MS = 10 * MINUTE_MS

# Files whose edits cannot break a build: docs, data and config (design §2.2, seed table).
DOC_SUFFIXES = frozenset(
    {
        ".md",
        ".markdown",
        ".mdx",
        ".rst",
        ".adoc",
        ".txt",
        ".json",
        ".jsonc",
        ".yml",
        ".yaml",
        ".toml",
        ".ini",
        ".cfg",
        ".lock",
        ".csv",
        ".tsv",
        ".log",
        ".svg",
        ".png",
        ".jpg",
        ".jpeg",
        ".gif",
    }
)
_DOC_NAMES = frozenset({"license", "licence", "readme", "changelog", "authors", "notice"})


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One Read or edit the agent made: when it was asked for, and which files it touched."""

    ts: int
    tool: str
    files: tuple[str, ...]
    tool_use_id: str | None


def visible(events: Sequence[HookEvent], now: int, since: int | None = None) -> list[HookEvent]:
    """Events a rule may consider: at or before `now` (and at or after `since`)."""
    lo = since if since is not None else -(2**62)
    return [e for e in events if lo <= e.ts <= now]


def tool_calls(events: Iterable[HookEvent], tools: frozenset[str]) -> list[ToolCall]:
    """Calls of `tools`, timed at their PreToolUse; a result without a Pre counts at its own ts.

    A call whose result says it did not happen (refused, rejected, failed) is dropped: the
    agent neither saw nor changed the file.
    """
    pres: list[HookEvent] = []
    posts: list[HookEvent] = []
    for e in events:
        if e.tool_name not in tools or not e.tool_files:
            continue
        if e.event_type == "PreToolUse":
            pres.append(e)
        elif e.event_type in ("PostToolUse", "PostToolUseFailure"):
            posts.append(e)

    failed_ids = {
        p.tool_use_id
        for p in posts
        if p.tool_use_id and (p.tool_success is False or p.event_type == "PostToolUseFailure")
    }
    pre_ids = {p.tool_use_id for p in pres if p.tool_use_id}

    calls: list[ToolCall] = [
        ToolCall(p.ts, p.tool_name or "", tuple(p.tool_files), p.tool_use_id)
        for p in pres
        if not (p.tool_use_id and p.tool_use_id in failed_ids)
    ]
    # Id-less results pair one-to-one with the latest earlier id-less Pre of the same call.
    unpaired: dict[tuple[str | None, tuple[str, ...]], list[int]] = {}
    for q in sorted(pres, key=lambda e: e.ts):
        if not q.tool_use_id:
            unpaired.setdefault((q.tool_name, tuple(q.tool_files)), []).append(q.ts)
    for p in sorted(posts, key=lambda e: e.ts):
        if p.tool_use_id in pre_ids:
            continue
        if not p.tool_use_id:
            waiting = unpaired.get((p.tool_name, tuple(p.tool_files)))
            i = bisect_right(waiting, p.ts) if waiting else 0
            if waiting and i and p.ts - waiting[i - 1] <= _PAIRING_SLACK_MS:
                del waiting[i - 1]
                continue
        if p.tool_success is False or p.event_type == "PostToolUseFailure":
            continue
        calls.append(ToolCall(p.ts, p.tool_name or "", tuple(p.tool_files), p.tool_use_id))
    calls.sort(key=lambda c: c.ts)
    return calls


def edits(events: Iterable[HookEvent]) -> list[ToolCall]:
    return tool_calls(events, WRITE_TOOLS)


def reads(events: Iterable[HookEvent]) -> list[ToolCall]:
    return tool_calls(events, READ_TOOLS)


def shell_reads(events: Iterable[HookEvent]) -> list[ToolCall]:
    """Files printed by read-only shell commands (`cat f`, `sed -n '1,80p' f`): Codex's Read.

    Timed at the PreToolUse; a successful result counts when no Pre of that call was seen.
    """
    reading = [
        (e, files)
        for e in events
        if e.is_shell and e.tool_command and (files := files_read_by(e.tool_command))
    ]
    pre_ids = {e.tool_use_id for e, _ in reading if e.event_type == "PreToolUse" and e.tool_use_id}
    pre_ts: dict[str, list[int]] = {}
    for e, _ in reading:
        if e.event_type == "PreToolUse":
            pre_ts.setdefault(e.tool_command or "", []).append(e.ts)
    calls: list[ToolCall] = []
    for e, files in reading:
        if e.event_type == "PostToolUse" and e.tool_success is not False:
            if e.tool_use_id:
                if e.tool_use_id in pre_ids:
                    continue
            elif any(
                0 <= e.ts - t <= _PAIRING_SLACK_MS for t in pre_ts.get(e.tool_command or "", ())
            ):
                continue
        elif e.event_type != "PreToolUse":
            continue
        paths = tuple(absolutize(f, e.cwd) for f in files)
        calls.append(ToolCall(e.ts, e.tool_name or "", paths, e.tool_use_id))
    return calls


# --- paths -------------------------------------------------------------------------------


def basename(path: str) -> str:
    return path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


def is_source(path: str) -> bool:
    """Code a build or test run can fail on; docs, data and config are not (design §2.2)."""
    name = basename(path).lower()
    stem, dot, suffix = name.rpartition(".")
    if not dot:
        return name not in _DOC_NAMES
    return f".{suffix}" not in DOC_SUFFIXES and stem not in _DOC_NAMES


_PATH_TOKEN = re.compile(r"[\w.\-/\\@+~]+")


def _heads_naming(text: str, name: str) -> frozenset[str]:
    """The directories `text` puts before the file name `name` ("" for a bare name)."""
    heads: set[str] = set()
    for token in _PATH_TOKEN.findall(text):
        token = token.replace("\\", "/").rstrip(".-")
        head, _, base = token.rpartition("/")
        if base != name:
            continue
        while head.startswith(("./", "../")) or head in (".", ".."):
            head = head.split("/", 1)[1] if "/" in head else ""
        heads.add(head.lstrip("/"))
    return frozenset(heads)


def mentions_path(text: str | None, path: str) -> bool:
    """`text` names the file: its basename, with no directory that contradicts `path`.

    `cmd/config.go:142` does not name `internal/config/config.go`; `config.go:3` and
    `internal/config/config.go:3` do.
    """
    name = basename(path)
    if not text or not name or name not in text:
        return False
    prefixes = _heads_naming(text, name)
    if not prefixes:
        return False
    full = "/" + path.replace("\\", "/").lstrip("/")
    return any(not pre or full.endswith(f"/{pre}/{name}") for pre in prefixes)


# --- text ------------------------------------------------------------------------------


def clock_time(ms: int) -> str:
    """Epoch ms as `HH:MM:SSZ` (UTC): short enough for a digest line, exact for a human."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%H:%M:%SZ")


def quote(text: str, limit: int = 160) -> str:
    """Inline-code quoting of one line of tool output, cut to `limit` characters."""
    one = " ".join(text.split())
    if len(one) > limit:
        one = one[: limit - 1] + "…"
    return "`" + one.replace("`", "'") + "`"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
