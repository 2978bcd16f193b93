"""Reading recorded sessions and telling their formats apart by content, not by name.

Two containers: JSONL (one JSON value a line) and a JSON array (possibly pretty-printed
over many lines). Each record keeps the 1-based line it starts on, so every problem can be
reported as `file:line`. tma1's own two formats live in them:

- `eventlog`: tma1's own event log (design §4) — hook payloads with a `ts`, and
  `file_change` / `usage` records; what `tma1 export` writes.
- `claude-hooklog`: hook payloads without timestamps (whatever the agent).

and each agent's, declared in its `AgentSpec.replay` (tma1.adapters.agents): how a record
of it looks, its converter, its name (a converter's `FORMAT`, `format_of`) and what the
help calls it (`described`). The table in docs/hooks.md lists them.
"""

from __future__ import annotations

import importlib
import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from tma1.adapters.agents import SPECS
from tma1.adapters.spec import Vote
from tma1.replay.model import Converted, Problem, Records

# tma1's own formats; the agents' are named in their specs (`format_of`).
EVENTLOG = "eventlog"
CLAUDE_HOOKLOG = "claude-hooklog"
# What `described` calls them, and where the event log comes from.
_OWN = (("tma1 event logs", "tma1 export"), ("hook payload logs", ""))

_WS = re.compile(r"\s*")
# A binary or foreign file would otherwise report every one of its lines.
MAX_LINE_PROBLEMS = 50


def read_records(path: str | Path) -> Records:
    """Every JSON value in the file with its line; what cannot be read becomes a Problem."""
    name = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        return Records(name, problems=[Problem(name, 0, f"cannot read: {exc}")])
    text = data.decode("utf-8", errors="replace")
    out = Records(name)
    if "\ufffd" in text and b"\xef\xbf\xbd" not in data:
        out.problem(0, "not valid UTF-8; undecodable bytes replaced")
    text = text.removeprefix("\ufeff")
    head = text.lstrip()
    if not head:
        out.problem(0, "empty file")
        return out
    if head.startswith("["):
        _read_array(text, out)
    else:
        _read_jsonl(text, out)
    return out


def _read_jsonl(text: str, out: Records) -> None:
    lines = text.split("\n")
    bad: list[Problem] = []
    for no, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        try:
            out.records.append((no, json.loads(line)))
        except (ValueError, RecursionError) as exc:
            bad.append(Problem(out.path, no, f"not JSON ({_short(exc)}); line skipped"))
    if not out.records and bad:
        # Maybe one pretty-printed JSON object rather than JSONL.
        try:
            out.records.append((1, json.loads(text)))
            return
        except (ValueError, RecursionError):
            pass
    out.problems.extend(bad[:MAX_LINE_PROBLEMS])
    if len(bad) > MAX_LINE_PROBLEMS:
        more = f"… and {len(bad) - MAX_LINE_PROBLEMS} more unreadable lines (not listed)"
        out.problem(bad[MAX_LINE_PROBLEMS].line, more)


def _read_array(text: str, out: Records) -> None:
    """Decode element by element so each one knows its line and one bad element is named."""
    at, line = 0, 1  # a position, and the line it is on

    def line_of(pos: int) -> int:
        # Positions only grow as elements are read: count the newlines since the last one
        # (str.count runs in C; a Python loop over a 10 MB array file took a second).
        nonlocal at, line
        line += text.count("\n", at, pos)
        at = pos
        return line

    dec = json.JSONDecoder()
    i = text.index("[") + 1
    n = len(text)
    while True:
        i = _WS.match(text, i).end()  # type: ignore[union-attr]
        if i >= n:
            out.problem(line_of(n - 1), "JSON array is not closed")
            return
        if text[i] == "]":
            return
        try:
            value, end = dec.raw_decode(text, i)
        except (ValueError, RecursionError) as exc:
            why = f"unreadable array element ({_short(exc)}); the rest of the file is skipped"
            out.problem(line_of(i), why)
            return
        out.records.append((line_of(i), value))
        i = _WS.match(text, end).end()  # type: ignore[union-attr]
        if i < n and text[i] == ",":
            i += 1
            continue
        if i < n and text[i] == "]":
            return
        out.problem(line_of(min(i, n - 1)), "expected ',' or ']' in the JSON array")
        return


def _short(exc: BaseException) -> str:
    return str(exc).split("\n", 1)[0][:120]


# --- the formats ---------------------------------------------------------------------


def format_of(converter: str) -> str:
    """The name of the agent format whose converter is the module `converter` (a converter
    names its output by it: `FORMAT = format_of(__name__)`)."""
    names = [f.name for s in SPECS.values() for f in s.replay if f.converter == converter]
    if len(names) != 1:
        raise LookupError(f"{len(names)} replay formats name {converter} as their converter")
    return names[0]


def described(*, where: bool) -> str:
    """Every format replay reads, as the help lists them: "tma1 event logs (tma1 export),
    hook payload logs, …, Gemini CLI chat files (~/.gemini/…) and Copilot CLI session logs
    (…)"; without `where`, their titles alone."""
    kinds = [*_OWN, *((f.title or f.name, f.where) for s in SPECS.values() for f in s.replay)]
    names = [f"{title} ({hint})" if where and hint else title for title, hint in kinds]
    return f"{', '.join(names[:-1])} and {names[-1]}"


# --- detection -------------------------------------------------------------------------


def _agent_votes() -> list[tuple[str, Vote]]:
    """Each agent's recorded-session formats (`AgentSpec.replay`), in the order asked."""
    formats = sorted((f for s in SPECS.values() for f in s.replay), key=lambda f: f.order)
    return [(f.name, f.vote) for f in formats]


_VOTES = _agent_votes()


def _vote(value: Any) -> str | None:
    """The format this record looks like: tma1's own event log and bare hook payloads
    (whatever the agent), then the first agent format that claims it."""
    if not isinstance(value, dict):
        return None
    t = value.get("type")
    if t in ("file_change", "usage") and "ts" in value:
        return EVENTLOG
    if "hook_event_name" in value:
        return EVENTLOG if "ts" in value else CLAUDE_HOOKLOG
    return next((name for name, vote in _VOTES if vote(value)), None)


def converter(fmt: str) -> Callable[[Records], Converted] | None:
    """The `convert` of an agent's format (its `ReplayFormat.converter` module), or None."""
    for spec in SPECS.values():
        for f in spec.replay:
            if f.name == fmt:
                module = importlib.import_module(f.converter)
                return cast(Callable[[Records], Converted], module.convert)
    return None


def detect(records: Records, sample: int = 200) -> str | None:
    """The format most of the first `sample` records look like, or None."""
    # Ties go to the format voted for first.
    votes = Counter(fmt for _, value in records.records[:sample] if (fmt := _vote(value)))
    return votes.most_common(1)[0][0] if votes else None
