"""`repeated_failed_build` — the same shell command failed 3+ times in the last 30 minutes.

Commands are the same when their first 60 characters (whitespace collapsed) are: the
parser's `tool_command_prefix`. Masked failures (`npm test | tail`) count (design §2.8).
Only the current streak counts: failures before the latest success of the same check
(`npm run build` passing after `npm run build 2>&1 | tail` failed) are fixed history.
Commands that only move or read files (grep, ls, git checkout) are not builds.
"""

from __future__ import annotations

from collections import Counter

from tma1.engine.anomaly import Anomaly, Channel, Kind, Severity
from tma1.engine.rules._support import (
    RULE_WINDOW_MS,
    Streaks,
    clock_time,
    quote,
    shell_failures,
    visible,
)
from tma1.engine.window import RuleConfig, SessionWindow
from tma1.events import HookEvent
from tma1.extract import error_line, runs_only_plumbing, split_shell

REPEATS = 3


def repeated_failed_build(window: SessionWindow, now: int, config: RuleConfig) -> list[Anomaly]:
    events = visible(window.events, now)
    by_prefix: dict[str, list[HookEvent]] = {}
    for fail in shell_failures(visible(events, now, now - RULE_WINDOW_MS)):
        # A grep or `git checkout` failing again builds nothing and harms nothing.
        if fail.tool_command_prefix and not runs_only_plumbing(fail.tool_command or ""):
            by_prefix.setdefault(fail.tool_command_prefix, []).append(fail)
    if not by_prefix:
        return []
    streaks = Streaks(events)
    found = []
    for prefix, fails in by_prefix.items():
        streak = streaks.current(fails)
        if len(streak) >= REPEATS:
            found.append(_finding(window, prefix, streak))
    return found


def telling_line(fails: list[HookEvent]) -> str | None:
    """The error line these failures repeat most; ties go to the newest failure's."""
    lines = [f.tool_error_summary or error_line(f.tool_result or "") for f in fails]
    counts = Counter(ln for ln in lines if ln)
    if not counts:
        return None
    best = max(counts.values())
    return next(ln for ln in reversed(lines) if ln and counts[ln] == best)


def _piped(command: str | None) -> bool:
    return bool(command) and any(op in ("|", "|&") for _, op in split_shell(command or ""))


def _masked_note(fails: list[HookEvent]) -> str:
    """What the masked failures among `fails` were, saying only what happened: a pipe
    that exited 0 only when the command has one (design §2.18)."""
    masked = [f for f in fails if f.failure_kind == "masked"]
    if not masked:
        return ""
    piped = sum(1 for f in masked if _piped(f.tool_command))
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


def _finding(window: SessionWindow, prefix: str, fails: list[HookEvent]) -> Anomaly:
    n = len(fails)
    line = telling_line(fails)
    hidden = _masked_note(fails)
    command = quote(fails[-1].tool_command or prefix, 100)
    evidence = (
        f"{command} failed {n} times in the last 30 min{hidden}, "
        f"first at {clock_time(fails[0].ts)}, last at {clock_time(fails[-1].ts)}"
        + (f"; it keeps saying {quote(line)}." if line else ".")
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
        severity=Severity.HIGH.value,
        channel=Channel.STOP_BLOCK.value,
        evidence=evidence,
        suggestion=suggestion,
        related_files=(),
        subject=prefix,
        last_evidence_ts=fails[-1].ts,
        session_id=window.session_id,
    )
