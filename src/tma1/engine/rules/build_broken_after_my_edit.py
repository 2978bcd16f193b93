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
code fails — until it stops without re-running it (below).

At a Stop (design §2.22, turn 3) it also blocks, once and whatever the count, on a *fresh
break* (a compile or test check run after the session's last edit, in this turn, failing
with a verdict and not with errors it had before the session's first edit) and on an
*unverified fix* (a check whose newest run failed naming a file the session edited after
it, with no covering run since: "re-run X: it failed at T on errors in F, which you
changed since") — unless the final message hands it back, or the newest attempt had no
verdict (`stop_findings`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from tma1.checks import error_line, error_line_of_file, lines_in, located_in
from tma1.checks.locations import error_text
from tma1.engine.anomaly import Anomaly, Channel, Kind, Severity
from tma1.engine.checkruns import CheckRuns, Run, at_stop, check_runs, compile_error
from tma1.engine.following import READ_OF_RELATED
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
from tma1.engine.spec import RuleSpec, Severities
from tma1.engine.supersession import errors_of, supersedes
from tma1.engine.window import RuleConfig, SessionWindow
from tma1.events import EDITED_LINES, WRITE_TOOLS
from tma1.paths import display_path, norm_path
from tma1.storable.editlines import near
from tma1.storable.textmemo import text_cache

_DIGITS = re.compile(r"\d+")
HIGH_AT = 3
# A finding this many lines from what an edit wrote is still the edit's (a changed line
# shifts its neighbours' findings; the linter may point at the statement's first line).
NEAR_LINES = 3


def build_broken_after_my_edit(
    window: SessionWindow, now: int, config: RuleConfig
) -> list[Anomaly]:
    runs = check_runs(window, now)
    if not runs.open_failures:
        return []
    stopping = at_stop(window, now)
    found = _located(window, now, runs, stopping)
    if stopping:
        found += stop_findings(window, now, runs, found)
    return found


def _located(window: SessionWindow, now: int, runs: CheckRuns, stopping: bool) -> list[Anomaly]:
    """The rule proper: open checks failing at a place in a file the session edited."""
    since = now - RULE_WINDOW_MS
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
        # A re-run with no verdict since (refused, crashed on its environment): a block
        # cannot make it pass (design §2.22).
        blocks = stopping and not attempted_since(runs, newest)
        found.append(_finding(window, ident, newest, hit, streak, blocks, fresh[hit[0]]))
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
        for ln in error_text(output).splitlines()
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
            for ln in error_text(output).splitlines()
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
        severity=SPEC.severity.of(escalate=high),
        channel=(Channel.STOP_BLOCK if high else Channel.USER_PROMPT_SUBMIT).value,
        evidence=evidence,
        suggestion=suggestion,
        related_files=tuple(files),
        subject=ident,
        last_evidence_ts=newest.ts,
        session_id=window.session_id,
        extra={"check": newest.check},
    )


# --- the Stop that matters (design §2.22) ----------------------------------------------------


def stop_findings(
    window: SessionWindow, now: int, runs: CheckRuns, found: list[Anomaly]
) -> list[Anomaly]:
    """At a Stop, whatever the failure count (each once: only what this turn did counts):

    - a *fresh break*: a check run after the session's last edit, in this turn, whose
      newest run failed with a verdict, and not with the errors it already had before the
      session's first edit (pre-existing) or at an earlier Stop — not a linter or type
      checker, which lists every file's findings, old ones too: for those the rule's
      located reading above decides (issue 15's pattern 4: a lint run listing files the
      agent never touched is not its failure);
    - an *unverified fix*: a check whose newest run failed naming a file the session
      edited after that run (in this turn), with no run of a covering check since.

    A check whose newest attempt had no verdict (the sandbox refused it, the runner crashed
    on its environment) is left alone: the agent tried, and a block cannot make it pass.
    A final message that hands the check back (`_handback`) is the user's answer already.
    `found`: the rule's own findings at this Stop — their checks, and an unverified fix
    of files a failing check already names, are told there."""
    events = visible(window.events, now)
    calls = [c for c in edits(events) if any(is_source(f) for f in c.files)]
    if not calls:
        return []
    stops = [e.ts for e in events if e.hook_event_name == "Stop" and e.ts < now]
    turn = max(stops, default=-1)
    first_edit, last_edit = calls[0].ts, calls[-1].ts
    edited: dict[str, int] = {}  # source file → the session's last edit of it
    touched: list[tuple[int, frozenset[str]]] = []  # each edit's time and source files
    for c in calls:
        paths = frozenset(norm_path(f, window.project) for f in c.files if is_source(f))
        touched.append((c.ts, paths))
        edited.update(dict.fromkeys(paths, c.ts))
    told = {a.subject for a in found}
    told_files = {f for a in found for f in a.related_files}
    whole = _holds_whole_session(window)
    out: list[Anomaly] = []
    # Fresh breaks first: an unverified fix of a file a fresh failure names is told there.
    for ident, newest in sorted(runs.open_failures.items(), key=lambda kv: -kv[1].ts):
        if ident in told or attempted_since(runs, newest):
            continue
        output = newest.event.tool_result or ""
        if newest.ts > last_edit and newest.ts > turn:
            if _pre_existing(runs, newest, max(first_edit, turn), window.failing_at_start):
                continue
            if not whole and not _passed_before(runs, newest):
                # The session's first edit may lie before the window: whether the check
                # already failed then cannot be told, and no run in the window shows it
                # working. "Broken by your edit" would be a guess (templar-373740ff 19:49).
                continue
            if newest.check.lints:
                # A linter lists every file's findings, old ones too: which are the edit's
                # is the rule's own located reading (near the edit, not said before).
                continue
            files = [p for p in edited if located_in(output, p)]
            if (
                not files
                and not _names_a_module_of(newest, edited)
                and _unattributed_test_failure(
                    runs, newest, max(first_edit, turn), window.failing_at_start
                )
            ):
                # A test run first seen failing after the edits, in tests and code the
                # session never touched, with no compile error: nothing says the session
                # broke it rather than found it broken (gallifrey-d50e1daf 21:40).
                continue
            pattern = "fresh"
        else:
            files = [p for p, t in edited.items() if t > newest.ts and located_in(output, p)]
            if not files:
                continue
            # Once: a Stop since the first such edit already had this to say.
            fixed_from = min(t for t, paths in touched if t > newest.ts and paths & set(files))
            if any(t > fixed_from for t in stops) or set(files) <= told_files:
                continue
            pattern = "unverified"
        terms = check_terms(newest.check, files, newest.event.tool_error_summary)
        if handed_back(window, now, newest.ts, terms):
            continue
        out.append(_stop_finding(window, ident, newest, files, pattern, edited, last_edit))
        told_files.update(files)
    return out


def attempted_since(runs: CheckRuns, newest: Run) -> bool:
    """A run of a check covering `newest`'s came after it — with no verdict, since a pass
    would have closed it and a failure would be the newest (a sandbox refusal, a crash)."""
    return any(r.ts > newest.ts and supersedes(r.check, newest.check) for r in runs.runs)


def _holds_whole_session(window: SessionWindow) -> bool:
    """The window reaches back to the session's first event: its first edit is in it."""
    start = window.session_start_ts
    return start is not None and bool(window.events) and window.events[0].ts <= start


def _passed_before(runs: CheckRuns, newest: Run) -> bool:
    """A run covering `newest`'s check passed before it in the window: the check worked
    here, so what made it fail came after."""
    return any(
        r.ts < newest.ts and r.passed and supersedes(r.check, newest.check) for r in runs.runs
    )


# A test runner's run (not a build): its failures are tests' verdicts, which a compile
# error in its output overrides (a test run that does not compile is a broken build).
_TEST_RUNNER = re.compile(
    r"\btest|\bspec\b|\be2e\b|jest|vitest|mocha|playwright|cypress|rspec|phpunit|\bpytest"
)


_STEM_SUFFIX = re.compile(r"(?:\.(?:test|spec|stories))?\.[A-Za-z0-9]+$")


def _names_a_module_of(newest: Run, edited: Mapping[str, int]) -> bool:
    """The failure's error lines name a module the session edited, though not at a
    file:line: a test of it (`test_pricing.py` for `pricing.py`, `cart.test.ts` for
    `cart.ts`), its name in a failing test's title. Error lines only: a passing test's
    log (`component=monitor`) names nothing."""
    text = "\n".join(errors_of(newest.event)).lower()
    for path in edited:
        stem = _STEM_SUFFIX.sub("", basename(path)).lower()
        if len(stem) >= 3 and re.search(rf"(?<![a-z0-9]){re.escape(stem)}(?![a-z0-9])", text):
            return True
    return False


def _unattributed_test_failure(
    runs: CheckRuns, newest: Run, before: int, at_start: Mapping[str, frozenset[str]]
) -> bool:
    """`newest` is a test run whose failure names no file the session edited, reports no
    compile error, and has no baseline: no covering run passed before it, none of the
    check failed before `before` (the session's first edit, or this turn's start) nor was
    open in the project when the session began (`at_start`: then its new errors are). A
    careful reader cannot tell a break the session made from one it walked into: the
    suite was never seen working."""
    if not all(_TEST_RUNNER.search(s.runner) for s in newest.check.steps):
        return False
    if any(compile_error(ln) for ln in error_text(newest.event.tool_result or "").splitlines()):
        return False
    ident = newest.check.identity
    if ident in at_start:
        return False
    if any(r.failed and r.ts < before and r.check.identity == ident for r in runs.runs):
        return False
    return not _passed_before(runs, newest)


def _pre_existing(
    runs: CheckRuns, newest: Run, before: int, at_start: Mapping[str, frozenset[str]]
) -> bool:
    """Runs of the same check failed before `before` with every error the newest run
    reports: before the session's first edit (it found the check broken — in its own runs,
    or in the project's other sessions' runs open when it began, `at_start`), or before
    this turn began (it stopped over these errors already: a block is for a fresh break,
    once)."""
    ident = newest.check.identity
    earlier = [r for r in runs.runs if r.failed and r.ts < before and r.check.identity == ident]
    if not earlier and ident not in at_start:
        return False
    said = frozenset().union(*(errors_of(r.event) for r in earlier), at_start.get(ident, ()))
    return errors_of(newest.event) <= said


def _stop_finding(
    window: SessionWindow,
    ident: str,
    newest: Run,
    files: list[str],
    pattern: str,
    edited: dict[str, int],
    last_edit: int,
) -> Anomaly:
    output = newest.event.tool_result or ""
    command = quote(newest.event.tool_command or ident, 100)
    shown = ", ".join(display_path(f, window.project) for f in files[:3]) + (
        f" and {len(files) - 3} more" if len(files) > 3 else ""
    )
    failed_at = clock_time(newest.ts)
    if pattern == "fresh":
        err = (error_line_of_file(output, files[0]) if files else None) or (
            newest.event.tool_error_summary or error_line(output)
        )
        said = f": {quote(err, 140)}" if err else "."
        evidence = (
            f"The check {quote(ident, 80)} failed at {failed_at}, after your last edit "
            f"({clock_time(last_edit)}), and you are stopping with it failing{said}"
        )
        fix = (
            f"Fix what {quote(err, 120)} points at"
            if err
            else f"Read what {command} reports, fix it"
        )
        suggestion = f"{fix}, then re-run {command} before you stop."
        evidence_ts = newest.ts
    else:
        evidence = (
            f"The newest run of {quote(ident, 80)} failed at {failed_at} on errors in {shown}; "
            f"you changed {'it' if len(files) == 1 else 'them'} since (last at "
            f"{clock_time(max(edited[f] for f in files))}) and the check has not run again."
        )
        suggestion = (
            f"Re-run {command}: it failed at {failed_at} on errors in {shown}, "
            "which you changed since."
        )
        evidence_ts = max(edited[f] for f in files)
    return Anomaly(
        kind=Kind.BUILD_BROKEN_AFTER_MY_EDIT.value,
        severity=SPEC.severity.of(escalate=True),
        channel=Channel.STOP_BLOCK.value,
        evidence=evidence,
        suggestion=suggestion,
        related_files=tuple(files),
        subject=ident,
        last_evidence_ts=evidence_ts,
        session_id=window.session_id,
        extra={"check": newest.check, "stop": pattern},
    )


SPEC = RuleSpec(
    kind=Kind.BUILD_BROKEN_AFTER_MY_EDIT.value,
    run=build_broken_after_my_edit,
    channels=frozenset({Channel.USER_PROMPT_SUBMIT.value, Channel.STOP_BLOCK.value}),
    severity=Severities(
        Severity.MEDIUM,
        escalated=Severity.HIGH,
        when="at 3+ failing runs, or at a Stop over a fresh break or an unverified fix",
    ),
    resolution=covering_pass,
    follow=READ_OF_RELATED,
    # Its subject is a check's identity, as repeated_failed_build's (design §2.15).
    family="failing_check",
    fires_when=(
        "a check's newest failure (one with a verdict about the code) has an error in a "
        "file it edited in the last 30 min, not there before the edit; at a Stop, once: a "
        "fresh break, or a fix it never re-ran"
    ),
)
