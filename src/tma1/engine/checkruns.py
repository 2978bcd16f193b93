"""The session's check runs (design §2.15, §2.16), shared by the three build/test rules.

A *run* is a shell call that ran a check (`tma1.checks.check_of`), with its outcome and
its lane (the sub-agent that ran it, "" for the main agent). Invocation errors,
coverage-only exits and sandbox interruptions are runs with no verdict: they neither
fail a check nor pass it. A failing run is *closed* once a later run (any lane: a build
is project state) passes a check that covers it.

Built once per (window, now) and kept in the window's memo: the three rules ask the same.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache

from tma1.checks import Check, Outcome, check_of, covers, outcome_of, relative_workdir
from tma1.engine.window import SessionWindow
from tma1.events import SHELL_TOOLS, HookEvent


@dataclass(frozen=True, slots=True)
class Run:
    event: HookEvent
    check: Check
    outcome: Outcome

    @property
    def ts(self) -> int:
        return self.event.ts

    @property
    def lane(self) -> str:
        return self.event.agent_id or ""

    @property
    def failed(self) -> bool:
        return self.outcome is Outcome.FAIL

    @property
    def passed(self) -> bool:
        return self.outcome is Outcome.PASS


@dataclass(slots=True)
class CheckRuns:
    runs: list[Run]  # ts ascending, at or before `now`
    passes: list[Run]
    pass_ts: list[int]

    def closed(self, run: Run) -> bool:
        """A later run passed a check that covers this one (in any lane)."""
        for p in self.passes[bisect_right(self.pass_ts, run.ts) :]:
            if p.event is not run.event and _covers(p.check, run.check):
                return True
        return False

    def closed_at(self, check: Check, after: int) -> int | None:
        """The first covering pass after `after`, or None."""
        for p in self.passes[bisect_right(self.pass_ts, after) :]:
            if _covers(p.check, check):
                return p.ts
        return None

    def newest_by_identity(self) -> dict[str, Run]:
        """Each check's newest run with a verdict (pass or fail)."""
        out: dict[str, Run] = {}
        for r in self.runs:
            if r.failed or r.passed:
                out[r.check.identity] = r
        return out

    def open_failures(self) -> dict[str, Run]:
        """Open checks (design §2.15): the newest run failed and no later covering run
        passed. Identity → that newest failing run."""
        return {
            ident: r
            for ident, r in self.newest_by_identity().items()
            if r.failed and not self.closed(r)
        }


@lru_cache(maxsize=8192)
def _covers(wide: Check, narrow: Check) -> bool:
    return covers(wide, narrow)


@lru_cache(maxsize=8192)
def _check(command: str, workdir: str) -> Check | None:
    return check_of(command, workdir)


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
    return Run(ev, check, outcome)


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
    passes = [r for r in runs if r.passed]
    found = CheckRuns(runs, passes, [p.ts for p in passes])
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
    for e in reversed(window.events):
        if e.ts <= now:
            return e.hook_event_name == "Stop"
    return False
