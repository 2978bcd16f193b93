"""The session's check runs (design §2.15, §2.16), shared by the three build/test rules.

A *run* is a shell call that ran a check (`tma1.checks.check_of`), with its outcome and
its lane (the sub-agent that ran it, "" for the main agent). Invocation errors,
coverage-only exits and sandbox interruptions are runs with no verdict: they neither
fail a check nor pass it. A failing run is *closed* once a later run (any lane: a build
is project state) passes a check that covers it.

Built once per (window, now) and kept in the window's memo: the three rules ask the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from tma1.checks import Check, Outcome, check_of, covers, outcome_of, relative_workdir
from tma1.engine.window import SessionWindow
from tma1.events import SHELL_TOOLS, HookEvent


@dataclass(frozen=True, slots=True)
class Run:
    event: HookEvent
    check: Check
    # Read for every run by every rule: plain fields, not properties.
    ts: int
    lane: str  # the sub-agent's id, "" for the main agent (design §2.16)
    failed: bool
    passed: bool


@dataclass(frozen=True, slots=True)
class CheckRuns:
    runs: list[Run]  # ts ascending, at or before `now`
    closed_ids: set[int]  # id() of the failing runs' events that a later pass covers
    # Open checks (design §2.15: "a check is open until a covering run passes"): identity →
    # its newest failing run that no later covering pass closed. A later pass of a narrower
    # scope (one file of a failing suite) leaves the suite open.
    open_failures: dict[str, Run]

    def closed(self, run: Run) -> bool:
        """A later run passed a check that covers this one (in any lane)."""
        return id(run.event) in self.closed_ids


_covers = lru_cache(maxsize=8192)(covers)
_check = lru_cache(maxsize=8192)(check_of)


def _closed(runs: list[Run]) -> set[int]:
    """The failing runs a later pass covers. Newest to oldest, against the distinct checks
    that passed later: a session re-runs a handful of checks, so this is about O(runs)
    (comparing each failure with every later pass was quadratic on long sessions)."""
    closed: set[int] = set()
    passed_later: dict[Check, None] = {}
    for r in reversed(runs):
        if r.passed:
            passed_later.setdefault(r.check, None)
        elif r.failed and any(_covers(p, r.check) for p in passed_later):
            closed.add(id(r.event))
    return closed


def run_of(ev: HookEvent, project: str | None) -> Run | None:
    """The event as a run of a check, or None (no shell result, no check, never ran)."""
    if ev.tool_name not in SHELL_TOOLS or not ev.tool_command:
        return None
    if ev.event_type not in ("PostToolUse", "PostToolUseFailure"):
        return None
    check = _check(ev.tool_command, relative_workdir(ev.cwd, ev.project or project))
    if check is None:
        return None
    outcome = outcome_of(ev.tool_command, ev.event_type, ev.tool_success, ev.failure_kind)
    if outcome is Outcome.NOT_A_CHECK:
        return None
    return Run(
        ev,
        check,
        ev.ts,
        ev.agent_id or "",
        outcome is Outcome.FAIL,
        outcome is Outcome.PASS,
    )


def check_runs(window: SessionWindow, now: int) -> CheckRuns:
    key = ("check_runs", now, len(window.events))
    memo = window.memo.get(key)
    if isinstance(memo, CheckRuns):
        return memo
    runs = [
        r
        for e in window.events
        if e.ts <= now and e.tool_command and (r := run_of(e, window.project)) is not None
    ]
    closed = _closed(runs)
    open_failures = {r.check.identity: r for r in runs if r.failed and id(r.event) not in closed}
    found = CheckRuns(runs, closed, open_failures)
    window.memo.clear()  # one `now` at a time: the detector asks about the present
    window.memo[key] = found
    return found


def related(a: Check, b: Check) -> bool:
    """Runs of one check that re-run the same thing: one covers the other. Three runs of
    `playwright` on three different spec files are no loop; `pytest` and `pytest tests/x.py`
    are."""
    return _covers(a, b) or _covers(b, a)


def stopped_since(window: SessionWindow, now: int, ts: int) -> bool:
    """A Stop came after `ts` (at or before `now`): the agent ended its turn since."""
    return any(e.hook_event_name == "Stop" and ts < e.ts <= now for e in reversed(window.events))


def at_stop(window: SessionWindow, now: int) -> bool:
    """The event being answered is a Stop (the window holds it: delivery stores first)."""
    last = next((e for e in reversed(window.events) if e.ts <= now), None)
    return last is not None and last.hook_event_name == "Stop"
