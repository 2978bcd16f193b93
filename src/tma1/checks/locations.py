"""Error locations and error lines (design §2.15): `file:line` references in a failure
output and the line a developer would quote first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tma1.checks.text import FRAMING, LineTest, strip_ansi, unframe
from tma1.storable.textmemo import text_cache

# --- file:line references ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ref:
    path: str
    line: int
    python: bool = False  # from a `File "x.py", line N` traceback frame

    def __str__(self) -> str:
        return (
            f'File "{self.path}", line {self.line}' if self.python else f"{self.path}:{self.line}"
        )


_PY_TRACE_REF = re.compile(r'File "([^"]+)", line (\d+)')
_PATH = r"(?:[A-Za-z]:)?[\w.\-/\\@+~\[\]]*\w\.\w{1,10}"
_COLON_REF = re.compile(rf"(?:^|(?<=[\s(\[\"'=>]))({_PATH})(?::(\d+)(?::\d+)?|\((\d+),\d+\))")
_MAYBE_REF = re.compile(r"\w\.\w{1,10}(?::\d|\(\d)")
_COMPACT_REF = re.compile(rf"^({_PATH}): line (\d+), col \d+,", re.MULTILINE)
_STYLISH_FILE = re.compile(rf"^({_PATH})\s*$")
_STYLISH_ROW = re.compile(r"^\s+(\d+):\d+\s+(?:error|warning)\s+\S")
_STYLISH_ERROR = re.compile(r"^\s+(\d+):(\d+)\s+error\s+(.+)$")


def refs(output: str) -> list[Ref]:
    """Every `path:line` reference, first-seen order, one per (path, line)."""
    return list(_refs(output))


# A rule asks about the same few outputs for every file it considers.
@text_cache(maxsize=256)
def _refs(output: str) -> tuple[Ref, ...]:
    seen: dict[tuple[str, int], Ref] = {}

    def add(ref: Ref) -> None:
        seen.setdefault((ref.path, ref.line), ref)

    text = strip_ansi(output)
    stylish_file: str | None = None
    for line in text.replace("file://", "").splitlines():
        for tm in _PY_TRACE_REF.finditer(line):
            add(Ref(tm.group(1), int(tm.group(2)), python=True))
        if 'File "' in line:
            continue
        if m := _STYLISH_FILE.match(line):
            stylish_file = m.group(1)
            continue
        if stylish_file and (m := _STYLISH_ROW.match(line)):
            add(Ref(stylish_file, int(m.group(1))))
            continue
        if m := _COMPACT_REF.match(line):
            add(Ref(m.group(1), int(m.group(2))))
            continue
        if not _MAYBE_REF.search(line):
            continue
        for m in _COLON_REF.finditer(line):
            if "://" in line[max(0, m.start() - 8) : m.start() + 3]:
                continue
            add(Ref(m.group(1), int(m.group(2) or m.group(3))))
    return tuple(seen.values())


def _same_file(ref_path: str, path: str) -> bool:
    ref_norm = ref_path.replace("\\", "/")
    full = path.replace("\\", "/")
    if ref_norm.rsplit("/", 1)[-1] != full.rsplit("/", 1)[-1]:
        return False
    rel = ref_norm.lstrip("./") if not ref_norm.startswith("/") else ref_norm
    return full.endswith("/" + rel) or full == rel or "/" not in rel


# --- the most telling error line -----------------------------------------------------
#
# Tiers, best first; within a tier the first matching line wins. Located compiler and
# linter diagnostics say the most (what and where); then a Python exception or assertion
# detail; then a test runner's failure line; then any generic error wording.

_RUFF_CODE = re.compile(r"^[A-Z]{1,6}\d{2,4} (?:\[\*\] )?[`A-Z]")
TIER_LOCATED = (
    re.compile(rf"^{_PATH}\(\d+,\d+\): error TS\d+: \S"),  # tsc
    re.compile(rf"^{_PATH}:\d+:\d+ - error TS\d+: \S"),  # tsc --pretty
    re.compile(rf"^{_PATH}:\d+(?::\d+)?: (?:fatal )?error: \S"),  # gcc/clang
    re.compile(r"^error(?:\[E\d+\])?: (?!could not compile|aborting due|test failed)\S"),
    re.compile(rf"^{_PATH}:\d+:\d+: (?!warning:|note:)\S"),  # go build / vet / golangci
    re.compile(rf"^{_PATH}: line \d+, col \d+, Error - \S"),  # eslint compact
    _RUFF_CODE,  # ruff's full format: `F401 [*] message`, its ` --> file:line` below
)
_PY_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b(?::.*)?$")
TIER_DETAIL = (
    re.compile(r"^E\s{2,}\S"),  # pytest assertion detail
    re.compile(r"^(?:FAILED|ERROR)\s+\S+\.py(?:::\S+)?\s+-\s+\S"),  # pytest summary with cause
    re.compile(r"^\s*\[?(?:\w+)?(?:Assertion)?Error(?:\s\[\w+\])?: \S"),  # JS/TS error
    re.compile(r"^\s*thread '.+' panicked at"),  # rust test panic
    re.compile(r"^panic: "),
    re.compile(r"^Failed asserting that\b"),  # PHPUnit
    re.compile(r"^\s*Failure/Error: \S"),  # rspec
)
_TIER_TEST = (
    re.compile(r"^\s*--- FAIL: \S"),
    re.compile(r"^\s*● (?!Test suite failed to run|Console)\S"),  # jest
    re.compile(r"^\s*FAIL\s+\S+\s+>\s"),
    re.compile(r"^\s*[✕×✗]\s+\S"),
    re.compile(r"^(?:FAIL|ERROR): \w+ \("),
    re.compile(r"^(?:FAILED|ERROR)\s+\S+\.py"),
    re.compile(r"^test \S+ \.\.\. FAILED"),
    re.compile(r"^rspec \S+:\d+"),
    re.compile(rf"^{_PATH}:\d+: \S"),  # pytest location line, go test log line
    re.compile(r"^\s*FAIL\s+\S"),
    re.compile(r"\b[1-9]\d* (?:failed|failing)\b"),  # a runner's summary line
)
_TIER_GENERIC = (
    re.compile(r"^\[(?:warn|error)\] Code style issues"),  # prettier --check
    re.compile(r"\berror(?:\[\w+\])?:", re.IGNORECASE),
    re.compile(r"^npm ERR! (?!code|errno|path|syscall|A complete log)\S"),
    re.compile(r"^(?:g?make|ninja)(?:\[\d+\])?: \*\*\*"),
    re.compile(r"\b(?:undefined|cannot find|not found|no such|denied)\b", re.IGNORECASE),
    re.compile(r"\bfail(?:ed|ure)?\b", re.IGNORECASE),
)


# Lowercase text that every match of an unanchored tier pattern contains (see LineTest).
_NEEDS: dict[re.Pattern[str], tuple[str, ...]] = {
    _TIER_TEST[-1]: ("fail",),
    _TIER_GENERIC[1]: ("error",),
    # "no " rather than "no such": IGNORECASE also takes the long s (ſ) for an s.
    _TIER_GENERIC[4]: ("undefined", "cannot find", "not found", "no ", "denied"),
    _TIER_GENERIC[5]: ("fail",),
}
_TIER_TESTS: dict[tuple[re.Pattern[str], ...], LineTest] = {
    t: LineTest(t, _NEEDS, heads=(_PATH,))
    for t in (TIER_LOCATED, TIER_DETAIL, _TIER_TEST, _TIER_GENERIC)
}
_NOISE = re.compile(
    r"^(?:Exit code:? -?\d+|Command exited with non-zero status code -?\d+|"
    r"Process exited with code -?\d+|FAIL(?:ED)?|=+(?: [A-Za-z ]+ =+)?|-+|\^+|~+|"
    r"\[Request interrupted.*\]|"
    r"> .*|(?:ok|\?)\s+\S+\s.*|npm ERR! (?:code|errno|path|syscall|A complete log).*|"
    # A source excerpt under a diagnostic (ruff, rustc): the code, not the error.
    r"\d*\s*\|(?:\s.*)?)$"
)
_LOG_LINE = re.compile(
    r"^(?:(?:stdout|stderr) \||(?:npm|yarn|pnpm) (?:warn|WARN|notice)\b|"
    r"\s*\"\w+\": |time=\S+ level=|"
    r"\d{4}-\d\d-\d\dT\S+\s|\[\d\d:\d\d:\d\d\]|"
    # uv setting up the environment before the tool runs.
    r"(?:Using CPython|Creating virtual environment|Installed \d+ packages?|Resolved \d+ packages?|"
    r"Prepared \d+ packages?|Uninstalled \d+ packages?|Audited \d+ packages?)\b|"
    r"\s+Buil(?:t|ding) \S+ @ )"
)
_MAX_LINE = 300


def _noise(line: str) -> bool:
    """A stripped line no developer would quote: the agent's framing, separators, echoes."""
    return bool(_NOISE.match(line) or FRAMING.match(line))


# How many lines after a header or a reference still belong to its failure's report.
DETAIL_WINDOW = 20


def python_exception_line(lines: list[str]) -> str | None:
    """The exception line that ends a Python traceback."""
    in_trace = False
    found: str | None = None
    for ln in lines:
        if ln.startswith("Traceback (most recent call last):"):
            in_trace = True
            continue
        if in_trace and ln and not ln[0].isspace():
            if _PY_EXCEPTION.match(ln):
                found = found or ln
            in_trace = False
    return found


def _eslint_stylish_errors(lines: list[str]) -> list[str]:
    """eslint's default output puts the file on its own line; join it to each error row."""
    out: list[str] = []
    current: str | None = None
    for ln in lines:
        # An error row is indented; a file line is a path alone (no blank before its end):
        # most lines are neither, and those are told by a character, not a path scan.
        if ln[:1].isspace():
            if current and (m := _STYLISH_ERROR.match(ln)):
                out.append(f"{current}:{m.group(1)}:{m.group(2)}: {m.group(3).strip()}")
        elif " " not in ln.rstrip() and (m := _STYLISH_FILE.match(ln)):
            current = m.group(1)
    return out


def _rustc_location(lines: list[str], i: int) -> str:
    for nxt in lines[i + 1 : i + 3]:
        s = nxt.strip()
        if s.startswith("--> "):
            return " " + s
    return ""


# Asked again about the same failure at every detection while it stays recent (and live,
# about the same text read back each time): a text over 4,096 characters is keyed by
# its digest (tma1.storable.textmemo), so the cache never holds a whole big output.
@text_cache(maxsize=256)
def error_line(output: str) -> str | None:
    """The line a developer would quote first, or the first non-blank line (the quote about
    one file's error: `error_line_of_file`)."""
    raw = [ln.rstrip() for ln in unframe(strip_ansi(output)).splitlines()]
    lines = [ln for ln in raw if ln.strip() and not _noise(ln.strip())]
    if not lines:
        return None
    usable = [ln for ln in lines if not _LOG_LINE.match(ln)]

    def tier(patterns: tuple[re.Pattern[str], ...], by_pattern: bool = False) -> str | None:
        """First matching line; with `by_pattern`, the earlier pattern outranks the line."""
        # One test a line for the whole tier; only its hits are searched pattern by
        # pattern (a 16 KB output is hundreds of lines).
        found = _TIER_TESTS[patterns]  # once: a tuple of patterns is slow to hash
        hits = [ln for ln in usable if found(ln)]
        if not by_pattern:
            return hits[0] if hits else None
        return next((ln for p in patterns for ln in hits if p.search(ln)), None)

    if hit := tier(TIER_LOCATED):
        if hit.startswith("error") or _RUFF_CODE.match(hit):
            hit += _rustc_location(lines, lines.index(hit))
        return short_line(hit)
    if stylish := _eslint_stylish_errors(raw):
        return short_line(stylish[0])
    if hit := python_exception_line(raw) or tier(TIER_DETAIL, by_pattern=True):
        return short_line(hit)
    for patterns in (_TIER_TEST, _TIER_GENERIC):
        if hit := tier(patterns, by_pattern=True):
            return short_line(hit)
    first = next((ln for ln in lines if not _LOG_LINE.match(ln)), lines[0])
    return short_line(first)


def _refers_to(line: str, path: str, base: str) -> bool:
    """`line` holds a reference to `path`, whose basename is `base` (tested first: cheap)."""
    return base in line and any(_same_file(r.path, path) for r in refs(line))


def _line_about_file(raw: list[str], lines: list[str], path: str, base: str) -> str | None:
    """The error the output reports about this file: a located diagnostic naming it, or
    the error right after a reference to it (a stack frame, a traceback, node's ESM
    loader)."""
    about = [ln for ln in lines if base in ln and not _LOG_LINE.match(ln)]
    own = [ln for ln in about if _refers_to(ln, path, base)]
    for ln in own or about:
        if any(p.search(ln) for p in TIER_LOCATED):
            return ln
    for ln in _eslint_stylish_errors(raw):
        if base in ln:
            return ln
    for i, ln in enumerate(raw):
        if not _refers_to(ln, path, base):
            continue
        block = raw[i + 1 : i + 1 + DETAIL_WINDOW]
        if py := python_exception_line(["Traceback (most recent call last):", *block]):
            return py
        for b in block:
            if any(p.search(b) for p in TIER_DETAIL):
                return b
    return None


def short_line(line: str) -> str:
    one = line.strip()
    return one if len(one) <= _MAX_LINE else one[: _MAX_LINE - 1] + "…"


# --- error locations (design §2.15) ---------------------------------------------------------
#
# Where the failure is: the `file:line` of error lines only. A coverage table lists every
# file of the project, a passing test's line and a warning are no error — on real
# sessions those made every edited file look "named" by a failure.

_COVERAGE_ROW = re.compile(
    r"^\s*[\w./@\-\[\]]+\s*\|\s*[\d.]+\s*\||"  # istanbul text table: `file.ts | 80 | …`
    r"^[\w./\-]+\.\w+\s+\d+\s+\d+\s+(?:\d+\s+\d+\s+)?\d+%"  # coverage.py: `a.py 12 3 75% 4-6`
)
_PASSING_LINE = re.compile(r"^\s*(?:[✓✔√]\s|PASS\s|ok\s|--- PASS|\S+ PASSED\b|test \S+ \.\.\. ok)")
# A deprecation notice (staticcheck SA1019, tsc 6385, Python's DeprecationWarning) is a
# warning whatever the tool calls it: the code still builds, and it is rarely the edit's.
_WARNING_LINE = re.compile(
    r"\bwarning\b|\bwarn\b|^\s*\d+:\d+\s+warning\s|\b(?:is|been|was) deprecated\b|SA1019",
    re.IGNORECASE,
)
_BLOCK_HEAD = re.compile(r"^(?:warning|error)(?:\[\w+\])?:", re.IGNORECASE)


def error_text(output: str) -> str:
    """The output without coverage rows, passing-test lines and warnings (a rustc warning's
    `--> file:line` continuation lines go with it)."""
    kept: list[str] = []
    in_warning = False
    for line in strip_ansi(output).splitlines():
        stripped = line.strip()
        if not stripped or not line[:1].isspace():
            # A block ends at a blank or unindented line; a `warning:` head starts one.
            in_warning = bool(_BLOCK_HEAD.match(stripped)) and stripped[:1] in "wW"
        if in_warning or _COVERAGE_ROW.match(line) or _PASSING_LINE.match(line):
            continue
        if _WARNING_LINE.search(line) and "error" not in line.lower():
            continue
        kept.append(line)
    return "\n".join(kept)


@text_cache(maxsize=256)
def error_locations(output: str) -> tuple[Ref, ...]:
    """`file:line` of the output's error lines (compiler, linter, test stack frames)."""
    if not _MAYBE_REF.search(output) and 'File "' not in output:
        return ()
    return _refs(error_text(output))


def located_in(output: str, path: str) -> Ref | None:
    """The first error location in `path` (same file, compatible directories)."""
    return next((ref for ref in error_locations(output) if _same_file(ref.path, path)), None)


def lines_in(output: str, path: str) -> list[int]:
    """The lines of `path` the output's error locations point at."""
    return [ref.line for ref in error_locations(output) if _same_file(ref.path, path)]


def error_line_of_file(output: str, path: str) -> str | None:
    """An error line of that very file, to quote when telling the agent it broke it: the
    line holding its location, or the error right after its stack frame. None rather
    than another file's error."""
    text = error_text(output)
    base = path.replace("\\", "/").rsplit("/", 1)[-1]
    if base not in text:
        return None
    raw = [ln.rstrip() for ln in text.splitlines()]
    # rustc puts the location under the message: `error[E0425]: …` then ` --> f.rs:12:5`.
    for i, ln in enumerate(raw):
        arrow = ln.strip()
        if arrow.startswith("--> ") and _refers_to(arrow, path, base):
            for prev in reversed(raw[max(0, i - 3) : i]):
                if prev.startswith("error"):
                    return short_line(f"{prev.strip()} {arrow}")
    lines = [ln for ln in raw if ln.strip() and not _noise(ln.strip())]
    if hit := _line_about_file(raw, lines, path, base):
        return short_line(hit)
    ref = located_in(output, path)
    if ref is None:
        return None
    shown = str(ref)
    for ln in text.splitlines():
        if shown in ln or f"{ref.path}:{ref.line}" in ln:
            return short_line(ln)
    return None
