"""Outcomes of a check run (design §2.8, §2.15): failure markers, masked failures."""

from __future__ import annotations

import re
from enum import StrEnum

from tma1.checks.identity import check_of, runs_build_or_test
from tma1.checks.locations import refs
from tma1.checks.normalize import split_shell
from tma1.checks.text import lowered, meaningful_lines, strip_ansi, unframe
from tma1.checks.verdict import no_verdict, ran_no_tests
from tma1.storable.textmemo import text_cache

# --- failure markers of those tools ---------------------------------------------------

# Each marker with the words it cannot match without: a regex scans the output only when
# one of its words is in it (a long passing output then costs a few substring tests, not
# fourteen scans). Words of IGNORECASE markers are looked up in the lowered text.
_GUARDED_MARKERS: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = (
    (("FAIL",), re.compile(r"^\s*(?:FAILURES!|FAIL(?:ED)?\b)", re.MULTILINE)),
    (("--- FAIL",), re.compile(r"^\s*--- FAIL\b", re.MULTILINE)),
    (
        ("fail", "error"),
        re.compile(r"\b[1-9]\d* (?:failed|failing|failures?|errors?)\b", re.IGNORECASE),
    ),
    (("error",), re.compile(r"^\s*error(?:\[\w+\])?:", re.MULTILINE | re.IGNORECASE)),
    (("error TS",), re.compile(r"\berror TS\d+:")),
    (("error",), re.compile(r"^\S+:\d+(?::\d+)?:\s*(?:fatal\s+)?error\b", re.MULTILINE)),
    ((".go:",), re.compile(r"^[\w./\-]+\.go:\d+:\d+: \S", re.MULTILINE)),
    (
        ("Traceback (most recent call last):",),
        re.compile(r"^Traceback \(most recent call last\):", re.MULTILINE),
    ),
    ((": ***",), re.compile(r"^(?:g?make|ninja)(?:\[\d+\])?: \*\*\*", re.MULTILINE)),
    (("[ERROR]",), re.compile(r"^\s*\[ERROR\]", re.MULTILINE)),
    (("npm ERR!",), re.compile(r"^npm ERR!", re.MULTILINE)),
    (("BUILD FAILED",), re.compile(r"\bBUILD FAILED\b")),
    (("test result: FAILED",), re.compile(r"\btest result: FAILED\b")),
    (("panic: ",), re.compile(r"^panic: ", re.MULTILINE)),
)


@text_cache(maxsize=1024)
def has_failure_markers(output: str) -> bool:
    """The output carries a test/build tool's failure marker (`0 failed` is not one)."""
    text = strip_ansi(output)
    low: str | None = None
    for words, pattern in _GUARDED_MARKERS:
        if pattern.flags & re.IGNORECASE:
            if low is None:
                low = lowered(text)
            hay = low
        else:
            hay = text
        if any(w in hay for w in words) and pattern.search(text):
            return True
    return False


# --- outcomes (design §2.15) ----------------------------------------------------------------


class Outcome(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    INVOCATION = "invocation"  # the check never ran: wrong directory, missing script, usage
    COVERAGE = "coverage"  # every test passed; a coverage threshold set the exit status
    INTERRUPTED = "interrupted"  # killed by the agent's own sandbox timeout: no verdict
    # It ran, and said nothing about the code (design §2.21): the runner crashed on its
    # environment, configuration it names is missing, the command was refused, or a
    # post-processor piped after the check failed on its own.
    NO_VERDICT = "no_verdict"
    NOT_A_CHECK = "not_a_check"


# `failure_kind` values that are no failure of a check (stored as failed calls all the same):
# a run with one of them has no verdict — never in a streak, a finding or a failing list.
NOT_CHECK_FAILURES = frozenset(
    {Outcome.INVOCATION.value, Outcome.COVERAGE.value, Outcome.INTERRUPTED.value,
     Outcome.NO_VERDICT.value, "fixed"}
)  # fmt: skip

# The lines that say the check never ran. They must stand near the top of a short output:
# a test that opens a missing file says "No such file or directory" too, deep in a trace.
_INVOCATION = re.compile(
    r"command not found|: not found\s*$|\bnot recognized as an internal or external command|"
    r"^npm (?:error|ERR!) Missing script|^npm (?:error|ERR!) missing script|"
    r"ERR_PNPM_NO_SCRIPT|ERR_PNPM_NO_IMPORTER_MANIFEST|^error Command \S+ not found|"
    r"^(?:[\w./~-]+: )+(?:line \d+: )?(?:cd: )?[^:\s]+: No such file or directory$|"
    r"can't open file|\bENOENT\b.*package\.json|"
    r"^(?:error|ERROR): (?:unrecognized|unexpected) (?:arguments?|option|subcommand)|"
    r"^error: (?:unexpected argument|no such (?:command|subcommand)|unrecognized subcommand)|"
    r"^error: the following (?:arguments are|required arguments were) (?:required|not provided)|"
    r"^ERROR: (?:file or directory not found|usage:|not found:)|"
    r"^No tests found|^No test files found|^no tests ran|^Unknown (?:command|option)|"
    # cac (vitest, vite), yargs and commander refusing an option.
    r"^CACError: Unknown option|^Unknown arguments?: |^error: unknown option '|"
    # `uv run` found no such program to run.
    r"^error: Failed to spawn: |"
    r"^(?:Usage|usage): |Permission denied$|^go: cannot find main module|"
    r"^Error: (?:unknown (?:flag|shorthand flag|command)|can't load config|No tests found)\b|"
    r"^error: (?:unrecognized|unknown) (?:option|flag|argument)|"
    r"\bis only accepted on the nightly compiler\b|"
    r"^error: could not find `Cargo\.toml`|^Could not find a declaration file|"
    r"^Error: Cannot find module '[^']*(?:jest|vitest|mocha|tsc|eslint)[^']*'$",
    re.MULTILINE,
)
_EXIT_LINE = re.compile(
    r"^(?:Exit code:? (-?\d+)|Process exited with code (-?\d+)|"
    r"Command exited with non-zero status code (-?\d+))\s*$"
)
_TIMED_OUT = re.compile(r"^(?:Command timed out after\b|Killed$|Terminated$|timeout: )")
_COVERAGE_FAIL = re.compile(
    r"coverage threshold for \w+ \([\d.]+%\) not met|does not meet (?:the )?global threshold|"
    r"Required test coverage of [\d.]+% not reached|fail[- ]under|"
    r"[Cc]overage (?:for \w+ )?\([\d.]+%\) (?:does not meet|is below)",
)
_TESTS_FAILED = re.compile(
    r"\b[1-9]\d* (?:failed|failing|failures?|errors?)\b|^FAIL(?:ED)?\b|--- FAIL|^\s*[✕×✗]\s",
    re.MULTILINE,
)
_ALL_FIXED = re.compile(r"\(\d+ fixed, 0 remaining\)|\bAll checks passed!|\bFixed \d+ errors?\b")
_REMAINING = re.compile(r"\b[1-9]\d* remaining\b|\([1-9]\d* fixable")
_MAX_INVOCATION_LINES = 25


def exit_code(output: str | None) -> int | None:
    """The exit status a failure text states (`Exit code 124`, `Process exited with code
    1`), if it states one in its first lines."""
    for ln in (output or "").splitlines()[:3]:
        if m := _EXIT_LINE.match(ln.strip()):
            return int(next(g for g in m.groups() if g is not None))
    return None


def is_invocation_error(output: str | None) -> bool:
    """The command never got to check anything (design §2.15): the runner or script was not
    found, npm has no such script, the CLI refused its arguments."""
    lines = meaningful_lines(output or "")
    if not lines or len(lines) > _MAX_INVOCATION_LINES:
        return False
    if _TESTS_FAILED.search("\n".join(lines)):
        return False  # tests ran and failed: whatever else it says, the check ran
    return any(_INVOCATION.search(ln) for ln in lines[:6])


def is_coverage_only(output: str | None) -> bool:
    """Every test passed and a coverage threshold made the run exit non-zero."""
    text = strip_ansi(output or "")
    if not _COVERAGE_FAIL.search(text):
        return False
    return not _TESTS_FAILED.search(text) and not any(
        ln.lstrip().startswith(("error TS", "error[", "error:")) for ln in text.splitlines()
    )


def is_interruption(output: str | None) -> bool:
    """Killed by the sandbox's timeout with nothing said about the check: exit 124 (GNU
    timeout's status, and the one agents' sandboxes report) or the agent's own "timed out"
    notice, and no failure marker in what was printed before."""
    text = output or ""
    code = exit_code(text)
    lines = meaningful_lines(text)
    timed_out = code == 124 or any(_TIMED_OUT.match(ln) for ln in lines[:2])
    if not timed_out:
        return False
    return not has_failure_markers("\n".join(ln for ln in lines if not _TIMED_OUT.match(ln)))


def fixed_everything(output: str | None) -> bool:
    """A fixer that fixed all it found (`ruff --fix`: "1 fixed, 0 remaining")."""
    text = output or ""
    return bool(_ALL_FIXED.search(text)) and not _REMAINING.search(text)


_SANDBOX_SAYS = re.compile(r"^failed in sandbox\b|\bsandbox denied exec error\b", re.MULTILINE)


def sandbox_refused(output: str | None) -> bool:
    """Codex's sandbox stopped the command (`failed in sandbox …: sandbox denied exec
    error`) and what the command itself printed shows no error of a tool: the sandbox's
    refusal, not the check's verdict. (Its note stands before every failure in a sandbox,
    so a test run that failed inside it, with its own failure report, keeps its verdict.)"""
    text = strip_ansi(output or "")
    if not _SANDBOX_SAYS.search(text):
        return False
    own = unframe(text)
    return not has_failure_markers(own) and not _TESTS_FAILED.search(own) and not refs(own)


def failure_kind_of_exit(command: str | None, output: str | None) -> str:
    """The `failure_kind` of a shell call that exited non-zero (design §2.15, §2.21):
    `exit` (a failing check, or a failing command that is no check), `invocation`,
    `no_verdict`, `coverage`, `interrupted` or `fixed`."""
    if is_interruption(output):
        return Outcome.INTERRUPTED.value
    if is_invocation_error(output):
        return Outcome.INVOCATION.value
    if is_coverage_only(output):
        return Outcome.COVERAGE.value
    if (
        command
        and runs_build_or_test(command)
        and (sandbox_refused(output) or no_verdict(command, output, exited=True))
    ):
        return Outcome.NO_VERDICT.value
    if command and fixed_everything(output) and check_of(command) is not None:
        return "fixed"
    return "exit"


# Project scripts and make report failure in their own words, at the end of their output.
_TAIL_MARKERS = re.compile(
    r"\bcould not compile\b|^\s*error(?:\[\w+\])?:|"
    r"\b[1-9]\d* (?:\w+ ){0,2}(?:failed|failures?)\b|"
    r"\*\*\* .*Error [1-9]\d*|\*\*\* Error code [1-9]|\bError [1-9]\d*\s*$|"
    r"^FAIL(?:ED)?\b|\bBUILD FAILED\b|"
    r"^Traceback \(most recent call last\)|\b(?:build|compilation|check)s? failed\b",
    re.MULTILINE | re.IGNORECASE,
)
_TAIL_LINES = 15


def is_masked_failure(command: str | None, output: str | None) -> bool:
    """A successful Bash whose output shows a test/build failure the pipeline hid (design
    §2.8), for any check: a runner's failure markers anywhere in its output, and, after a
    pipe, a failure in the output's last lines in a project script's or make's own words
    (`make[1]: *** [all] Error 2`, `could not compile`, `3 failed`). Not: a fixer that
    fixed everything, a coverage-only exit."""
    if not command or not output:
        return False
    check = check_of(command)
    if check is None and not runs_build_or_test(command):
        return False
    # A project script prints whatever its steps print, passing or not: only its last
    # lines, after a pipe, are its verdict.
    scripted = check is not None and all(s.runner.startswith("script ") for s in check.steps)
    if not scripted and has_failure_markers(output):
        return not fixed_everything(output) and not is_coverage_only(output)
    if check is None or not any(op in ("|", "|&") for _, op in split_shell(command)):
        return False
    tail = "\n".join(strip_ansi(output).rstrip().splitlines()[-_TAIL_LINES:])
    return bool(_TAIL_MARKERS.search(tail)) and not fixed_everything(output)


_HEAD_COUNT = re.compile(r"^-(?:n\s*)?(\d+)$|^--lines=(\d+)$")


def cut_by_head(command: str | None, output: str | None) -> bool:
    """The check's output went through `head` and filled it: what the agent saw stops
    before the runner's verdict, and the exit status is `head`'s. A pass it is not
    (`go test ./... | head -20` hid the failing package on line 31)."""
    if not command or not output:
        return False
    stages = split_shell(command)
    for i, (_, op) in enumerate(stages[:-1]):
        if op not in ("|", "|&"):
            continue
        words = stages[i + 1][0].split()
        if not words or words[0] != "head":
            continue
        limit = 10
        args = words[1:]
        for j, w in enumerate(args):
            m = _HEAD_COUNT.match(w)
            if w == "-n" and j + 1 < len(args) and args[j + 1].isdigit():
                limit = int(args[j + 1])
            elif m:
                limit = int(m.group(1) or m.group(2))
            elif w.startswith("-c") or w.startswith("--bytes"):
                return False  # a byte cut: not a line count
        return len(output.rstrip("\n").splitlines()) >= limit
    return False


def masked_kind(command: str | None, output: str | None) -> str | None:
    """The `failure_kind` of a successful shell call that is no plain pass: `masked` (a
    pipe hid a failure), or `no_verdict` when what failed was not the code, or when a test
    run ran no test at all — zero tests passing is no verdict about the code (design
    §2.21)."""
    if not is_masked_failure(command, output):
        if command and output and check_of(command) is not None and ran_no_tests(output):
            return Outcome.NO_VERDICT.value
        if command and check_of(command) is not None and cut_by_head(command, output):
            return Outcome.NO_VERDICT.value
        return None
    if no_verdict(command, output, exited=False):
        return Outcome.NO_VERDICT.value
    return "masked"


def outcome_of(
    command: str | None, event_type: str, tool_success: bool | None, failure_kind: str | None
) -> Outcome:
    """A stored shell call's outcome as a run of its check."""
    if not command or check_of(command) is None:
        return Outcome.NOT_A_CHECK
    if failure_kind in NOT_CHECK_FAILURES:
        return Outcome.PASS if failure_kind == "fixed" else Outcome(failure_kind)
    if event_type == "PostToolUseFailure" or failure_kind == "masked":
        return Outcome.FAIL
    if event_type == "PostToolUse" and tool_success is True:
        return Outcome.PASS
    return Outcome.NOT_A_CHECK  # refused, rejected: it never ran
