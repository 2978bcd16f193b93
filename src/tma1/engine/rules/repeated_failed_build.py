"""`repeated_failed_build` — a check failed 3+ times in 30 minutes in one lane, still open.

Design §2.15–2.16 (a pass spelled differently, `cargo build --release | tail`, ends a
streak of `cargo build 2>&1 | grep …`; three sub-agents each trying a broken script once
are no loop):

- failures are runs of one *check* (runner + target + working directory, however
  spelled; `tma1.checks`), masked failures included; invocation errors, coverage-only
  exits and sandbox interruptions are no verdict and never count;
- counted per *lane* (the main agent, or one sub-agent): a loop is one agent re-running;
- the check must still be *open*: its newest run failed and no later covering run passed,
  in any lane (a build is project state). Failures before a covering pass are history;
- the runs re-run the same thing: each covers or is covered by the newest failing run
  (three different spec files failing once each are no loop).

Subject = the check's identity. High, stop channel (the seed's).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from tma1.checks import error_line, split_shell
from tma1.engine.anomaly import Anomaly, Channel, Kind, Severity
from tma1.engine.checkruns import Run, check_runs, related
from tma1.engine.following import Call, EmitRef, Follow, blind_rerun
from tma1.engine.resolution import covering_pass
from tma1.engine.rules._handback import check_terms, handed_back
from tma1.engine.rules._support import RULE_WINDOW_MS, clock_time, quote
from tma1.engine.spec import RuleSpec, Severities
from tma1.engine.window import RuleConfig, SessionWindow
from tma1.events import SHELL_TOOLS, WRITE_TOOLS, HookEvent

REPEATS = 3


def repeated_failed_build(window: SessionWindow, now: int, config: RuleConfig) -> list[Anomaly]:
    runs = check_runs(window, now)
    open_checks = runs.open_failures
    if not open_checks:
        return []
    since = now - RULE_WINDOW_MS
    by_lane: dict[tuple[str, str], list[Run]] = {}
    for r in runs.runs:
        ident = r.check.identity
        if (
            r.failed
            and r.ts >= since
            and ident in open_checks
            and related(r.check, open_checks[ident].check)
            and not runs.closed(r)
        ):
            by_lane.setdefault((ident, r.lane), []).append(r)
    best: dict[str, list[Run]] = {}
    for (ident, _lane), fails in by_lane.items():
        if len(fails) >= REPEATS and (
            ident not in best or (len(fails), fails[-1].ts) > (len(best[ident]), best[ident][-1].ts)
        ):
            best[ident] = fails
    return [
        _finding(window, ident, fails, open_checks[ident])
        for ident, fails in best.items()
        if not _handed_back(window, now, open_checks[ident], fails)
    ]


def _handed_back(window: SessionWindow, now: int, newest: Run, fails: list[Run]) -> bool:
    """A Stop since the newest failure said the check still fails: the loop is the
    user's to decide on now, and blocking would tell the agent what it just said."""
    terms = check_terms(newest.check, (), telling_line([r.event for r in fails]))
    return handed_back(window, now, newest.ts, terms)


def telling_line(fails: list[HookEvent]) -> str | None:
    """The error line these failures repeat most; ties go to the newest failure's."""
    lines = [f.tool_error_summary or error_line(f.tool_result or "") for f in fails]
    counts = Counter(ln for ln in lines if ln)
    if not counts:
        return None
    best = max(counts.values())
    return next(ln for ln in reversed(lines) if ln and counts[ln] == best)


def _masked_note(fails: list[HookEvent]) -> str:
    """What the masked failures among `fails` were, saying only what happened: a pipe
    that exited 0 only when the command has one (design §2.18)."""
    masked = [f for f in fails if f.failure_kind == "masked"]
    if not masked:
        return ""
    piped = sum(
        1 for f in masked if any(op in ("|", "|&") for _, op in split_shell(f.tool_command or ""))
    )
    unpiped = len(masked) - piped
    parts = []
    if piped:
        parts.append(f"{piped} of them hidden by a pipe that exited 0")
    if unpiped:
        parts.append(
            f"{unpiped} of them reported without a failing exit status, "
            "recognised by their error output"
        )
    return f" ({'; '.join(parts)})"


def _finding(window: SessionWindow, ident: str, fails: list[Run], newest: Run) -> Anomaly:
    n = len(fails)
    events = [r.event for r in fails]
    line = telling_line(events)
    hidden = _masked_note(events)
    spellings = len({f.tool_command for f in events})
    spelled = f", spelled {spellings} ways" if spellings > 1 else ""
    lane = fails[-1].lane
    who = f" by sub-agent {fails[-1].event.agent_type or lane}" if lane else ""
    command = quote(events[-1].tool_command or ident, 100)
    evidence = (
        f"The check {quote(ident, 80)} failed {n} times in the last 30 min{who}{spelled}"
        f"{hidden}, first at {clock_time(events[0].ts)}, last at {clock_time(events[-1].ts)},"
        " and has not passed since" + (f"; it keeps saying {quote(line)}." if line else ".")
    )
    if line:
        suggestion = (
            f"Stop re-running {command}: fix what {quote(line)} points at first, "
            "then run it once more."
        )
    else:
        suggestion = (
            f"Stop re-running {command} unchanged: read its full output and fix "
            "the first error it reports before running it again."
        )
    return Anomaly(
        kind=Kind.REPEATED_FAILED_BUILD.value,
        severity=SPEC.severity.of(),
        channel=Channel.STOP_BLOCK.value,
        evidence=evidence,
        suggestion=suggestion,
        related_files=(),
        subject=ident,
        last_evidence_ts=events[-1].ts,
        session_id=window.session_id,
        extra={"check": newest.check},
    )


def _no_blind_rerun(
    emit: EmitRef, span: Sequence[Call], tool_calls: Sequence[Call], acted: bool
) -> bool:
    return acted and not blind_rerun(tool_calls, (emit.subject,))


SPEC = RuleSpec(
    kind=Kind.REPEATED_FAILED_BUILD.value,
    run=repeated_failed_build,
    channels=frozenset({Channel.STOP_BLOCK.value}),
    severity=Severities(Severity.HIGH),
    resolution=covering_pass,
    follow=Follow(
        action="no re-run of the same failing check before an edit",
        check=_no_blind_rerun,
        # Writes too: a re-run after an edit is the suggestion followed (`blind_rerun`).
        tools=SHELL_TOOLS | WRITE_TOOLS,
        related_files=False,
    ),
    # Its subject is a check's identity, as build_broken_after_my_edit's (design §2.15).
    family="failing_check",
    fires_when=(
        "the same check (its runner and target, however spelled) failed 3+ times in 30 "
        "min and is still failing"
    ),
)
