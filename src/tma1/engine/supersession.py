"""Supersession (design §2.21): which later run speaks for an earlier one.

`tma1.checks.covers` relates runs of one runner (`pytest` ⊇ `pytest tests/x.py`, `npm run
test` ⊇ `jest src/a.test.ts`). Across runners of one toolchain a run can do all that
another does: `cargo build`, `cargo test` and `cargo clippy` compile what `cargo check`
checks, so a passing `cargo build` of the crate closes a failing `cargo check` of it (on
recorded sessions the bundle listed `cargo check` as failing an hour after a `cargo build`
of the same crate passed). Only pairs where the wider run provably does the narrower's
work are listed; a filter on the wider run (`cargo test some_name`, `--lib`) must cover
the narrower's scope as usual.

A failing run's test ids are closed one by one: a later passing run that re-ran exactly
those ids (its scope names them, or their file) or reported them passing says they pass
now (`pytest` failed on `tests/x.py::test_a`, then `pytest tests/x.py::test_a` passed).

`errors_of` is what a failing run said, line numbers blanked (edits move them): two runs
"fail with the same errors" when these agree.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from tma1.checks import Check, covers, error_line, refs, reported_passing
from tma1.checks.identity import Step, step_covers
from tma1.checks.locations import error_text
from tma1.events import HookEvent

# Wider runner → the narrower runners of the same toolchain whose work it does.
_TOOLCHAIN: dict[str, frozenset[str]] = {
    "cargo build": frozenset({"cargo check"}),
    "cargo test": frozenset({"cargo check"}),
    "cargo clippy": frozenset({"cargo check"}),
}
_DIGITS = re.compile(r"\d+")
_ERROR_HEAD = re.compile(r"^(?:error|fatal|FAIL|FAILED|ERROR)\b|\berror TS\d+|\*\*\*")


def _step_supersedes(wide: Step, narrow: Step) -> bool:
    if step_covers(wide, narrow):
        return True
    if narrow.runner not in _TOOLCHAIN.get(wide.runner, ()):
        return False
    return step_covers(Step(wide.workdir, narrow.runner, wide.scope), narrow)


@lru_cache(maxsize=8192)
def supersedes(wide: Check, narrow: Check) -> bool:
    """A passing `wide` shows that `narrow` passes too: `covers`, or a wider runner of the
    same toolchain over a scope that covers `narrow`'s."""
    if covers(wide, narrow):
        return True
    return all(any(_step_supersedes(w, n) for w in wide.steps) for n in narrow.steps)


# --- test ids -------------------------------------------------------------------------------

_FILTER_VALUE = re.compile(r"^-[\w-]*=\^?(.+?)\$?$")


def names_test(check: Check, test_id: str) -> bool:
    """The run was given exactly this test (or its file) to run: `pytest tests/x.py::t`,
    `jest src/a.test.ts`, `go test -run TestX`."""
    for step in check.steps:
        for s in step.scope:
            if test_id == s or test_id.startswith((s + "::", s + " > ")):
                return True
            m = _FILTER_VALUE.match(s)
            if m and m.group(1) == test_id:
                return True
    return False


def ids_passed_since(
    failing: Check, test_ids: Iterable[str], passes: Iterable[tuple[Check, HookEvent]]
) -> bool:
    """Every one of a failing run's test ids passed in a later passing re-run of the same
    check (`passes`: the later passing runs, as (check, event))."""
    ids = list(dict.fromkeys(test_ids))
    if not ids:
        return False
    reruns = [(c, e) for c, e in passes if covers(failing, c)]
    return bool(reruns) and all(
        any(
            names_test(c, t) or (not _filtered(c) and reported_passing(t, e.passed_test_ids))
            for c, e in reruns
        )
        for t in ids
    )


def _filtered(check: Check) -> bool:
    """A name filter (`-run TestX`, `-k x`) ran part of what it names: its `ok pkg` or
    `PASS file` says nothing of the tests it left out."""
    return any("=" in s for step in check.steps for s in step.scope)


# --- errors ---------------------------------------------------------------------------------


# `go test -v`: a test's `t.Log`/`t.Skip` lines stream between its `=== RUN` and its
# `--- PASS|SKIP|FAIL` line; only a failing test's are about an error.
_GO_RUN = re.compile(r"^\s*=== RUN\s")
_GO_DONE = re.compile(r"^\s*--- (PASS|SKIP|FAIL):")


def _without_passing_test_logs(lines: list[str]) -> list[str]:
    """`lines` less the log lines of Go tests that passed or were skipped: `monitor_test.go:
    331: Alerting tests require more complex setup` above `--- SKIP` is no error."""
    out: list[str] = []
    held: list[str] = []  # the lines since the newest `=== RUN`
    for ln in lines:
        if _GO_RUN.match(ln):
            out += held
            held = [ln]
        elif (done := _GO_DONE.match(ln)) is not None:
            out += held if done.group(1) == "FAIL" else held[:1]
            out.append(ln)
            held = []
        elif held:
            held.append(ln)
        else:
            out.append(ln)
    return out + held


@lru_cache(maxsize=2048)
def _errors_in(output: str) -> frozenset[str]:
    lines = [
        ln
        for ln in _without_passing_test_logs(error_text(output).splitlines())
        if ln.strip() and (refs(ln) or _ERROR_HEAD.search(ln.strip()))
    ]
    return frozenset(_DIGITS.sub("#", " ".join(ln.split())) for ln in lines)


def errors_of(event: HookEvent) -> frozenset[str]:
    """The error lines of a failing run (numbers blanked); its error summary or telling
    line when it has none (the bundle's lean rows carry no output when they have one)."""
    found = _errors_in(event.tool_result) if event.tool_result else frozenset()
    if found:
        return found
    line = event.tool_error_summary or (
        error_line(event.tool_result) if event.tool_result else None
    )
    return frozenset({_DIGITS.sub("#", " ".join(line.split()))}) if line else frozenset()
