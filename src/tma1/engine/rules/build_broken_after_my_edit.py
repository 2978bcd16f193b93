"""`build_broken_after_my_edit` — a build/test command fails on files the agent just edited.

Seed: the agent edited source file F in the last 30 min, then a shell failure within
±10 min of an edit of F mentions F's basename in its command or output. Design §2.2: one
finding per failing command (subject = its 60-char prefix) naming every edited file its
failures mention, and failures count only from the agent's first edit of F in the window
(the failure that prompted the edit was not caused by it). High at 3+ failures.

What the real sessions taught (docs/evaluation.md): a mention must name F (not another
directory's file of the same name) in the output, or in a build/test step of the
command; complaints F already had before the agent first touched it are not the edit's;
file plumbing (`git stash pop`) is no build; and a check that passed since is fixed —
only the current failure streak counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from tma1.checks import (
    error_line,
    has_failure_markers,
    ref_for_file,
    runs_build_or_test,
    runs_only_plumbing,
    split_shell,
)
from tma1.clock import MINUTE_MS
from tma1.engine.anomaly import Anomaly, Channel, Kind, Severity
from tma1.engine.rules._support import (
    RULE_WINDOW_MS,
    Streaks,
    basename,
    clock_time,
    display_path,
    edits,
    is_source,
    mentions,
    mentions_path,
    norm_path,
    plural,
    quote,
    shell_failures,
    visible,
)
from tma1.engine.window import RuleConfig, SessionWindow
from tma1.events import HookEvent

EDIT_DISTANCE_MS = 10 * MINUTE_MS
_DIGITS = re.compile(r"\d+")
HIGH_AT = 3


@dataclass(slots=True)
class _Group:
    prefix: str
    hits: list[tuple[HookEvent, list[str]]] = field(default_factory=list)  # failure, files


def build_broken_after_my_edit(
    window: SessionWindow, now: int, config: RuleConfig
) -> list[Anomaly]:
    since = now - RULE_WINDOW_MS
    events = visible(window.events, now)
    all_failures = shell_failures(events)
    if not any(f.ts >= since for f in all_failures):
        return []  # no recent failure: nothing any edit could have broken
    edit_times: dict[str, list[int]] = {}
    for call in edits(events):
        if call.ts < since:
            continue
        for f in call.files:
            if is_source(f):
                edit_times.setdefault(norm_path(f, window.project), []).append(call.ts)
    if not edit_times:
        return []

    said_before: dict[str, frozenset[str]] = {}  # per file, filled on first need

    def already_broken(output: str, path: str) -> bool:
        """Every complaint about the file was made before the agent first touched it.

        A lint run listing a file's old warnings after an edit elsewhere in that file is
        not a build the edit broke.
        """
        if path not in said_before:
            first = min(edit_times[path])
            said: set[str] = set()
            for f in all_failures:
                if f.ts < first:
                    said |= _file_lines(_own_output(f.tool_result or ""), path)
            said_before[path] = frozenset(said)
        if not said_before[path]:
            return False
        now_said = _file_lines(output, path)
        return bool(now_said) and now_said <= said_before[path]

    # A file can only be named where its basename occurs at all: a substring test rules
    # out most (failure, file) pairs before the word-boundary and path checks.
    edited = [(path, basename(path), times) for path, times in edit_times.items()]
    groups: dict[str, _Group] = {}
    for fail in (f for f in all_failures if f.ts >= since):
        command = fail.tool_command or ""
        if command and runs_only_plumbing(command):
            continue  # `git stash pop` listing the file is no broken build
        output = _own_output(fail.tool_result or "")
        hit = [
            path
            for path, name, times in edited
            if (name in output or name in command)
            and _caused_by_edit(fail.ts, times)
            and _names_file(command, output, path)
            and not already_broken(output, path)
        ]
        if hit:
            prefix = fail.tool_command_prefix or (fail.tool_name or "shell")
            groups.setdefault(prefix, _Group(prefix)).hits.append((fail, hit))

    if not groups:
        return []
    streaks = Streaks(events)
    found = []
    for group in groups.values():
        # Fixed since: the same check passed after these failures.
        streak = {id(f) for f in streaks.current([f for f, _ in group.hits])}
        group.hits = [(f, files) for f, files in group.hits if id(f) in streak]
        if group.hits:
            found.append(_finding(window, group))
    return found


@lru_cache(maxsize=2048)
def _file_lines(output: str, path: str) -> frozenset[str]:
    """The output's lines about `path`, numbers blanked (edits move line numbers)."""
    name = basename(path)
    if name not in output:
        return frozenset()
    return frozenset(
        _DIGITS.sub("#", ln.strip())
        for ln in output.splitlines()
        if name in ln and mentions_path(ln, path)
    )


@lru_cache(maxsize=512)
def _own_output(output: str) -> str:
    """The output without npm/yarn's echo of the script (`> vitest run x.test.ts`)."""
    if "\n> " not in output and not output.startswith("> "):
        return output
    return "\n".join(ln for ln in output.splitlines() if not ln.startswith("> "))


# Every detection asks again about each recent failure and edited file.
@lru_cache(maxsize=2048)
def _names_file(command: str, output: str, path: str) -> bool:
    """The output names the file, or a build/test step of the command does and the
    output shows a build/test failure.

    (`npm test x.test.ts` answering `vitest: command not found` names the file, but the
    failure is the environment's, not the edit's; in `npm run build && node x.js` the
    build's errors are not about x.js.)
    """
    if mentions_path(output, path):
        return True
    name = basename(path)
    if not mentions(command, name):
        return False
    return any(
        mentions(segment, name) and runs_build_or_test(segment)
        for segment, _ in split_shell(command)
    ) and has_failure_markers(output)


def _caused_by_edit(fail_ts: int, edit_times: list[int]) -> bool:
    """At or after the first edit of the file, and within ±10 min of one of its edits."""
    if fail_ts < min(edit_times):
        return False
    return any(abs(fail_ts - t) <= EDIT_DISTANCE_MS for t in edit_times)


def _finding(window: SessionWindow, group: _Group) -> Anomaly:
    failures = [f for f, _ in group.hits]
    last_fail_by_file: dict[str, int] = {}
    for fail, files in group.hits:
        for path in files:
            last_fail_by_file[path] = fail.ts
    n = len(failures)
    high = n >= HIGH_AT
    latest = failures[-1]
    output = latest.tool_result or ""
    # Most recently failing first; among equals, a file the output points into first.
    files = sorted(
        last_fail_by_file,
        key=lambda p: (-last_fail_by_file[p], ref_for_file(output, p) is None),
    )
    first_file = files[0]
    where = ref_for_file(output, first_file) or display_path(first_file, window.project)
    err = error_line(output, first_file)
    shown = [display_path(f, window.project) for f in files]
    named = ", ".join(shown[:5]) + (f" and {len(shown) - 5} more" if len(shown) > 5 else "")
    command = quote(latest.tool_command or group.prefix, 100)
    evidence = (
        f"{command} failed {plural(n, 'time')} since {clock_time(failures[0].ts)} "
        f"(last at {clock_time(latest.ts)}), naming {plural(len(files), 'file')} you had "
        f"just edited: {named}."
    )
    fix = f"Fix {where}" + (f" ({quote(err, 120)})" if err else "")
    suggestion = f"{fix}, then re-run {command}."
    return Anomaly(
        kind=Kind.BUILD_BROKEN_AFTER_MY_EDIT.value,
        severity=(Severity.HIGH if high else Severity.MEDIUM).value,
        channel=(Channel.STOP_BLOCK if high else Channel.USER_PROMPT_SUBMIT).value,
        evidence=evidence,
        suggestion=suggestion,
        related_files=tuple(files),
        subject=group.prefix,
        last_evidence_ts=latest.ts,
        session_id=window.session_id,
    )
