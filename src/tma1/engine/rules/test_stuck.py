"""`test_stuck` — the same test failed in 3+ runs within 30 minutes in one lane, still open.

Test ids come from the failure output (design §2.11), masked failures included; one
output counts each id once (the parser already deduplicates `event.test_ids`). Design
§2.15–2.16: runs are counted per lane (one agent re-running, not three sub-agents once
each), and the test must still be *open*: no later run — any lane, any spelling — reported
it passing (`PASS file`, `✓ name`, `ok pkg`, `PASSED id`), and no later run of a check
covering the failing one passed whole (a jest file re-run with `--verbose`, or the whole
`npm test` suite). A finding the agent is visibly working on — it edited the test's file
or a file the failure points into since the last failing run — waits (pattern 7).
"""

from __future__ import annotations

from collections.abc import Sequence

from tma1.checks import error_line_for_test, error_locations, file_of_test_id, reported_passing
from tma1.engine.anomaly import Anomaly, Channel, Kind, Severity
from tma1.engine.checkruns import Run, at_stop, check_runs, stopped_since
from tma1.engine.following import (
    Call,
    EmitRef,
    Follow,
    is_edit_of,
    is_read_of,
    is_rerun,
)
from tma1.engine.resolution import test_passed
from tma1.engine.rules._support import (
    RULE_WINDOW_MS,
    clock_time,
    edits,
    quote,
    visible,
)
from tma1.engine.spec import RuleSpec, Severities
from tma1.engine.window import RuleConfig, SessionWindow
from tma1.events import READ_TOOLS, SHELL_TOOLS, WRITE_TOOLS, absolutize
from tma1.paths import norm_path

REPEATS = 3


def test_stuck(window: SessionWindow, now: int, config: RuleConfig) -> list[Anomaly]:
    runs = check_runs(window, now)
    since = now - RULE_WINDOW_MS
    by_lane: dict[tuple[str, str], list[Run]] = {}
    for r in runs.runs:
        if r.failed and r.ts >= since:
            for tid in dict.fromkeys(r.event.test_ids):
                by_lane.setdefault((tid, r.lane), []).append(r)
    candidates = {k: v for k, v in by_lane.items() if len(v) >= REPEATS}
    if not candidates:
        return []
    found: dict[str, Anomaly] = {}
    stopping = at_stop(window, now)
    # Each candidate test's newest failing run (any lane), and what ran after it.
    wanted = {tid for tid, _ in candidates}
    newest_at: dict[str, int] = {}
    for i, r in enumerate(runs.runs):
        if r.failed:
            for tid in r.event.test_ids:
                if tid in wanted:
                    newest_at[tid] = i
    for (tid, _lane), fails in candidates.items():
        if tid in found:
            continue
        at = newest_at[tid]
        newest = runs.runs[at]
        if runs.closed(newest) or any(
            r.event.passed_test_ids and reported_passing(tid, r.event.passed_test_ids)
            for r in runs.runs[at + 1 :]
        ):
            continue
        finding = _finding(window, tid, fails, newest)
        if not stopping and _mid_fix(window, now, newest, finding.related_files):
            continue
        found[tid] = finding
    return list(found.values())


# pytest would collect the rule function above as a test if it imported this module.
test_stuck.__test__ = False  # type: ignore[attr-defined]


def _mid_fix(window: SessionWindow, now: int, newest: Run, test_files: tuple[str, ...]) -> bool:
    """The agent edited the test's file, or a file the failure points into, since — and
    has not ended its turn since: an agent that stopped after an edit it never re-ran is
    not mid-fix, it is done (and the test may well still fail)."""
    named = set(test_files)
    for ref in error_locations(newest.event.tool_result or ""):
        named.add(norm_path(absolutize(ref.path, newest.event.cwd), window.project))
    for call in edits(visible(window.events, now, newest.ts + 1)):
        if any(norm_path(f, window.project) in named for f in call.files):
            return not stopped_since(window, now, call.ts)
    return False


def _finding(window: SessionWindow, test_id: str, fails: list[Run], newest: Run) -> Anomaly:
    events = [r.event for r in fails]
    idents = list(dict.fromkeys(r.check.identity for r in fails))
    runs = (
        f" of {quote(idents[0], 80)}"
        if len(idents) == 1
        else f" across {len(idents)} different checks"
    )
    evidence = (
        f"Test {quote(test_id, 120)} failed in {len(fails)} runs{runs} in the last 30 min "
        f"(first {clock_time(events[0].ts)}, last {clock_time(events[-1].ts)}) and no run "
        "has passed it since."
    )
    err = next(
        (e for f in reversed(events) if (e := error_line_for_test(f.tool_result or "", test_id))),
        None,
    )
    said = f" ({quote(err, 120)})" if err else ""
    suggestion = (
        f"Read the failing assertion of {quote(test_id, 120)}{said} and the code it exercises "
        "before running it again."
    )
    test_file = file_of_test_id(test_id)
    related = (
        (norm_path(absolutize(test_file, events[-1].cwd), window.project),) if test_file else ()
    )
    return Anomaly(
        kind=Kind.TEST_STUCK.value,
        severity=SPEC.severity.of(),
        channel=Channel.USER_PROMPT_SUBMIT.value,
        evidence=evidence,
        suggestion=suggestion,
        related_files=related,
        subject=test_id,
        last_evidence_ts=events[-1].ts,
        session_id=window.session_id,
        extra={"check": newest.check},
    )


def _test_read_or_not_rerun(
    emit: EmitRef, span: Sequence[Call], tool_calls: Sequence[Call], acted: bool
) -> bool:
    files = list(emit.related_files)
    if tf := file_of_test_id(emit.subject, guess=True):
        files.append(tf)
    if any(is_read_of(c, files) or is_edit_of(c, files) for c in tool_calls):
        return True
    prefixes = emit.test_commands
    return acted and bool(prefixes) and not any(is_rerun(c, prefixes) for c in tool_calls)


SPEC = RuleSpec(
    kind=Kind.TEST_STUCK.value,
    run=test_stuck,
    channels=frozenset({Channel.USER_PROMPT_SUBMIT.value}),
    severity=Severities(Severity.MEDIUM),
    resolution=test_passed,
    follow=Follow(
        action="a Read/Edit of the failing test's file, or no re-run of the test command",
        check=_test_read_or_not_rerun,
        tools=READ_TOOLS | WRITE_TOOLS | SHELL_TOOLS,
        # The rule counts failures of the last 30 min (seed); the failing command is looked
        # for in that same span before the emit.
        test_lookback_ms=RULE_WINDOW_MS,
    ),
    fires_when="the same test failed in 3+ runs in 30 min",
)
