"""Pure text extraction from tool output: test identifiers, error lines, file:line refs.

Every function here is a pure function of strings, so the ingest path, the rules and
replay agree on what a failure says (design §2.8, §2.11).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


# --- test identifiers (design §2.11) -------------------------------------------------

# Each pattern's first group is the identifier. Order matters only for readability:
# every pattern is tried on every line, and an id is counted once per output.
_TEST_ID_PATTERNS: tuple[re.Pattern[str], ...] = (
    # go: "--- FAIL: TestX (0.00s)" and "FAIL\tgithub.com/x/pkg\t0.1s"
    re.compile(r"^\s*--- FAIL: (\S+)"),
    re.compile(r"^FAIL\s+([\w.\-]+(?:/[\w.\-]+)+)(?:\s|$)"),
    # pytest: "FAILED tests/test_x.py::test_y - AssertionError"
    re.compile(r"^\s*FAILED\s+(\S+::\S+)"),
    re.compile(r"^(\S+\.py::\S+)\s+FAILED\b"),
    # unittest: "FAIL: test_x (mod.Class)" / "ERROR: test_x (mod.Class.test_x)"
    re.compile(r"^(?:FAIL|ERROR): (\w+ \([\w.]+\))"),
    # jest/vitest: "FAIL src/x.test.ts" / " FAIL  src/x.test.ts > suite > name"
    re.compile(r"^\s*FAIL\s+(\S+\.(?:[cm]?[jt]sx?|vue|svelte))(?:\s|$)"),
    # jest/vitest/mocha-ish bullets: "✕ adds numbers (3 ms)" / "× adds numbers"
    re.compile(r"^\s*[✕×✗]\s+(.+?)(?:\s+\(\d+(?:\.\d+)?\s*m?s\))?\s*$"),
    # cargo: "test tests::it_works ... FAILED"
    re.compile(r"^test\s+(\S+)\s+\.\.\.\s+FAILED\b"),
    # rspec: "rspec ./spec/models/user_spec.rb:12 # User validates"
    re.compile(r"^rspec\s+(\./\S+:\d+)"),
    # mocha: "  1) Suite name test name:" (numbered failure headings)
    re.compile(r"^\s{0,4}\d+\) (\S.*?):?\s*$"),
    # PHPUnit: "1) Tests\\Unit\\FooTest::testBar"
    re.compile(r"^\d+\) ([\w\\]+::\w+)"),
)

# Lines that look like a test id match but are not (summaries, counts, bare FAIL).
_NOT_AN_ID = re.compile(r"^(?:\d+|ok|passed|failed|tests?)$", re.IGNORECASE)


def extract_test_ids(output: str) -> list[str]:
    """Distinct failing test identifiers in first-seen order. A bare `FAIL` is no id."""
    seen: dict[str, None] = {}
    for raw in strip_ansi(output).splitlines():
        line = raw.rstrip()
        if not line:
            continue
        for pat in _TEST_ID_PATTERNS:
            m = pat.match(line)
            if m:
                tid = m.group(1).strip()
                if tid and not _NOT_AN_ID.match(tid) and len(tid) <= 300:
                    seen.setdefault(tid, None)
                break
    return list(seen)


# --- failure markers for masked failures (design §2.8) -------------------------------

# A command that runs a test runner or a build tool. Matched anywhere in the command so
# `cd web && npm test 2>&1 | tail -30` counts.
_RUNNER = re.compile(
    r"(?:^|[\s;&|(/])(?:"
    r"pytest|py\.test|tox|nox|go\s+(?:test|build|vet|run)|golangci-lint|"
    r"(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?(?:test|build|lint|typecheck|type-check|check|tsc)\S*|"
    r"npx\s+(?:vitest|jest|tsc|eslint|mocha|playwright)|vitest|jest|mocha|tsc|eslint|"
    r"cargo\s+(?:test|build|check|clippy|nextest|run)|rustc|"
    r"make|cmake|ninja|gcc|g\+\+|clang\+?\+?|mvn|gradle|gradlew|"
    r"rspec|bundle\s+exec\s+rspec|rake|phpunit|"
    r"python3?\s+-m\s+(?:pytest|unittest|mypy)|mypy|pyright|ruff|"
    r"dotnet\s+(?:test|build)|swift\s+(?:test|build)|deno\s+test"
    r")(?=$|[\s;&|)])"
)

_FAILURE_MARKERS: tuple[re.Pattern[str], ...] = (
    re.compile(r"^\s*FAIL(?:ED)?\b", re.MULTILINE),
    re.compile(r"^\s*--- FAIL\b", re.MULTILINE),
    re.compile(r"\b[1-9]\d* (?:failed|failing|failures?|errors?)\b"),
    re.compile(r"^\s*error(?:\[\w+\])?:", re.MULTILINE | re.IGNORECASE),
    re.compile(r"\berror TS\d+:"),
    re.compile(r"^\S+:\d+(?::\d+)?:\s*(?:fatal\s+)?error\b", re.MULTILINE),
    re.compile(r"^Traceback \(most recent call last\):", re.MULTILINE),
    re.compile(r"^(?:make|ninja): \*\*\*.*Error", re.MULTILINE),
    re.compile(r"^\s*\[ERROR\]", re.MULTILINE),
    re.compile(r"\bBUILD FAILED\b"),
)


def runs_build_or_test(command: str) -> bool:
    return bool(_RUNNER.search(command))


def has_failure_markers(output: str) -> bool:
    text = strip_ansi(output)
    return any(p.search(text) for p in _FAILURE_MARKERS)


def is_masked_failure(command: str | None, output: str | None) -> bool:
    """A successful Bash whose output shows a test/build failure the pipeline hid."""
    if not command or not output:
        return False
    return runs_build_or_test(command) and has_failure_markers(output)


# --- the most telling error line, and file:line references ---------------------------

_ERROR_LINE_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\berror(?:\[\w+\])?:", re.IGNORECASE),  # rustc, gcc, tsc, go vet
    re.compile(r"\berror TS\d+"),
    re.compile(r"^\w*(?:Error|Exception)\b.*:"),  # Python exception line
    re.compile(r"^E\s{2,}\S"),  # pytest assertion detail
    re.compile(r"^\s*(?:--- )?FAIL"),
    re.compile(r"\bpanic:"),
    re.compile(r"\b(?:undefined|cannot find|not found|no such)\b", re.IGNORECASE),
)
_NOISE = re.compile(r"^(?:Exit code \d+|Command exited with non-zero status code \d+)\s*$")


def error_line(output: str) -> str | None:
    """The line a developer would quote first, or the first non-blank line."""
    lines = [ln.strip() for ln in strip_ansi(output).splitlines()]
    lines = [ln for ln in lines if ln and not _NOISE.match(ln)]
    if not lines:
        return None
    for pat in _ERROR_LINE_PATTERNS:
        for ln in lines:
            if pat.search(ln):
                return ln[:300]
    return lines[0][:300]


_PY_TRACE_REF = re.compile(r'File "([^"]+)", line (\d+)')
_COLON_REF = re.compile(r"(?:^|[\s(\[\"'])(\.{0,2}/?[\w.\-/\\]+\.\w{1,6})[:(](\d+)(?:[:,]\d+)?")


def file_line_refs(output: str) -> list[tuple[str, int]]:
    """`path:line` references in output, first-seen order, Python traces included."""
    refs: dict[tuple[str, int], None] = {}
    text = strip_ansi(output)
    for m in _PY_TRACE_REF.finditer(text):
        refs.setdefault((m.group(1), int(m.group(2))), None)
    for m in _COLON_REF.finditer(text):
        refs.setdefault((m.group(1), int(m.group(2))), None)
    return list(refs)


def ref_for_file(output: str, path: str) -> str | None:
    """The first reference to `path` (matched by basename/suffix) as shown to a human."""
    base = path.replace("\\", "/").rsplit("/", 1)[-1]
    for ref_path, line in file_line_refs(output):
        norm = ref_path.replace("\\", "/")
        if norm.rsplit("/", 1)[-1] == base and (
            path.replace("\\", "/").endswith(norm.lstrip("./")) or "/" not in norm.lstrip("./")
        ):
            if _PY_TRACE_REF.search(f'File "{ref_path}", line {line}') and ref_path.endswith(".py"):
                return f'File "{ref_path}", line {line}'
            return f"{ref_path}:{line}"
    return None


def first_mentions(output: str, names: Iterable[str]) -> list[str]:
    text = output
    return [n for n in names if n and n in text]
