"""The session's check runs (design §2.15, §2.16), shared by the three build/test rules.

A *run* is a shell call that ran a check (`tma1.checks.check_of`), with its outcome and
its lane (the sub-agent that ran it, "" for the main agent). Runs whose `failure_kind` is in
`tma1.checks.outcome.NOT_CHECK_FAILURES` (invocation errors, coverage-only exits, sandbox
interruptions, runs with no verdict) neither fail a check nor pass it. A failing run is
*closed* once a later run (any lane: a build is project state) passes a check that
supersedes it (`engine.supersession`: `cargo build` closes `cargo check`), once each step
of a chained check (`lint && build && test`) passed since in some run, or once every
test id it failed on passed in a later re-run of exactly those ids. It is *superseded*
when a later failing run of another, wider check of its toolchain says different errors:
what it said is stale, and it is no longer an open check of its own (design §2.21). Its
compile errors are stale once a later type-check found their files clean after they
changed (`supersession.gone_files`): a run that said nothing else is superseded; one that
also failed on tests stays open, told by what stands (`CheckRuns.error_of`).

Built once per (window, now) and kept in the window's memo: the three rules ask the same.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from tma1.checks import Check, Outcome, check_of, error_line, outcome_of, split_shell
from tma1.checks.identity import Step, is_script_file
from tma1.engine.supersession import (
    compile_errors,
    errors_of,
    gone_files,
    ids_passed_since,
    only_stale,
    supersedes,
    without_stale,
)
from tma1.engine.window import SessionWindow
from tma1.events import SHELL_TOOLS, HookEvent
from tma1.paths import norm_path


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
    # id() of the failing runs a later failing run of a wider check, with other errors, made
    # stale (design §2.21)
    superseded_ids: set[int]
    # Open checks (design §2.15: "a check is open until a covering run passes"): identity →
    # its newest failing run that no later covering pass closed. A later pass of a narrower
    # scope (one file of a failing suite) leaves the suite open.
    open_failures: dict[str, Run]
    # id() of the failing runs whose compile errors in these files a later type-check no
    # longer reported (`supersession.gone_files`): what else they said still stands.
    stale_files: dict[int, frozenset[str]] = field(default_factory=dict)

    def error_of(self, run: Run) -> str | None:
        """The run's telling error line, among what of it still stands: not a compile error
        a later type-check no longer reported."""
        gone = self.stale_files.get(id(run.event))
        if gone and run.event.tool_result:
            return error_line(without_stale(run.event.tool_result, gone))
        return run.event.tool_error_summary or error_line(run.event.tool_result or "")

    def closed(self, run: Run) -> bool:
        """A later run passed a check that covers this one (in any lane)."""
        return id(run.event) in self.closed_ids

    def superseded(self, run: Run) -> bool:
        """A later failing run of a wider check of the same toolchain said other errors."""
        return id(run.event) in self.superseded_ids


_covers = supersedes


# A compiler's error line: in a chain (`npm run build && node x.js`) it is the build
# step's, and `&&` ran nothing after it.
_COMPILE_ERROR = re.compile(
    r"\berror TS\d+\b|\berror\[E\d+\]|\berror CS\d+\b|^\S+\.go:\d+:\d+: |"
    r"^\S+\.(?:c|cc|cpp|h|hpp|rs|swift|zig):\d+(?::\d+)?: (?:fatal )?error\b"
)


def compile_error(line: str) -> bool:
    """The line is a compiler's error (`error TS2322`, `error[E0308]`, `x.go:3:1: …`)."""
    return _COMPILE_ERROR.search(line.strip()) is not None


_BUILD_SCRIPTS = frozenset({"build", "typecheck", "type-check", "tsc", "compile"})


def _builds(step: Step) -> bool:
    script = step.runner.removeprefix("npm run ").split(":", 1)[0]
    return Check((step,)).compiles or (
        step.runner.startswith("npm run ") and script in _BUILD_SCRIPTS
    )


# Which step of a chain wrote an error line: (the line's kind, the runners that write it).
# In `lint && format && build && test` the step that failed is the first that can have
# written the run's error; `&&` means every step before it passed in that run, and none
# after it ran.
_STEP_OF_ERROR: tuple[tuple[re.Pattern[str], re.Pattern[str] | None], ...] = (
    (_COMPILE_ERROR, None),  # None: a build step (`_builds`)
    (
        re.compile(
            r"Code style issues|Forgot to run Prettier|would reformat|"
            r"files? would be reformatted|not properly formatted|Diff in \S+ at line",
            re.IGNORECASE,
        ),
        re.compile(r"format|prettier|\bfmt\b|black|isort"),
    ),
    (
        re.compile(r"✖ \d+ problems?|\d+ problems? \(\d+ errors?|^Found \d+ errors?\b"),
        re.compile(r"lint|eslint|ruff|flake8|clippy|biome"),
    ),
    (
        re.compile(r"^(?:--- )?(?:FAIL|FAILED)\b|\b\d+ (?:tests? )?failed\b|Tests?:?\s+\d+ failed"),
        re.compile(r"test|spec|jest|vitest|mocha|pytest|playwright|cypress|e2e"),
    ),
)


def _failing_step(r: Run) -> Step | None:
    """The step of an `&&` chain that wrote the run's error line (see `_STEP_OF_ERROR`);
    None when the run is no such chain or the line says no step."""
    if len(r.check.steps) < 2 or any(
        op in (";", "||", "\n") for _, op in split_shell(r.event.tool_command or "")
    ):
        return None
    said = (r.event.tool_error_summary or error_line(r.event.tool_result or "") or "").strip()
    for line_kind, runner_kind in _STEP_OF_ERROR:
        if not line_kind.search(said):
            continue
        for st in r.check.steps:
            if _builds(st) if runner_kind is None else runner_kind.search(st.runner):
                return st
        return None
    return None


def _failing_step_passed_since(r: Run, passed_later: dict[Check, None]) -> bool:
    """A chained run (`npm run build && node x.js`, `lint && format && test`) failed at a
    step, and that step passed since: what the run said is that step's and no longer
    true; the steps before it passed in the run, the steps after it never ran (attio-
    aaeb53d1's bundle quoted the TS2307 of a build that had passed since; attio-7c4ca6ea's,
    the Prettier warning of a chain whose format check passed 34 s later)."""
    st = _failing_step(r)
    return st is not None and any(_covers(p, Check((st,))) for p in passed_later)


def _closed(
    runs: list[Run], edits: Sequence[tuple[int, frozenset[str]]] = ()
) -> tuple[set[int], set[int], dict[int, frozenset[str]]]:
    """The failing runs a later pass covers (closed), and those a later failing wider run
    with other errors superseded. Newest to oldest, against the distinct checks that ran
    later: a session re-runs a handful of checks, so this is about O(runs) (comparing each
    failure with every later run was quadratic on long sessions)."""
    closed: set[int] = set()
    superseded: set[int] = set()
    passed_later: dict[Check, None] = {}
    reruns: dict[Check, Run] = {}  # later passing runs with a scope: re-runs of test ids
    failed_later: dict[Check, Run] = {}  # the oldest later failing run of each check
    stale: dict[int, frozenset[str]] = {}
    for at in range(len(runs) - 1, -1, -1):
        r = runs[at]
        if r.passed:
            passed_later.setdefault(r.check, None)
            if any(s.scope for s in r.check.steps) or r.event.passed_test_ids:
                reruns[r.check] = r
        elif r.failed:
            if (
                any(_covers(p, r.check) for p in passed_later)
                or (
                    # `lint && build && test`: each step passed since, in runs of its own
                    len(r.check.steps) > 1
                    and all(
                        any(_covers(p, Check((st,))) for p in passed_later) for st in r.check.steps
                    )
                )
                or _failing_step_passed_since(r, passed_later)
                or (
                    r.event.test_ids
                    and ids_passed_since(
                        r.check, r.event.test_ids, ((c, p.event) for c, p in reruns.items())
                    )
                )
            ):
                closed.add(id(r.event))
            elif any(
                c.identity != r.check.identity
                and _covers(c, r.check)
                and errors_of(f.event) != errors_of(r.event)
                for c, f in failed_later.items()
            ):
                superseded.add(id(r.event))
            elif gone := _compile_errors_gone(runs, at, edits):
                # Its compile errors compile now (design §2.21): only what else it said stands.
                if only_stale(r.event.tool_result or "", gone):
                    superseded.add(id(r.event))
                else:
                    stale[id(r.event)] = gone
            failed_later[r.check] = r
    return closed, superseded, stale


def _compile_errors_gone(
    runs: list[Run], at: int, edits: Sequence[tuple[int, frozenset[str]]]
) -> frozenset[str]:
    """The files of run `at`'s compile errors that a later type-check found clean
    (`supersession.gone_files`)."""
    r = runs[at]
    if not r.event.tool_result or not compile_errors(r.event.tool_result).files:
        return frozenset()
    return gone_files(
        r.event,
        [(x.check, x.event, x.passed) for x in runs[at + 1 :] if x.passed or x.failed],
        [(x.check, x.event) for x in runs if x.failed and x.event.tool_result],
        edits,
    )


@lru_cache(maxsize=8192)
def _check_in(command: str, cwd: str | None, project: str | None) -> Check | None:
    """The command's check, each step's directory relative to the session's project, or
    absolute when outside it. Claude Code's hook `cwd` follows the shell's `cd`, so
    `cd /tmp/kit && pytest` (cwd: the project) and a later `pytest` (cwd: /tmp/kit) are
    runs in one directory, whichever of them the project is."""
    check = check_of(command)
    if check is None or not cwd or not project:
        return check
    base, root = cwd.replace("\\", "/"), project.replace("\\", "/").rstrip("/")
    steps = []
    for st in check.steps:
        if st.workdir.startswith("~"):
            steps.append(st)
            continue
        where = posixpath.normpath(posixpath.join(base, st.workdir or "."))
        if where == root:
            where = ""
        elif where.startswith(root + "/"):
            where = where[len(root) + 1 :]
        steps.append(Step(where, st.runner, st.scope))
    return Check(tuple(dict.fromkeys(steps)))


# The tools that create a file whole (Claude Code's Write; Gemini's and Copilot's file
# writes arrive under the same name).
_CREATE_TOOLS = frozenset({"Write"})


def scratch_scripts(events: Iterable[HookEvent], project: str | None) -> frozenset[str]:
    """Scripts a session wrote whole (`Write`) at the project's root: its throw-away
    repros (`node test-create-response.mjs`, attio-7c4ca6ea), the session's scratch and
    not a check of the project (design §2.21) — as a script under /tmp already is. By
    path relative to the project. A script in a directory of the project (`scripts/`)
    stays the project's, whoever wrote it."""
    if not project:
        return frozenset()
    root = project.replace("\\", "/").rstrip("/") + "/"
    out: set[str] = set()
    for e in events:
        if e.tool_name not in _CREATE_TOOLS or e.event_type != "PostToolUse":
            continue
        if e.tool_success is False:
            continue
        for f in e.tool_files:
            path = norm_path(f, e.cwd or project)
            rel = path[len(root) :] if path.startswith(root) else ""
            if rel and "/" not in rel and is_script_file(rel):
                out.add(rel)
    return frozenset(out)


def _without_scratch(check: Check, scratch: frozenset[str]) -> Check | None:
    """`check` less its steps that run a scratch script; None when no step is left."""
    steps = tuple(
        st
        for st in check.steps
        if not (
            st.runner.startswith("script ")
            and posixpath.normpath(posixpath.join(st.workdir or ".", st.runner[7:])) in scratch
        )
    )
    if len(steps) == len(check.steps):
        return check
    return Check(steps) if steps else None


def run_of(ev: HookEvent, project: str | None, scratch: frozenset[str] = frozenset()) -> Run | None:
    """The event as a run of a check, or None (no shell result, no check, never ran, or
    only a session's scratch script: `scratch_scripts`)."""
    if ev.tool_name not in SHELL_TOOLS or not ev.tool_command:
        return None
    if ev.event_type not in ("PostToolUse", "PostToolUseFailure"):
        return None
    check = _check_in(ev.tool_command, ev.cwd, project or ev.project)
    if check is not None and scratch:
        check = _without_scratch(check, scratch)
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


# `git checkout REF` / `git switch REF` / `git reset --hard`: the working tree is another
# one. `-b`/`-c` (a new branch keeps the tree), `--` and paths (`logs/`, `src/a.ts`) are not.
_GIT_SWITCH = re.compile(r"^git\s+(?:-C\s+\S+\s+)?(checkout|switch|reset)\s+(.+)$")
_REF = re.compile(r"^[\w][\w\-/.]*$")
_FILE_NAME = re.compile(r"\.[A-Za-z]\w*$")


def switches_tree(command: str) -> bool:
    """The shell command replaces the project's working tree with another branch's or
    commit's: the checks run before it judged code that is no longer there (attio-aaeb53d1
    06:47: the failing suite ran on a branch the agent then stashed and left for main)."""
    for segment, _ in split_shell(command):
        m = _GIT_SWITCH.match(" ".join(segment.split()))
        if m is None:
            continue
        verb, args = m.group(1), m.group(2).split()
        if verb == "reset":
            if "--hard" in args:
                return True
            continue
        if any(a.startswith("-") for a in args):
            continue  # `-b`/`-c` (a new branch keeps the tree), `--` (paths), options
        # One ref: `release/2.1` is a branch; `a.ts` and `logs/` are paths.
        ref = args[0]
        if (
            len(args) == 1
            and _REF.match(ref)
            and not ref.endswith("/")
            and not _FILE_NAME.search(ref)
        ):
            return True
    return False


def _tree_switched_at(events: Iterable[HookEvent], now: int) -> int | None:
    """When the newest successful working-tree switch (`switches_tree`) ran, at or before
    `now`."""
    newest = None
    for e in events:
        if e.ts > now:
            break
        if (
            e.tool_name in SHELL_TOOLS
            and e.event_type == "PostToolUse"
            and e.tool_success is True
            and e.tool_command
            and "git" in e.tool_command
            and switches_tree(e.tool_command)
        ):
            newest = e.ts
    return newest


def check_runs(window: SessionWindow, now: int) -> CheckRuns:
    key = ("check_runs", now, len(window.events))
    memo = window.memo.get(key)
    if isinstance(memo, CheckRuns):
        return memo
    scratch = scratch_scripts((e for e in window.events if e.ts <= now), window.project)
    runs = [
        r
        for e in window.events
        if e.ts <= now and e.tool_command and (r := run_of(e, window.project, scratch)) is not None
    ]
    edits = [
        (e.ts, frozenset(norm_path(f, e.cwd or window.project or "") for f in e.tool_files))
        for e in window.events
        if e.ts <= now
        and e.tool_files
        and e.tool_name not in SHELL_TOOLS
        and e.event_type == "PostToolUse"
        and e.tool_success is not False
    ]
    closed, superseded, stale = _closed(runs, edits)
    switched = _tree_switched_at(window.events, now)
    if switched is not None:
        # Failures on a tree the project no longer has: no verdict about its code now.
        closed |= {id(r.event) for r in runs if r.failed and r.ts < switched}
    gone = closed | superseded
    open_failures = {r.check.identity: r for r in runs if r.failed and id(r.event) not in gone}
    found = CheckRuns(runs, closed, superseded, open_failures, stale)
    window.memo.clear()  # one `now` at a time: the detector asks about the present
    window.memo[key] = found
    return found


def failing_at(
    events: Iterable[HookEvent], now: int, project: str | None
) -> dict[str, frozenset[str]]:
    """The checks open at `now` over shell results `events` (any session, ts ascending),
    each with the error lines (numbers blanked, `errors_of`) of its failing runs since the
    newest covering pass: what a session starting at `now` finds already broken, and how
    (design §2.22's pre-existing, across the sessions of the project)."""
    cr = check_runs(SessionWindow(session_id="", project=project, events=list(events)), now)
    out: dict[str, frozenset[str]] = {}
    for ident, last in cr.open_failures.items():
        said: set[str] = set()
        for r in reversed(cr.runs):
            if r.ts > last.ts:
                continue
            if r.passed and _covers(r.check, last.check):
                break
            if r.failed and r.check.identity == ident:
                said |= errors_of(r.event)
        out[ident] = frozenset(said)
    return out


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
