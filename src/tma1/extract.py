"""Pure text extraction from tool output: test identifiers, error lines, file:line refs.

Every function here is a pure function of strings, so the ingest path, the rules and
replay agree on what a failure says (design §2.8, §2.11). The patterns were fitted on
real agent sessions (Go + golangci-lint, TypeScript + vitest/tsc) and on the documented
output formats of the other runners.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import lru_cache

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def any_of(patterns: tuple[re.Pattern[str], ...]) -> re.Pattern[str]:
    """One regex that matches where any of `patterns` would (IGNORECASE kept per part)."""
    parts = []
    for p in patterns:
        if p.flags & ~(re.UNICODE | re.IGNORECASE):
            raise ValueError(f"any_of cannot combine flags {p.flags} of {p.pattern!r}")
        parts.append(f"(?i:{p.pattern})" if p.flags & re.IGNORECASE else f"(?:{p.pattern})")
    return re.compile("|".join(parts))


def _starts_anchored(p: re.Pattern[str]) -> bool:
    """The whole pattern is tied to the start of the text: `^` first, and no top-level
    alternative that could match elsewhere (`^a|b`)."""
    if not p.pattern.startswith("^"):
        return False
    depth, escaped, in_class = 0, False, False
    for ch in p.pattern:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            return False
    return True


def _lowered(text: str) -> str:
    low = text.lower()
    if not low.isascii():
        # IGNORECASE also takes `ı` and `İ` (which lower() makes `i̇`) for `i`.
        low = low.replace("ı", "i").replace("\u0307", "")
    return low


class LineTest:
    """Whether any of `patterns` is found in a line (`search`), cheaply.

    Python's regex engine tries an unanchored pattern at every position of the line, and
    it has no fast literal scan for one that starts with `\\b` or ignores case. So the
    patterns anchored at the start are one regex tried once (`match`), and each other one
    runs only on lines that contain one of its `needs` — lowercase text that every match
    contains, looked up in the line as `_lowered` makes it (tested:
    tests/engine/test_extract.py). Most lines of a long failure output
    contain none of the words, and `in` is many times faster than the regex.

    Anchored patterns that begin with one of `heads` (a whole regex, such as a file path)
    share it: `^head(?:rest1|rest2)` scans the head once where `^head rest1|^head rest2`
    scans it once per pattern, backtracking included."""

    __slots__ = ("_anchored", "_loose")

    def __init__(
        self,
        patterns: tuple[re.Pattern[str], ...],
        needs: dict[re.Pattern[str], tuple[str, ...]] | None = None,
        heads: tuple[str, ...] = (),
    ) -> None:
        needs = needs or {}
        anchored = tuple(p for p in patterns if _starts_anchored(p))
        self._anchored = _anchored_any(anchored, heads).match if anchored else None
        self._loose = tuple(
            (needs.get(p, ("",)), p.search) for p in patterns if not _starts_anchored(p)
        )

    def __call__(self, line: str) -> bool:
        if self._anchored is not None and self._anchored(line):
            return True
        if self._loose:
            low = _lowered(line)
            for words, search in self._loose:
                if any(w in low for w in words) and search(line):
                    return True
        return False


def _anchored_any(patterns: tuple[re.Pattern[str], ...], heads: tuple[str, ...]) -> re.Pattern[str]:
    """`any_of(patterns)` for patterns tied to the line start, with shared `heads` factored."""
    shared: dict[str, list[str]] = {}
    alone: list[re.Pattern[str]] = []
    for p in patterns:
        for head in heads:
            rest = p.pattern[1 + len(head) :]
            # The rest must stand alone: no quantifier of the head's last atom.
            if (
                p.pattern.startswith("^" + head)
                and not p.flags & re.IGNORECASE
                and not rest.startswith(("*", "+", "?", "{"))
            ):
                shared.setdefault(head, []).append(rest)
                break
        else:
            alone.append(p)
    parts = [f"^{head}(?:{'|'.join(f'(?:{r})' for r in rests)})" for head, rests in shared.items()]
    if alone:
        parts.append(any_of(tuple(alone)).pattern)
    return re.compile("|".join(f"(?:{part})" for part in parts))


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
        elif m := _PYTEST_SUMMARY.match(line) or _PYTEST_VERBOSE.match(line):
            add(m.group(1), specific)
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
        elif m := (
            _CARGO.match(line)
            or _CARGO_STDOUT.match(line)
            or _RSPEC.match(line)
            or _PHPUNIT.match(line)
        ):
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


def file_of_test_id(test_id: str) -> str | None:
    """The test file a test id names, when it names one (pytest, jest/vitest, rspec)."""
    if "::" in test_id and test_id.split("::", 1)[0].endswith(".py"):
        return test_id.split("::", 1)[0]
    if m := re.match(rf"^({_JS_FILE})(?: > |$)", test_id):
        return m.group(1)
    if m := re.match(r"^(\S+\.rb):\d+$", test_id):
        return m.group(1)
    return None


# --- does a command run a test runner or build tool? (design §2.8) -------------------

# Shell segments are split at pipes and list operators (`||`, `&&`, `|&`, `$(`, `|`, `;`,
# `(`, `)`, newline, backquote); each segment's command word is looked up after peeling
# wrappers (env assignments, `time`, `npx`, `python -m`, …).


def split_shell(command: str) -> list[tuple[str, str]]:
    """(simple command, the operator after it), splitting only outside quotes.

    An unbalanced quote keeps the rest of the line in one piece (agents' broken greps).
    """
    return list(_split_shell(command))


# One token at a time: a quoted string (to its closing quote, or to the end of the line
# when it has none), an escaped character, an operator, or a run of ordinary characters.
# A regex step per token, not a Python step per character: Codex sends whole patches as
# commands.
_SHELL_TOKEN = re.compile(
    r"""'[^']*'?|"(?:\\.|[^"\\])*"?|\\.|(\|\||&&|\|&|\$\(|[|;()\n`])|[^'"\\|&;()$\n`]+|.""",
    re.DOTALL,
)


@lru_cache(maxsize=4096)
def _split_shell(command: str) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    buf: list[str] = []
    for m in _SHELL_TOKEN.finditer(command):
        op = m.group(1)
        # `>|` is a redirect, not a pipe.
        if op and not (op == "|" and buf and buf[-1].endswith(">")):
            out.append(("".join(buf), op))
            buf = []
        else:
            buf.append(m.group(0))
    out.append(("".join(buf), ""))
    return tuple(out)


_WRAPPER = re.compile(
    r"^(?:[A-Za-z_]\w*=\S*\s+|sudo\s+(?:-\S+\s+)*|time\s+|nice\s+|env\s+|command\s+|exec\s+|"
    r"timeout\s+(?:-\S+\s+)*\d+\w?\s+|xvfb-run\s+|dotenv\s+(?:-\S+\s+)*--\s+|"
    r"npx\s+(?:--yes\s+|-y\s+)?|bunx\s+|pnpm\s+(?:exec|dlx)\s+|yarn\s+(?:exec|dlx)\s+|"
    r"uv\s+run\s+|poetry\s+run\s+|pipenv\s+run\s+|hatch\s+run\s+|pdm\s+run\s+|"
    r"bundle\s+exec\s+|python[\d.]*\s+-m\s+|(?:ba|z)?sh\s+-l?c\s+['\"]?|\S*/(?=\w))"
)
_RUNNER_HEAD = re.compile(
    r"^(?:"
    r"pytest|py\.test|tox|nox|unittest|mypy|pyright|ruff|flake8|pylint|"
    r"python[\d.]*\s+manage\.py\s+test|"
    r"go\s+(?:test|build|vet|run|install|generate)|golangci-lint|gotestsum|staticcheck|"
    r"(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?(?:test|build|lint|typecheck|type-check|check|"
    r"tsc|compile|ci|e2e|verify)[\w:.\-]*|npm\s+t|"
    r"vitest|jest|mocha|tsc|eslint|playwright|cypress|ava|tap|node\s+--test|"
    r"bun\s+test|deno\s+(?:test|check|lint)|"
    r"cargo\s+(?:test|build|check|clippy|nextest|run)|rustc|"
    r"make|gmake|cmake|ninja|meson|bazel|gcc|g\+\+|cc|c\+\+|clang\+?\+?|"
    r"mvn|mvnw|gradle|gradlew|ant|sbt|"
    r"rspec|rake|rails\s+test|phpunit|pest|composer\s+(?:test|run)|"
    r"dotnet\s+(?:test|build)|swift\s+(?:test|build)|xcodebuild|mix\s+test|"
    r"elixir|ctest|zig\s+(?:build|test)"
    r")(?=$|\s|['\"])"
)


def _segments(command: str) -> list[str]:
    """The simple commands of a shell line, wrappers (env, time, npx, …) peeled off."""
    out = []
    for segment, _ in split_shell(command):
        seg = segment.strip().lstrip("&!").strip()
        for _ in range(6):
            m = _WRAPPER.match(seg)
            if not m or not m.group(0):
                break
            seg = seg[m.end() :]
        if seg:
            out.append(seg)
    return out


_PRINTERS = frozenset({"cat", "head", "tail", "nl", "bat", "batcat", "less", "more", "sed"})
# Options that take a value, per printer (`head -n 50 f`, `sed -e 's/a/b/' f`).
_VALUE_OPTIONS = {
    "head": frozenset({"-n", "-c", "--lines", "--bytes"}),
    "tail": frozenset({"-n", "-c", "--lines", "--bytes", "-s", "--pid"}),
    "sed": frozenset({"-e", "-f", "--expression", "--file", "-l"}),
}
_MAYBE_PRINTER = re.compile(r"\b(?:cat|head|tail|nl|bat|batcat|less|more|sed)\b")
_REDIRECT = re.compile(r"^\d*(?:>>?|<)&?$")  # `>` alone: the target is the next token
_REDIRECTED = re.compile(r"^\d*[<>]")  # `2>/dev/null`, `>out.txt`


def files_read_by(command: str) -> list[str]:
    """Files a read-only shell command prints: `cat f`, `sed -n '1,80p' f`, `head -n 50 f`.

    Codex has no Read tool; this is how it reads. `sed -i` edits, so it is no read.
    """
    return list(_files_read_by(command))


@lru_cache(maxsize=2048)
def _files_read_by(command: str) -> tuple[str, ...]:
    if not _MAYBE_PRINTER.search(command):
        return ()
    out: dict[str, None] = {}
    for seg in _segments(command):
        try:
            tokens = _words(seg)
        except ValueError:
            continue
        name = tokens[0].rsplit("/", 1)[-1] if tokens else ""
        if name not in _PRINTERS:
            continue
        args = tokens[1:]
        if name == "sed" and any(t.startswith(("-i", "--in-place")) for t in args):
            continue
        takes_value = _VALUE_OPTIONS.get(name, frozenset())
        positional: list[str] = []
        scripted = False
        skip = False
        for t in args:
            if skip:
                skip = False
            elif t in takes_value or _REDIRECT.match(t):
                skip = True  # the option's value, or the redirection's target
                scripted = scripted or t in ("-e", "-f", "--expression", "--file")
            elif not t.startswith(("-", "+", "&")) and not t.isdigit() and not _REDIRECTED.match(t):
                positional.append(t)
        if name == "sed" and not scripted:
            positional = positional[1:]  # the first plain argument is the sed script
        for p in positional:
            out.setdefault(p, None)
    return tuple(out)


# Nothing shlex treats specially, and no character str.split() takes for a space and
# shlex does not (\v \f \x1c-\x1f).
_PLAIN_WORDS = re.compile(r"[^'\"\\\x0b\x0c\x1c-\x1f]*")


def _words(segment: str) -> list[str]:
    """`shlex.split(segment)`; a segment without quotes or backslashes is just its words."""
    if segment.isascii() and _PLAIN_WORDS.fullmatch(segment):
        return segment.split()
    return shlex.split(segment)


@lru_cache(maxsize=4096)
def runs_build_or_test(command: str) -> bool:
    """True when some segment of the shell command runs a test runner or build tool.

    `grep FAIL build.log` or `cat out | grep error` never does: grep/cat are not runners.
    """
    return any(_RUNNER_HEAD.match(seg) for seg in _segments(command))


# Commands that move files or read them but never compile or test anything. `git commit`
# and `git push` are not here: their hooks often run the build and the tests.
_PLUMBING_HEAD = re.compile(
    r"^(?:git\s+(?!commit|push)\S+|git$|gh|ls|cat|less|head|tail|wc|sort|uniq|cut|tr|tee|"
    r"rm|rmdir|cp|mv|mkdir|touch|chmod|chown|ln|cd|pushd|popd|pwd|echo|printf|grep|egrep|rg|"
    r"ag|find|fd|sed|awk|diff|stat|file|which|type|sleep|kill|pkill|ps|curl|wget|open|code|"
    r"true|false|test|\[)(?=$|\s)"
)


@lru_cache(maxsize=4096)
def runs_only_plumbing(command: str) -> bool:
    """Every part of the command only moves, reads or lists files (git, ls, rm, grep, …)."""
    segs = _segments(command)
    return bool(segs) and all(_PLUMBING_HEAD.match(seg) for seg in segs)


_FILTER_HEAD = re.compile(
    r"^\s*(?:tail|head|grep|egrep|fgrep|rg|tee|less|more|cat|wc|sort|uniq|cut|sed|awk|"
    r"column|jq)(?=$|\s)"
)
_STDERR_MERGE = re.compile(r"\s+(?:\d?>&\d|\d?>\s*/dev/null)(?=\s|$)")
_SHELL_RUNS_SCRIPT = re.compile(r"^(?:ba|z)?sh\s+(?=\S+\.sh\b|\./|/)")


# Formatting steps chained before a check change nothing about what the check checks.
_FORMATTER = re.compile(
    r"^(?:cargo\s+fmt|go\s+fmt|gofmt|rustfmt|black|isort|ruff\s+format|clang-format|"
    r"(?:npx\s+)?prettier\s+(?:--write|-w)|(?:npm|pnpm|yarn)\s+(?:run\s+)?format)(?=$|\s)"
)


@lru_cache(maxsize=4096)
def command_key(command: str) -> str:
    """The check a command runs, without how its output is shown.

    `npm run build 2>&1 | tail -20` and `npm run build` are the same check;
    `bash ./x.sh --json` and `./x.sh --json` too, and `cargo fmt && cargo test` is
    `cargo test`. Used to see that a failing check has passed since (a success of the
    same key ends a failure streak).
    """
    parts: list[str] = []
    piped = False
    for segment, op in split_shell(_STDERR_MERGE.sub("", " ".join(command.split()))):
        seg = segment.strip()
        if piped and _FILTER_HEAD.match(seg):
            pass  # output plumbing: `| tail -20`, `| grep FAIL`
        elif seg and not _FORMATTER.match(seg):
            parts.append(_SHELL_RUNS_SCRIPT.sub("", seg).removeprefix("./"))
        piped = op in ("|", "|&") or (piped and not op)
    return " ; ".join(parts)


# --- failure markers of those tools ---------------------------------------------------

# Each marker with the words it cannot match without: a regex scans the output only when
# one of its words is in it (a long passing output then costs a few substring tests, not
# fourteen scans). Words of IGNORECASE markers are looked up in the lowered text.
_GUARDED_MARKERS: tuple[tuple[tuple[str, ...], bool, re.Pattern[str]], ...] = (
    (("FAIL",), False, re.compile(r"^\s*(?:FAILURES!|FAIL(?:ED)?\b)", re.MULTILINE)),
    (("--- FAIL",), False, re.compile(r"^\s*--- FAIL\b", re.MULTILINE)),
    (
        ("fail", "error"),
        True,
        re.compile(r"\b[1-9]\d* (?:failed|failing|failures?|errors?)\b", re.IGNORECASE),
    ),
    (("error",), True, re.compile(r"^\s*error(?:\[\w+\])?:", re.MULTILINE | re.IGNORECASE)),
    (("error TS",), False, re.compile(r"\berror TS\d+:")),
    (
        ("error",),
        False,
        re.compile(r"^\S+:\d+(?::\d+)?:\s*(?:fatal\s+)?error\b", re.MULTILINE),
    ),
    ((".go:",), False, re.compile(r"^[\w./\-]+\.go:\d+:\d+: \S", re.MULTILINE)),
    (
        ("Traceback (most recent call last):",),
        False,
        re.compile(r"^Traceback \(most recent call last\):", re.MULTILINE),
    ),
    ((": ***",), False, re.compile(r"^(?:g?make|ninja)(?:\[\d+\])?: \*\*\*", re.MULTILINE)),
    (("[ERROR]",), False, re.compile(r"^\s*\[ERROR\]", re.MULTILINE)),
    (("npm ERR!",), False, re.compile(r"^npm ERR!", re.MULTILINE)),
    (("BUILD FAILED",), False, re.compile(r"\bBUILD FAILED\b")),
    (("test result: FAILED",), False, re.compile(r"\btest result: FAILED\b")),
    (("panic: ",), False, re.compile(r"^panic: ", re.MULTILINE)),
)
_FAILURE_MARKERS: tuple[re.Pattern[str], ...] = tuple(p for _, _, p in _GUARDED_MARKERS)


@lru_cache(maxsize=1024)
def has_failure_markers(output: str) -> bool:
    """The output carries a test/build tool's failure marker (`0 failed` is not one)."""
    text = strip_ansi(output)
    low: str | None = None
    for words, lowered, pattern in _GUARDED_MARKERS:
        if lowered:
            if low is None:
                low = _lowered(text)
            hay = low
        else:
            hay = text
        if any(w in hay for w in words) and pattern.search(text):
            return True
    return False


def is_masked_failure(command: str | None, output: str | None) -> bool:
    """A successful Bash whose output shows a test/build failure the pipeline hid."""
    if not command or not output:
        return False
    return runs_build_or_test(command) and has_failure_markers(output)


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
@lru_cache(maxsize=256)
def _refs(output: str) -> tuple[Ref, ...]:
    seen: dict[tuple[str, int], Ref] = {}

    def add(ref: Ref) -> None:
        seen.setdefault((ref.path, ref.line), ref)

    text = strip_ansi(output)
    stylish_file: str | None = None
    for line in text.replace("file://", "").splitlines():
        for m in _PY_TRACE_REF.finditer(line):
            add(Ref(m.group(1), int(m.group(2)), python=True))
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


def file_line_refs(output: str) -> list[tuple[str, int]]:
    """`path:line` references in output, first-seen order, Python traces included."""
    return [(r.path, r.line) for r in refs(output)]


def _same_file(ref_path: str, path: str) -> bool:
    ref_norm = ref_path.replace("\\", "/")
    full = path.replace("\\", "/")
    if ref_norm.rsplit("/", 1)[-1] != full.rsplit("/", 1)[-1]:
        return False
    rel = ref_norm.lstrip("./") if not ref_norm.startswith("/") else ref_norm
    return full.endswith("/" + rel) or full == rel or "/" not in rel


def ref_for_file(output: str, path: str) -> str | None:
    """The first reference to `path` (same basename, compatible directories), as shown."""
    for ref in refs(output):
        if _same_file(ref.path, path):
            return str(ref)
    return None


# --- the most telling error line -----------------------------------------------------
#
# Tiers, best first; within a tier the first matching line wins. Located compiler and
# linter diagnostics say the most (what and where); then a Python exception or assertion
# detail; then a test runner's failure line; then any generic error wording.

_TIER_LOCATED = (
    re.compile(rf"^{_PATH}\(\d+,\d+\): error TS\d+: \S"),  # tsc
    re.compile(rf"^{_PATH}:\d+:\d+ - error TS\d+: \S"),  # tsc --pretty
    re.compile(rf"^{_PATH}:\d+(?::\d+)?: (?:fatal )?error: \S"),  # gcc/clang
    re.compile(r"^error(?:\[E\d+\])?: (?!could not compile|aborting due|test failed)\S"),
    re.compile(rf"^{_PATH}:\d+:\d+: (?!warning:|note:)\S"),  # go build / vet / golangci
    re.compile(rf"^{_PATH}: line \d+, col \d+, Error - \S"),  # eslint compact
)
_PY_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b(?::.*)?$")
_TIER_DETAIL = (
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
_TIER_TESTS = {
    t: LineTest(t, _NEEDS, heads=(_PATH,))
    for t in (_TIER_LOCATED, _TIER_DETAIL, _TIER_TEST, _TIER_GENERIC)
}
_NOISE = re.compile(
    r"^(?:Exit code:? -?\d+|Command exited with non-zero status code -?\d+|"
    r"Process exited with code -?\d+|FAIL(?:ED)?|=+(?: [A-Za-z ]+ =+)?|-+|\^+|~+|"
    r"\[Request interrupted.*\]|"
    r"> .*|(?:ok|\?)\s+\S+\s.*|npm ERR! (?:code|errno|path|syscall|A complete log).*)$"
)
_LOG_LINE = re.compile(
    r"^(?:(?:stdout|stderr) \||(?:npm|yarn|pnpm) (?:warn|WARN|notice)\b|"
    r"\s*\"\w+\": |time=\S+ level=|"
    r"\d{4}-\d\d-\d\dT\S+\s|\[\d\d:\d\d:\d\d\])"
)
_MAX_LINE = 300


def _python_exception(lines: list[str]) -> str | None:
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
# about the same text read back each time): outputs are capped at 16 KB, so the cache
# holds at most about 4 MB.
@lru_cache(maxsize=256)
def error_line(output: str, path: str | None = None) -> str | None:
    """The line a developer would quote first, or the first non-blank line.

    With `path`, a line that mentions that file's basename wins within its tier, so the
    quote for "you broke F" is about F.
    """
    raw = [ln.rstrip() for ln in strip_ansi(output).splitlines()]
    lines = [ln for ln in raw if ln.strip() and not _NOISE.match(ln.strip())]
    if not lines:
        return None
    base = path.replace("\\", "/").rsplit("/", 1)[-1] if path else None

    def pick(candidates: list[str]) -> str | None:
        if not candidates:
            return None
        if path and base:
            # A reference to this very file first, then any line naming its basename.
            for c in candidates:
                if base in c and any(_same_file(r.path, path) for r in refs(c)):
                    return c
            for c in candidates:
                if base in c:
                    return c
        return candidates[0]

    usable = [ln for ln in lines if not _LOG_LINE.match(ln)]

    def tier(patterns: tuple[re.Pattern[str], ...], by_pattern: bool = False) -> str | None:
        """First matching line; with `by_pattern`, the earlier pattern outranks the line."""
        # One test a line for the whole tier; only its hits are searched pattern by
        # pattern (a 16 KB output is hundreds of lines).
        found = _TIER_TESTS[patterns]  # once: a tuple of patterns is slow to hash
        hits = [ln for ln in usable if found(ln)]
        if not by_pattern or not hits:
            return pick(hits)
        for p in patterns:
            if hit := pick([ln for ln in hits if p.search(ln)]):
                return hit
        return None

    if path and base and (hit := _line_about_file(raw, lines, path, base)):
        return _cut(hit)
    if hit := tier(_TIER_LOCATED):
        if hit.startswith("error"):
            hit += _rustc_location(lines, lines.index(hit))
        return _cut(hit)
    if hit := pick(_eslint_stylish_errors(raw)):
        return _cut(hit)
    if hit := _python_exception(raw) or tier(_TIER_DETAIL, by_pattern=True):
        return _cut(hit)
    for patterns in (_TIER_TEST, _TIER_GENERIC):
        if hit := tier(patterns, by_pattern=True):
            return _cut(hit)
    first = next((ln for ln in lines if not _LOG_LINE.match(ln)), lines[0])
    return _cut(first)


def _line_about_file(raw: list[str], lines: list[str], path: str, base: str) -> str | None:
    """The error the output reports about this file: a located diagnostic naming it, or
    the error right after a reference to it (a stack frame, a traceback, node's ESM
    loader)."""
    about = [ln for ln in lines if base in ln and not _LOG_LINE.match(ln)]
    own = [ln for ln in about if any(_same_file(r.path, path) for r in refs(ln))]
    for ln in own or about:
        if any(p.search(ln) for p in _TIER_LOCATED):
            return ln
    for ln in _eslint_stylish_errors(raw):
        if base in ln:
            return ln
    for i, ln in enumerate(raw):
        if base not in ln or not any(_same_file(r.path, path) for r in refs(ln)):
            continue
        block = raw[i + 1 : i + 1 + _DETAIL_WINDOW]
        if py := _python_exception(["Traceback (most recent call last):", *block]):
            return py
        for b in block:
            if any(p.search(b) for p in _TIER_DETAIL):
                return b
    return None


def _cut(line: str) -> str:
    one = line.strip()
    return one if len(one) <= _MAX_LINE else one[: _MAX_LINE - 1] + "…"


# --- the error line of one failing test --------------------------------------------------

_PYTEST_CAUSE = re.compile(r"^(?:FAILED|ERROR)\s+(\S+)\s+-\s+(.+)$")
_GO_TEST_LOG = re.compile(r"^\s+\S+_test\.go:\d+: \S")
_JEST_EXPECT = re.compile(r"^\s*expect\(.*\)\.\w+")
_GO_TEST_NAME = re.compile(r"^(?:Test|Benchmark|Example|Fuzz)\w*(?:/\S*)?$")
_DETAIL_WINDOW = 20
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
    if re.match(r"^[\w.]+\.\w+$", test_id) and "." in test_id and "::" not in test_id:
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
            return _cut(m.group(2))
    needle = _test_needle(test_id)
    for i, ln in enumerate(raw):
        norm = " ".join(ln.replace(" › ", " > ").split()) + " "
        if needle not in norm:
            continue
        block: list[str] = []
        for b in raw[i + 1 : i + 1 + _DETAIL_WINDOW]:
            if _NEXT_HEADER.match(b):
                break
            if b.strip():
                block.append(b)
        py = _python_exception(block)
        if py:
            return _cut(py)
        for patterns in (_TIER_LOCATED, _TIER_DETAIL, (_GO_TEST_LOG, _JEST_EXPECT)):
            for b in block:
                if any(p.search(b) for p in patterns):
                    return _cut(b)
    return None
