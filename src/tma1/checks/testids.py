"""Test identifiers in a runner's output (design §2.11): failing ones, passing ones, the
file a test id names, and the error line of one failing test.
"""

from __future__ import annotations

import re

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


def extract_test_ids(output: str) -> list[str]:
    """Distinct failing test identifiers in first-seen order. A bare `FAIL` is no id."""
    specific: dict[str, None] = {}
    containers: dict[str, None] = {}
    bullets: list[str] = []
    go_pending = False  # a `--- FAIL` since the last package summary line
    js_file: str | None = None
    in_mocha = False
    mocha_parts: list[str] | None = None
    mocha_indent = 0

    def add(tid: str, into: dict[str, None]) -> None:
        if tid and len(tid) <= _MAX_ID and not _NOT_AN_ID.match(tid):
            into.setdefault(tid, None)

    for raw in strip_ansi(output).splitlines():
        line = raw.rstrip()
        if mocha_parts is not None:
            indent = len(line) - len(line.lstrip())
            if line.strip() and indent > mocha_indent and len(mocha_parts) < 12:
                mocha_parts.append(line.strip())
                if line.endswith(":"):
                    add(_clean_id(" ".join(mocha_parts))[:-1].rstrip(), specific)
                    mocha_parts = None
                continue
            mocha_parts = None
        if not line.strip() or not _ANY_TEST_LINE.match(line):
            continue
        if m := _GO_TEST.match(line):
            add(m.group(1), specific)
            go_pending = True
        elif m := _JS_FAIL.match(line):
            if m.group(2):
                add(_clean_id(m.group(1) + m.group(2)), specific)
            else:
                js_file = m.group(1)
                add(js_file, containers)
        elif m := _GO_PKG_FAIL.match(line):
            # `[build failed]`/`[setup failed]`: nothing ran, so no test is stuck — the
            # compile error is the build rules' business.
            if not go_pending and "failed]" not in (m.group(2) or ""):
                add(m.group(1), containers)
            go_pending = False
        elif _GO_PKG_DONE.match(line):
            go_pending = False
        elif m := _UNITTEST.match(line):
            name, where = m.group(1), m.group(2)
            add(where if where.endswith("." + name) else f"{where}.{name}", specific)
        elif m := _JEST_DOT.match(line):
            title = _clean_id(m.group(1))
            if title and not title.startswith(_JEST_NOT_TESTS):
                add(f"{js_file} > {title}" if js_file else title, specific)
        elif m := _X_BULLET.match(line):
            title = _clean_id(m.group(1))
            if re.match(rf"^{_JS_FILE} > ", title):
                add(title, specific)
            else:
                bullets.append(f"{js_file} > {title}" if js_file else title)
        elif m := next(filter(None, (p.match(line) for p in _NAMED_BY_GROUP_1)), None):
            add(m.group(1), specific)
        elif _MOCHA_FAILING.match(line):
            in_mocha = True
        elif in_mocha and (m := _MOCHA_HEAD.match(line)):
            title = m.group(2).strip()
            if title.endswith(":"):
                add(_clean_id(title[:-1]), specific)
            else:
                mocha_parts, mocha_indent = [title], len(m.group(1))

    # `✕ name` lines only when nothing more specific named the tests (jest prints both).
    if not any(" > " in t for t in specific):
        for b in bullets:
            add(b, specific)
    out = list(specific)
    # A Go test with failing subtests is named by its subtests.
    out = [t for t in out if not any(o.startswith(t + "/") for o in out if "/" in o)]
    for c in containers:
        if not any(t.startswith(c + " > ") for t in out):
            out.append(c)
    return out


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
