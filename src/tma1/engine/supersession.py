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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from tma1.checks import Check, covers, error_line, refs, reported_passing
from tma1.checks.identity import Step, step_covers
from tma1.checks.locations import error_text
from tma1.checks.text import strip_ansi
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


# --- compile errors a later type-check no longer reports ------------------------------------
#
# A run that failed to compile says nothing about its tests, and once the files it could not
# compile type-check cleanly in a later run of the same toolchain, its compile errors are no
# evidence either (design §2.21): `make test-unit` failed on the agent's half-done edit
# (`declared and not used: resp`), the agent fixed the file, and a later golangci-lint run,
# which type-checks the same test package, reported only lint findings. What else the run
# said (a test's assertion) still stands.

# A compiler's or type checker's own error line: `x.go:3:1: msg` (a golangci-lint finding
# names its linter in parentheses: only `(typecheck)` is the compiler's), `error TS2322`,
# rustc's `error[E0308]`, C#'s `error CS0103`, mypy's `x.py:3: error: … [code]`.
_TYPE_ERROR = re.compile(
    r"^\S+\.go:\d+:\d+: (?!.*\((?!typecheck\))[\w-]+\)$)|\berror TS\d+\b|\berror\[E\d+\]|"
    r"\berror CS\d+\b|^\S+\.pyi?:\d+(?::\d+)?: error: .*\[[\w-]+\]$|"
    r"^\S+\.(?:c|cc|cpp|h|hpp|swift|zig):\d+(?::\d+)?: (?:fatal )?error\b"
)
# Lines that only echo a compile failure: Go's package header and `[build failed]`, make's
# and a runner's exit lines, golangci-lint's issue count.
_ECHO = re.compile(
    r"^#\s|\[(?:build|setup) failed\]|^FAIL$|^make(?:\[\d+\])?: \*\*\*|^\d+ issues?:|"
    r"^\* typecheck: \d+|^error: could not compile|^Found \d+ errors?\b|^npm ERR!|"
    r"^ELIFECYCLE|^error Command failed|^\s*\^\s*$"
)
_CUT = re.compile(r"\|\s*(?:head|tail|grep|sed|awk)\b")

# Which runners type-check a file, by its extension: (runners that check every file of
# their scope, runners that leave test files out: `go build` compiles no `_test.go`).
_TYPE_CHECKERS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    ".go": (frozenset({"go vet", "golangci-lint run", "go test"}), frozenset({"go build"})),
    ".rs": (frozenset({"cargo test"}), frozenset({"cargo check", "cargo build", "cargo clippy"})),
    ".ts": (frozenset({"tsc", "vue-tsc"}), frozenset()),
    ".py": (frozenset({"mypy", "pyright"}), frozenset()),
}
_TYPE_SCRIPTS = frozenset({"typecheck", "type-check", "tsc", "check-types", "types"})
_TEST_FILE = re.compile(r"_test\.go$|(?:^|/)(?:tests|benches)/|\.(?:test|spec)\.[cm]?tsx?$")


def _ext(path: str) -> str:
    base = path.rsplit("/", 1)[-1]
    ext = "." + base.rsplit(".", 1)[-1] if "." in base else ""
    return ".ts" if ext in (".tsx", ".mts", ".cts") else ".py" if ext == ".pyi" else ext


@dataclass(frozen=True, slots=True)
class CompileErrors:
    """A failing run's compile/type error lines (as printed), each with its files."""

    lines: tuple[tuple[str, frozenset[str]], ...]

    @property
    def files(self) -> frozenset[str]:
        return frozenset(f for _, fs in self.lines for f in fs)


def _clean(output: str) -> list[str]:
    return [ln.rstrip() for ln in strip_ansi(output).splitlines()]


def _paths(line: str) -> frozenset[str]:
    return frozenset(r.path.replace("\\", "/").removeprefix("./") for r in refs(line))


@lru_cache(maxsize=2048)
def compile_errors(output: str) -> CompileErrors:
    """The output's compile/type error lines and their files (rustc's location is on the
    ` --> file:line` line under its `error[E…]` head: both lines are the error's)."""
    lines = _clean(output)
    found: list[tuple[str, frozenset[str]]] = []
    for i, ln in enumerate(lines):
        if not _TYPE_ERROR.search(ln.strip()):
            continue
        if where := _paths(ln):
            found.append((ln, where))
            continue
        arrow = next((n for n in lines[i + 1 : i + 4] if n.strip().startswith("-->")), None)
        if arrow is not None and (where := _paths(arrow)):
            found += [(ln, where), (arrow, where)]
    return CompileErrors(tuple(found))


def type_checks(check: Check, path: str) -> bool:
    """A passing run of `check` shows `path` compiles: one of its steps is a type checker
    of the file's language (`_TYPE_CHECKERS`, a `typecheck` npm script) whose scope holds
    it."""
    every, non_test = _TYPE_CHECKERS.get(_ext(path), (frozenset(), frozenset()))
    test_file = _TEST_FILE.search(path) is not None
    for st in check.steps:
        script = st.runner.removeprefix("npm run ") if st.runner.startswith("npm run ") else None
        runs_it = (
            st.runner in every
            or (st.runner in non_test and not test_file)
            or (_ext(path) == ".ts" and script in _TYPE_SCRIPTS)
        )
        if runs_it and _in_scope(st, path):
            return True
    return False


def _in_scope(step: Step, path: str) -> bool:
    where = (step.workdir.rstrip("/") + "/") if step.workdir else ""
    if where and not path.startswith(where):
        where = ""  # the error's path is relative to the run's directory
    rel = path[len(where) :]
    scopes = [s for s in step.scope if not s.startswith("-")]
    if not scopes:
        return True
    for s in scopes:
        s = s.removeprefix("./").removesuffix("...").rstrip("/")
        if s in ("", ".") or rel == s or rel.startswith(s + "/"):
            return True
    return False


def _reports_none_in(check: Check, event: HookEvent, passed: bool, path: str) -> bool:
    """The run type-checked `path` and reported no compile error in it: it passed, or it
    failed on other things with its whole output at hand (not cut by `| tail`)."""
    if not type_checks(check, path):
        return False
    if passed:
        return True
    out = event.tool_result or ""
    if not out or _CUT.search(event.tool_command or ""):
        return False
    return not any(_same(f, path) for f in compile_errors(out).files)


def _same(a: str, b: str) -> bool:
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def gone_files(
    failing: HookEvent,
    later: Sequence[tuple[Check, HookEvent, bool]],
    earlier: Sequence[tuple[Check, HookEvent]],
    edits: Sequence[tuple[int, frozenset[str]]],
) -> frozenset[str]:
    """The files of `failing`'s compile errors that compile now: a later run (`later`:
    (check, event, passed), ts ascending, after `failing`) type-checked the file and
    reported no compile error in it, and the file changed in between — an edit of it
    (`edits`: (ts, paths)) came between the two runs, or a run of the same check had
    reported a compile error in it before (`earlier`: failing runs, ts ascending): that
    tool sees the file, and its errors went away."""
    if not failing.tool_result:
        return frozenset()
    gone: set[str] = set()
    for path in compile_errors(failing.tool_result).files:
        # The checks that had reported a compile error in the file: they see it.
        seen: dict[str, int] = {}
        for c, e in earlier:
            if e.tool_result and any(_same(f, path) for f in compile_errors(e.tool_result).files):
                seen.setdefault(c.identity, e.ts)
        for check, ev, passed in later:
            if not _reports_none_in(check, ev, passed, path):
                continue
            if seen.get(check.identity, ev.ts) < ev.ts or any(
                failing.ts < ts < ev.ts and any(_same(f, path) for f in files)
                for ts, files in edits
            ):
                gone.add(path)
                break
    return frozenset(gone)


def without_stale(output: str, gone: frozenset[str]) -> str:
    """The output less its compile errors in `gone` (and the lines that only echo a
    compile failure)."""
    stale = {
        ln
        for ln, files in compile_errors(output).lines
        if all(any(_same(f, g) for g in gone) for f in files)
    }
    return "\n".join(
        ln for ln in _clean(output) if ln not in stale and not _ECHO.search(ln.strip())
    )


def only_stale(output: str, gone: frozenset[str]) -> bool:
    """What the run said was only the compile errors in `gone`: nothing of it stands."""
    return bool(gone) and not _errors_in(without_stale(output, gone))
