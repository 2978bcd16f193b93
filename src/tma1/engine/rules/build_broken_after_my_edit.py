"""`build_broken_after_my_edit` — an open check fails at a place in a file this session
just edited.

Design §2.15. An *open* check (its newest run failed, no later covering run passed, any
lane) whose newest failure has an *error location* (`file:line` of a compiler, linter or
test stack-frame error line — not a coverage-table row, a passing test's line or a
warning) in a source file this session edited in the last 30 minutes, with:

- that failure at or after the agent's first edit of the file in the window (the failure
  that prompted the edit was not caused by it);
- for a lint or type-check run (which lists every finding of a file), a reported line of
  the file inside or within 3 lines of what the session's edits wrote (Claude Code's
  `structuredPatch`; when an edit's lines are unknown — Codex patches — any line counts):
  S1008 at optimizer.go:192 is not the edit of lines 72–78;
- the location not pre-existing: no run of the same check before that first edit already
  reported the same error about the file (line numbers blanked: edits move them) — a lint
  run listing 21 files the agent never broke is not "your" failure.

One finding per check (subject = its identity) naming every such file, most recently
failing first; the suggestion quotes an error line *of that file*. Severity: medium,
high from 3 failing runs of the check since the first edit (the seed's). At a Stop it is
high — it blocks — whatever the count, when the newest run failed after the session's last
edit of the named file: stopping with a build the agent just broke is the harm the stop
channel exists for (on recorded sessions agents announced success right then). A check
the agent edited again after its newest failure is not re-told until it runs again: the
agent is visibly fixing it (pattern 7), and its newest run no longer says the current
code fails (at a Stop too: the design's "a check the agent never re-ran after its edit
counts only if its newest run came after that edit").
"""

from __future__ import annotations

import re

from tma1.checks import error_line_of_file, lines_in, located_in
from tma1.checks.locations import _error_text
from tma1.editlines import near
from tma1.engine.anomaly import Anomaly, Channel, Kind, Severity
from tma1.engine.checkruns import Run, at_stop, check_runs
from tma1.engine.resolution import covering_pass
from tma1.engine.rules._handback import check_terms, handed_back
from tma1.engine.rules._support import (
    RULE_WINDOW_MS,
    ToolCall,
    basename,
    clock_time,
    edits,
    is_source,
    mentions_path,
    plural,
    quote,
    visible,
)
from tma1.engine.spec import RuleSpec
from tma1.engine.window import RuleConfig, SessionWindow
from tma1.events import EDITED_LINES, WRITE_TOOLS
from tma1.paths import display_path, norm_path
from tma1.textmemo import text_cache

_DIGITS = re.compile(r"\d+")
HIGH_AT = 3
# A finding this many lines from what an edit wrote is still the edit's (a changed line
# shifts its neighbours' findings; the linter may point at the statement's first line).
NEAR_LINES = 3


def build_broken_after_my_edit(
    window: SessionWindow, now: int, config: RuleConfig
) -> list[Anomaly]:
    since = now - RULE_WINDOW_MS
    runs = check_runs(window, now)
    open_checks = {i: r for i, r in runs.open_failures.items() if r.ts >= since}
    if not open_checks:
        return []
    edit_times: dict[str, list[int]] = {}
    calls = [c for c in edits(visible(window.events, now)) if c.ts >= since]
    for call in calls:
        for f in call.files:
            if is_source(f):
                edit_times.setdefault(norm_path(f, window.project), []).append(call.ts)
    if not edit_times:
        return []
    stopping = at_stop(window, now)
    wrote: dict[str, list[tuple[int, int]] | None] | None = None  # asked for lint runs only
    found = []
    for ident, newest in open_checks.items():
        output = newest.event.tool_result or ""
        hit: list[str] = []
        fresh: dict[str, frozenset[str]] = {}
        for path, times in edit_times.items():
            first = min(times)
            if newest.ts < first or located_in(output, path) is None:
                continue
            if newest.check.lints:
                if wrote is None:
                    wrote = _lines_written(window, now, since, calls)
                if not _near_an_edit(output, path, wrote.get(path)):
                    continue  # a lint finding in lines the agent did not touch is not its own
            said = _said_before(runs.runs, ident, first, path)
            now_said = _file_lines(output, path)
            if said and now_said and now_said <= said:
                continue  # every error about the file predates the agent's edit
            hit.append(path)
            fresh[path] = now_said - said
        if not hit:
            continue
        if any(max(edit_times[p]) > newest.ts for p in hit):
            # Edited since it failed: its newest run says nothing of the current code. The
            # agent is fixing it (pattern 7); a re-run will say whether it did (design
            # §2.15: a check counts only if its newest run came after the edit).
            continue
        terms = check_terms(newest.check, hit, newest.event.tool_error_summary)
        if handed_back(window, now, newest.ts, terms):
            continue  # the agent stopped saying so: the user knows, a block is no news
        first_edit = min(min(edit_times[p]) for p in hit)
        streak = [
            r
            for r in runs.runs
            if r.failed and r.check.identity == ident and r.ts >= first_edit
            and not runs.closed(r)
        ]  # fmt: skip
        found.append(_finding(window, ident, newest, hit, streak, stopping, fresh[hit[0]]))
    return found


def _lines_written(
    window: SessionWindow, now: int, since: int, calls: list[ToolCall]
) -> dict[str, list[tuple[int, int]] | None]:
    """Per edited source file, the line ranges the session's edits wrote since `since`;
    None when any of its edits does not say (a Codex patch, a response without a
    `structuredPatch`, an edit whose result is not in yet)."""
    posts: dict[str, list[tuple[int, int]] | None] = {}
    for e in window.events:
        if (
            e.tool_name in WRITE_TOOLS
            and e.event_type == "PostToolUse"
            and e.tool_use_id
            and since <= e.ts <= now
        ):
            ranges = e.metadata.get(EDITED_LINES)
            posts[e.tool_use_id] = (
                [(int(a), int(b)) for a, b in ranges] if isinstance(ranges, list) else None
            )
    out: dict[str, list[tuple[int, int]] | None] = {}
    for call in calls:
        ranges = posts.get(call.tool_use_id) if call.tool_use_id else None
        for f in call.files:
            path = norm_path(f, window.project)
            known = out.get(path, [])
            out[path] = None if ranges is None or known is None else known + ranges
    return out


def _near_an_edit(output: str, path: str, ranges: list[tuple[int, int]] | None) -> bool:
    """The run reports a line of `path` inside or next to what the session's edits wrote;
    True when that is unknown (the edit's lines, or the finding's)."""
    if ranges is None:
        return True
    lines = lines_in(output, path)
    return not lines or any(near(n, ranges, NEAR_LINES) for n in lines)


def _said_before(runs: list[Run], ident: str, first_edit: int, path: str) -> frozenset[str]:
    """What runs of the same check reported about `path` before the agent first edited it
    (pre-existing errors: not the edit's)."""
    said: set[str] = set()
    for r in runs:
        if r.ts >= first_edit:
            break
        if r.failed and r.check.identity == ident:
            said |= _file_lines(r.event.tool_result or "", path)
    return frozenset(said)


@text_cache(maxsize=2048)
def _file_lines(output: str, path: str) -> frozenset[str]:
    """The output's error lines about `path`, numbers blanked (edits move line numbers)."""
    name = basename(path)
    if name not in output:
        return frozenset()
    return frozenset(
        _DIGITS.sub("#", ln.strip())
        for ln in _error_text(output).splitlines()
        if name in ln and mentions_path(ln, path)
    )


def _finding(
    window: SessionWindow,
    ident: str,
    newest: Run,
    files: list[str],
    streak: list[Run],
    stopping: bool,
    fresh: frozenset[str],
) -> Anomaly:
    n = max(len(streak), 1)
    output = newest.event.tool_result or ""
    # A file the output points into first (every one does; keep the edit order stable).
    first_file = files[0]
    ref = located_in(output, first_file)
    err = error_line_of_file(output, first_file)
    # Quote an error the edit caused, not one the file already had.
    new_line = next(
        (
            ln.strip()
            for ln in _error_text(output).splitlines()
            if _DIGITS.sub("#", ln.strip()) in fresh and located_in(ln, first_file)
        ),
        None,
    )
    old = _file_lines(output, first_file) - fresh
    if new_line is not None and (err is None or _DIGITS.sub("#", err) in old):
        err, ref = new_line, located_in(new_line, first_file)
    if err is not None and (quoted := located_in(err, first_file)) is not None:
        ref = quoted  # "Fix F:N" names the line the quote is about
    where = str(ref) if ref else display_path(first_file, window.project)
    shown = [display_path(f, window.project) for f in files]
    named = ", ".join(shown[:5]) + (f" and {len(shown) - 5} more" if len(shown) > 5 else "")
    command = quote(newest.event.tool_command or ident, 100)
    # `stopping`: at a Stop, with the newest run failing after the last edit of the named
    # files — the agent is stopping on a build it broke.
    high = n >= HIGH_AT or stopping
    evidence = (
        f"The check {quote(ident, 80)} failed {plural(n, 'time')} since "
        f"{clock_time(streak[0].ts if streak else newest.ts)} (last at "
        f"{clock_time(newest.ts)}, after your last edit) at "
        f"{plural(len(files), 'file')} you had just edited: {named}"
        + (", and you are stopping with it failing." if stopping else ".")
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
        subject=ident,
        last_evidence_ts=newest.ts,
        session_id=window.session_id,
        extra={"check": newest.check},
    )


SPEC = RuleSpec(
    kind=Kind.BUILD_BROKEN_AFTER_MY_EDIT.value,
    run=build_broken_after_my_edit,
    channels=frozenset({Channel.USER_PROMPT_SUBMIT.value, Channel.STOP_BLOCK.value}),
    severity="medium; high at 3+ failing runs, or at a Stop right after the edit broke it",
    resolution=covering_pass,
    follow_action="a Read of a related file",
)
