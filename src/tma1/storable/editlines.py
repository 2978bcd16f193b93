"""Which lines of a file an edit wrote, from the edit's own tool response.

A lint or type-check run lists every finding of a file, old ones included; whether the
agent's edit caused one depends on where the edit was (issue 15: staticcheck S1008 at
optimizer.go:192 was blamed on an edit of lines 72–78). Claude Code's Edit/MultiEdit/
Write responses carry a `structuredPatch` (unified-diff hunks with line numbers); a Write
that creates a file wrote all of it. Codex's apply_patch hunks carry context lines but no
line numbers; Codex 0.17x writes the patch's unified diff, with line numbers, to the
session's rollout (`diff_ranges` reads it; tma1.sensors.codex_exit finds it). The lines of
any edit that says neither are unknown (None).
"""

from __future__ import annotations

import re
from typing import Any

WHOLE_FILE = (1, 10**9)
MAX_RANGES = 64


def _hunk_range(hunk: dict[str, Any]) -> tuple[int, int] | None:
    """The new-file lines a hunk changed (context lines left out); a pure deletion is the
    line where it was."""
    start = hunk.get("newStart")
    if not isinstance(start, int) or isinstance(start, bool):
        return None
    lines = hunk.get("lines")
    if not isinstance(lines, list):
        count = hunk.get("newLines")
        n = count if isinstance(count, int) and count > 0 else 1
        return (start, start + n - 1)
    at, changed = start, []
    for line in lines:
        if not isinstance(line, str) or not line:
            at += 1
        elif line[0] == "+":
            changed.append(at)
            at += 1
        elif line[0] == "-":
            changed.append(at)
        else:
            at += 1
    return (min(changed), max(changed)) if changed else None


_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def diff_ranges(diff: str) -> list[tuple[int, int]] | None:
    """The new-file line ranges a unified diff's hunks changed (as `_hunk_range`); None
    when it has no hunk. Each hunk takes the lines its header counts, so file headers
    (`--- a/x`) between hunks are not read as removed lines."""
    found: list[tuple[int, int]] = []
    lines = diff.splitlines()
    i = 0
    while i < len(lines):
        m = _HUNK.match(lines[i])
        i += 1
        if not m:
            continue
        old_left = int(m.group(1)) if m.group(1) is not None else 1
        new_left = int(m.group(3)) if m.group(3) is not None else 1
        body: list[str] = []
        while i < len(lines) and (old_left > 0 or new_left > 0):
            line = lines[i] or " "  # a blank context line may have lost its space
            i += 1
            if line[0] == "\\":  # "\ No newline at end of file"
                continue
            if line[0] in " -":
                old_left -= 1
            if line[0] in " +":
                new_left -= 1
            body.append(line)
        if (r := _hunk_range({"newStart": int(m.group(2)), "lines": body})) is not None:
            found.append(r)
    return found[:MAX_RANGES] if found else None


def edited_lines(tool_name: str | None, tool_response: Any) -> list[tuple[int, int]] | None:
    """The [first, last] new-file line ranges the edit wrote, or None when unknown."""
    if not isinstance(tool_response, dict):
        return None
    patch = tool_response.get("structuredPatch")
    if isinstance(patch, list) and patch:
        found = [r for h in patch if isinstance(h, dict) and (r := _hunk_range(h)) is not None]
        return found[:MAX_RANGES] if found else None
    if tool_name == "Write" and tool_response.get("type") == "create":
        return [WHOLE_FILE]
    return None


def near(line: int, ranges: list[tuple[int, int]], slack: int) -> bool:
    """`line` is inside one of the ranges, or within `slack` lines of one."""
    return any(lo - slack <= line <= hi + slack for lo, hi in ranges)
