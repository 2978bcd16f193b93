"""`test_stuck` — the same test failed in 3+ failing runs within the last 30 minutes.

Test ids come from the failure output (design §2.11), masked failures included; one
output counts each id once (the parser already deduplicates `event.test_ids`).
"""

from __future__ import annotations

from tma1.checks import error_line_for_test, file_of_test_id
from tma1.engine.anomaly import Anomaly, Channel, Kind, Severity
from tma1.engine.rules._support import (
    RULE_WINDOW_MS,
    Streaks,
    clock_time,
    norm_path,
    quote,
    shell_failures,
    visible,
)
from tma1.engine.window import RuleConfig, SessionWindow
from tma1.events import HookEvent, absolutize

REPEATS = 3


def test_stuck(window: SessionWindow, now: int, config: RuleConfig) -> list[Anomaly]:
    events = visible(window.events, now)
    by_test: dict[str, list[HookEvent]] = {}
    for fail in shell_failures(visible(events, now, now - RULE_WINDOW_MS)):
        for tid in dict.fromkeys(fail.test_ids):
            by_test.setdefault(tid, []).append(fail)
    if not by_test:
        return []
    streaks = Streaks(events)
    found = []
    for tid, fails in by_test.items():
        # A run of the same command that passed since means the test passes now.
        streak = streaks.current(fails)
        if len(streak) >= REPEATS:
            found.append(_finding(window, tid, streak))
    return found


# pytest would collect the rule function above as a test if it imported this module.
test_stuck.__test__ = False  # type: ignore[attr-defined]


def _finding(window: SessionWindow, test_id: str, fails: list[HookEvent]) -> Anomaly:
    commands = list(dict.fromkeys(f.tool_command_prefix for f in fails if f.tool_command_prefix))
    runs = (
        f" by {quote(commands[0], 80)}"
        if len(commands) == 1
        else f" across {len(commands)} different commands"
        if commands
        else ""
    )
    evidence = (
        f"Test {quote(test_id, 120)} failed in {len(fails)} runs{runs} in the last 30 min "
        f"(first {clock_time(fails[0].ts)}, last {clock_time(fails[-1].ts)})."
    )
    err = next(
        (e for f in reversed(fails) if (e := error_line_for_test(f.tool_result or "", test_id))),
        None,
    )
    said = f" ({quote(err, 120)})" if err else ""
    suggestion = (
        f"Read the failing assertion of {quote(test_id, 120)}{said} and the code it exercises "
        "before running it again."
    )
    test_file = file_of_test_id(test_id)
    related = (
        (norm_path(absolutize(test_file, fails[-1].cwd), window.project),) if test_file else ()
    )
    return Anomaly(
        kind=Kind.TEST_STUCK.value,
        severity=Severity.MEDIUM.value,
        channel=Channel.USER_PROMPT_SUBMIT.value,
        evidence=evidence,
        suggestion=suggestion,
        related_files=related,
        subject=test_id,
        last_evidence_ts=fails[-1].ts,
        session_id=window.session_id,
    )
