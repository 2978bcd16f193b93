"""Test identifiers in a runner's output (design §2.11): failing ones, passing ones, the
file a test id names, and the error line of one failing test.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from tma1.checks.locations import (
    DETAIL_WINDOW,
    TIER_DETAIL,
    TIER_LOCATED,
    python_exception_line,
    short_line,
)
from tma1.checks.text import any_of, strip_ansi

# --- test identifiers (design §2.11) -------------------------------------------------
#
# Ids are as specific as the output allows, one per failing test: a test inside a file
# (`test/x.test.ts > Suite > name`, `tests/test_x.py::test_y`), a Go test (`TestX/sub`),
# a cargo test path, `mod.Class.test_x` for unittest, `Ns\FooTest::testBar` for PHPUnit,
# `./spec/x_spec.rb:12` for rspec, the joined title for mocha. A container (a Go package,
# a JS test file) is an id only when the output names no failing test inside it — so a
# stuck test is one id, not three.

_GO_TEST = re.compile(r"^\s*--- FAIL: (\S+)")
_GO_PKG_FAIL = re.compile(r"^FAIL\s+([\w.\-~]+(?:/[\w.\-~]+)*)(\s+\[[^\]]*\]|\s+\S+s)?\s*$")
_GO_PKG_DONE = re.compile(r"^(?:ok|\?)\s+[\w.\-~]+(?:/[\w.\-~]+)*\s")
_PYTEST_SUMMARY = re.compile(r"^(?:FAILED|ERROR)\s+(\S+\.py(?:::\S+)?)(?:\s+-\s.*)?\s*$")
_PYTEST_VERBOSE = re.compile(r"^(\S+\.py::\S+)\s+(?:FAILED|ERROR)\b")
_UNITTEST = re.compile(r"^(?:FAIL|ERROR): (\w+) \(([\w.]+)\)")
_JS_FILE = r"[^\s>]+\.(?:[cm]?[jt]sx?|vue|svelte)"
_JS_FAIL = re.compile(rf"^\s*FAIL\s+(?:\|[^|]+\|\s+)?({_JS_FILE})(\s+>\s+.+)?(?:\s.*)?$")
_JEST_DOT = re.compile(r"^\s*● (.+)$")
_X_BULLET = re.compile(r"^\s*[✕×✗]\s+(.+)$")
_CARGO = re.compile(r"^test\s+(\S+)\s+\.\.\.\s+FAILED\b")
_CARGO_STDOUT = re.compile(r"^---- (\S+) stdout ----\s*$")
_RSPEC = re.compile(r"^rspec\s+(\S+:\d+)(?:\s|$)")
_PHPUNIT = re.compile(r"^\d+\) ((?:[\w\\]+\\)?\w+::\w+)")
_MOCHA_FAILING = re.compile(r"^\s*\d+ failing\b")
_MOCHA_HEAD = re.compile(r"^(\s*)\d+\) (.+)$")
# Lines whose first group is a failing test's id (none of them matches a line another
# pattern of `extract_test_ids` takes first).
_NAMED_BY_GROUP_1 = (_PYTEST_SUMMARY, _PYTEST_VERBOSE, _CARGO, _CARGO_STDOUT, _RSPEC, _PHPUNIT)
# A line no pattern of `extract_test_ids` matches at its start adds nothing: one match
# rules it out (most lines of a long failure output).
_ANY_TEST_LINE = any_of(
    (_GO_TEST, _GO_PKG_FAIL, _GO_PKG_DONE, _PYTEST_SUMMARY, _PYTEST_VERBOSE, _UNITTEST,
     _JS_FAIL, _JEST_DOT, _X_BULLET, _CARGO, _CARGO_STDOUT, _RSPEC, _PHPUNIT, _MOCHA_FAILING,
     _MOCHA_HEAD)
)  # fmt: skip

_DURATION_TAIL = re.compile(r"\s+(?:\(\s*\d+(?:\.\d+)?\s*m?s\s*\)|\d+(?:\.\d+)?\s*m?s)$")
_VITEST_PROJECT_TAIL = re.compile(r"\s+\[\s*[^\]]+\s*\]$")
_NOT_AN_ID = re.compile(r"^(?:\d+|ok|passed|failed|tests?|FAIL(?:ED)?)$", re.IGNORECASE)
_JEST_NOT_TESTS = ("Test suite failed to run", "Console")
_MAX_ID = 300


def _clean_id(raw: str) -> str:
    tid = " ".join(raw.split())
    tid = _DURATION_TAIL.sub("", tid)
    tid = _VITEST_PROJECT_TAIL.sub("", tid)
    return tid.replace(" › ", " > ").strip()


@dataclass(slots=True)
class _Failures:
    """What `extract_test_ids` has read so far: the ids found, and the state a later line
    is read in (the JS file a report is under, a Go test failing since the last package
    line, a mocha `N failing` list and the title it is in the middle of)."""

    specific: dict[str, None] = field(default_factory=dict)
    containers: dict[str, None] = field(default_factory=dict)
    bullets: list[str] = field(default_factory=list)
    go_pending: bool = False  # a `--- FAIL` since the last package summary line
    js_file: str | None = None
    in_mocha: bool = False
    mocha_parts: list[str] | None = None
    mocha_indent: int = 0

    def add(self, tid: str, into: dict[str, None]) -> None:
        if tid and len(tid) <= _MAX_ID and not _NOT_AN_ID.match(tid):
            into.setdefault(tid, None)

    def in_js_file(self, title: str) -> str:
        return f"{self.js_file} > {title}" if self.js_file else title

    def mocha_title_goes_on(self, line: str) -> bool:
        """A mocha title runs over indented lines up to the one ending in `:`: True when
        `line` is one of them (and read)."""
        assert self.mocha_parts is not None
        indent = len(line) - len(line.lstrip())
        if not (line.strip() and indent > self.mocha_indent and len(self.mocha_parts) < 12):
            self.mocha_parts = None
            return False
        self.mocha_parts.append(line.strip())
        if line.endswith(":"):
            self.add(_clean_id(" ".join(self.mocha_parts))[:-1].rstrip(), self.specific)
            self.mocha_parts = None
        return True

    def go_test(self, m: re.Match[str]) -> None:
        self.add(m.group(1), self.specific)
        self.go_pending = True

    def js_fail(self, m: re.Match[str]) -> None:
        if m.group(2):
            self.add(_clean_id(m.group(1) + m.group(2)), self.specific)
        else:
            self.js_file = m.group(1)
            self.add(self.js_file, self.containers)

    def go_package_fail(self, m: re.Match[str]) -> None:
        # `[build failed]`/`[setup failed]`: nothing ran, so no test is stuck — the
        # compile error is the build rules' business.
        if not self.go_pending and "failed]" not in (m.group(2) or ""):
            self.add(m.group(1), self.containers)
        self.go_pending = False

    def go_package_done(self, m: re.Match[str]) -> None:
        self.go_pending = False

    def unittest(self, m: re.Match[str]) -> None:
        name, where = m.group(1), m.group(2)
        self.add(where if where.endswith("." + name) else f"{where}.{name}", self.specific)

    def jest_dot(self, m: re.Match[str]) -> None:
        title = _clean_id(m.group(1))
        if title and not title.startswith(_JEST_NOT_TESTS):
            self.add(self.in_js_file(title), self.specific)

    def x_bullet(self, m: re.Match[str]) -> None:
        title = _clean_id(m.group(1))
        if re.match(rf"^{_JS_FILE} > ", title):
            self.add(title, self.specific)
        else:
            self.bullets.append(self.in_js_file(title))

    def named(self, m: re.Match[str]) -> None:
        self.add(m.group(1), self.specific)

    def mocha_failing(self, m: re.Match[str]) -> None:
        self.in_mocha = True

    def mocha_head(self, m: re.Match[str]) -> None:
        if not self.in_mocha:
            return
        title = m.group(2).strip()
        if title.endswith(":"):
            self.add(_clean_id(title[:-1]), self.specific)
        else:
            self.mocha_parts, self.mocha_indent = [title], len(m.group(1))

    def ids(self) -> list[str]:
        # `✕ name` lines only when nothing more specific named the tests (jest prints both).
        if not any(" > " in t for t in self.specific):
            for b in self.bullets:
                self.add(b, self.specific)
        out = list(self.specific)
        # A Go test with failing subtests is named by its subtests.
        out = [t for t in out if not any(o.startswith(t + "/") for o in out if "/" in o)]
        for c in self.containers:
            if not any(t.startswith(c + " > ") for t in out):
                out.append(c)
        return out


# A test line's pattern and what it adds, asked in this order; the first that matches reads
# the line.
_FAILURE_LINES: tuple[tuple[re.Pattern[str], Callable[[_Failures, re.Match[str]], None]], ...] = (
    (_GO_TEST, _Failures.go_test),
    (_JS_FAIL, _Failures.js_fail),
    (_GO_PKG_FAIL, _Failures.go_package_fail),
    (_GO_PKG_DONE, _Failures.go_package_done),
    (_UNITTEST, _Failures.unittest),
    (_JEST_DOT, _Failures.jest_dot),
    (_X_BULLET, _Failures.x_bullet),
    *((p, _Failures.named) for p in _NAMED_BY_GROUP_1),
    (_MOCHA_FAILING, _Failures.mocha_failing),
    (_MOCHA_HEAD, _Failures.mocha_head),
)


def extract_test_ids(output: str) -> list[str]:
    """Distinct failing test identifiers in first-seen order. A bare `FAIL` is no id."""
    found = _Failures()
    for raw in strip_ansi(output).splitlines():
        line = raw.rstrip()
        if found.mocha_parts is not None and found.mocha_title_goes_on(line):
            continue
        if not line.strip() or not _ANY_TEST_LINE.match(line):
            continue
        for pattern, take in _FAILURE_LINES:
            if m := pattern.match(line):
                take(found, m)
                break
    return found.ids()


def file_of_test_id(test_id: str, *, guess: bool = False) -> str | None:
    """The test file a test id names, when it names one (pytest, jest/vitest, rspec).

    `guess`: else whatever the id's head looks like a path (`a/b`, `x.ext`), after its
    `::…` and `:line` (the follow gate looks for a read of it; a rule names only a sure file).
    """
    if "::" in test_id and test_id.split("::", 1)[0].endswith(".py"):
        return test_id.split("::", 1)[0]
    if m := re.match(rf"^({_JS_FILE})(?: > |$)", test_id):
        return m.group(1)
    if m := re.match(r"^(\S+\.rb):\d+$", test_id):
        return m.group(1)
    if guess:
        head = test_id.split("::", 1)[0].strip()
        head = re.sub(r":\d+$", "", head).removeprefix("./")
        if " " not in head and ("/" in head or re.search(r"\.[A-Za-z]{1,6}$", head)):
            return head
    return None


# --- the error line of one failing test --------------------------------------------------

_PYTEST_CAUSE = re.compile(r"^(?:FAILED|ERROR)\s+(\S+)\s+-\s+(.+)$")
_GO_TEST_LOG = re.compile(r"^\s+\S+_test\.go:\d+: \S")
_JEST_EXPECT = re.compile(r"^\s*expect\(.*\)\.\w+")
_GO_TEST_NAME = re.compile(r"^(?:Test|Benchmark|Example|Fuzz)\w*(?:/\S*)?$")
# The start of another test's report: a failure's detail block ends there.
_NEXT_HEADER = re.compile(
    r"^\s*(?:--- (?:FAIL|PASS)|=== RUN|FAIL\s|[✕×✓✗]\s|● |\d+\) |---- |_{3,} |(?:FAIL|ERROR): )"
)


def _test_needle(test_id: str) -> str:
    """Text that the failure's own header line contains."""
    if " > " in test_id:
        first, rest = test_id.split(" > ", 1)
        return rest if re.match(rf"^{_JS_FILE}$", first) else test_id
    if _GO_TEST_NAME.match(test_id):
        return f"--- FAIL: {test_id} "
    if re.match(r"^[\w.]+\.\w+$", test_id):
        return test_id.rsplit(".", 1)[1] + " ("  # unittest header `FAIL: test_x (…)`
    return test_id


def error_line_for_test(output: str, test_id: str) -> str | None:
    """The error a failing test reported (its assertion, exception or log line), or None.

    None rather than some other test's error: quoting the wrong failure misleads.
    """
    raw = [ln.rstrip() for ln in strip_ansi(output).splitlines()]
    for ln in raw:
        m = _PYTEST_CAUSE.match(ln.strip())
        if m and m.group(1) == test_id:
            return short_line(m.group(2))
    needle = _test_needle(test_id)
    for i, ln in enumerate(raw):
        norm = " ".join(ln.replace(" › ", " > ").split()) + " "
        if needle not in norm:
            continue
        block: list[str] = []
        for b in raw[i + 1 : i + 1 + DETAIL_WINDOW]:
            if _NEXT_HEADER.match(b):
                break
            if b.strip():
                block.append(b)
        py = python_exception_line(block)
        if py:
            return short_line(py)
        for patterns in (TIER_LOCATED, TIER_DETAIL, (_GO_TEST_LOG, _JEST_EXPECT)):
            for b in block:
                if any(p.search(b) for p in patterns):
                    return short_line(b)
    return None


# --- passing tests (design §2.15: a failing test id is open until a run reports it passed) --

_PASS_FILE = re.compile(rf"^\s*PASS\s+(?:\|[^|]+\|\s+)?({_JS_FILE})(?:\s|$)")
_CHECK_BULLET = re.compile(r"^\s*[✓✔√]\s+(.+)$")
_GO_PASS = re.compile(r"^\s*--- PASS: (\S+)")
_GO_OK = re.compile(r"^ok\s+([\w.\-~]+(?:/[\w.\-~]+)*)\s")
_PYTEST_PASSED = re.compile(r"^(?:PASSED\s+(\S+\.py::\S+)|(\S+\.py::\S+)\s+PASSED\b)")
_CARGO_OK = re.compile(r"^test\s+(\S+)\s+\.\.\.\s+ok\b")
_UNITTEST_OK = re.compile(r"^(\w+) \(([\w.]+)\)(?: \.\.\.|\n).*\bok$")
_VITEST_FILE_COUNT = re.compile(rf"^({_JS_FILE})\s+\(\d+ tests?\)")
_ANY_PASS_LINE = re.compile(r"PASS|[✓✔√]|^ok\s|\.\.\. ok|PASSED")


def extract_passed_ids(output: str) -> list[str]:
    """Tests and test files a run reports passing, in the spelling `extract_test_ids` uses
    for failing ones: `PASS file`, `✓ name` (as `file > name` under a file header),
    `--- PASS: TestX`, `ok pkg`, `PASSED id` / `id PASSED`, `test x ... ok`."""
    out: dict[str, None] = {}
    js_file: str | None = None
    for raw in strip_ansi(output).splitlines():
        line = raw.rstrip()
        if not line or not _ANY_PASS_LINE.search(line):
            if m := _JS_FAIL.match(line):
                js_file = m.group(1)
            continue
        if m := _PASS_FILE.match(line):
            js_file = m.group(1)
            out.setdefault(js_file, None)
        elif m := _CHECK_BULLET.match(line):
            title = _clean_id(m.group(1))
            if fm := _VITEST_FILE_COUNT.match(title):
                out.setdefault(fm.group(1), None)
            elif re.match(rf"^{_JS_FILE} > ", title):
                out.setdefault(title, None)
            elif title:
                out.setdefault(f"{js_file} > {title}" if js_file else title, None)
        elif m := _GO_PASS.match(line) or _GO_OK.match(line) or _CARGO_OK.match(line):
            out.setdefault(m.group(1), None)
        elif m := _PYTEST_PASSED.match(line):
            out.setdefault(m.group(1) or m.group(2), None)
        elif m := _UNITTEST_OK.match(line):
            out.setdefault(f"{m.group(2)}.{m.group(1)}", None)
    return [t for t in out if len(t) <= _MAX_ID]


def reported_passing(test_id: str, passed: list[str] | tuple[str, ...]) -> bool:
    """A run that reported `passed` says `test_id` passes now: the id itself, its file
    (`PASS file`), or — jest/vitest print a passing test by its title alone — the same
    file's test with the same last title."""
    if not passed:
        return False
    if test_id in passed:
        return True
    test_file = file_of_test_id(test_id)
    if test_file is not None and test_file in passed:
        return True
    if " > " in test_id:
        file_part, _, rest = test_id.partition(" > ")
        last = rest.rsplit(" > ", 1)[-1]
        return any(
            p.startswith(file_part + " > ") and (p.endswith(" > " + last) or p == test_id)
            for p in passed
        )
    return False
