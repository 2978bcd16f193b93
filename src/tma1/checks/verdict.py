"""Verdicts (design §2.21): did a check's run say anything about the code?

A run that exited non-zero, or whose failure a pipe hid, is a *fail* only when a careful
engineer reading its output would conclude that the code is broken. It has *no verdict*
(stored and shown, never counted, never a finding, never listed as failing) when what
failed is not the code:

- the runner crashed on its environment before it looked at the code: every stack frame
  and error location is inside installed packages (`node_modules`, `site-packages`, the Go
  module cache) and none in the project, or it says so (`Module.createRequire is not a
  function`, an unsupported Node, the runner's own package not found, a missing SDK);
- configuration it names is missing (`1 validation error for Settings`, an unset
  environment variable);
- the command was refused: a sandbox or permission refusal, an approval it did not get;
- a post-processor piped after the check failed on its own (`ruff … | python3 <<EOF`
  with a SyntaxError in the heredoc: without `pipefail` the exit status is the last
  command's, and the check's output went into it, not to the agent);
- nothing in the output speaks of a failure at all (no output, or only progress lines).

A CLI usage error or a runner that is not there at all is `invocation` (outcome.py), the
no-verdict of a check that never started.
"""

from __future__ import annotations

import re

from tma1.checks.locations import refs
from tma1.checks.normalize import split_shell
from tma1.checks.text import meaningful_lines, strip_ansi, unframe

# Tests that ran and failed: whatever else the output says, the run has a verdict.
TESTS_FAILED = re.compile(
    r"\b[1-9]\d* (?:failed|failing)\b|^\s*--- FAIL\b|^\s*[✕×✗]\s|^FAIL(?:ED)?\s+\S",
    re.MULTILINE,
)
_REFUSED = re.compile(
    r"\bOperation not permitted\b|\bEPERM\b|\bEACCES\b|"
    r"[Pp]ermission denied|not permitted by (?:the )?sandbox|requires? (?:your )?approval|"
    r"(?:denied|rejected|blocked) by (?:the )?(?:user|sandbox|policy|classifier|approval)"
)
_ENVIRONMENT = re.compile(
    r"createRequire is not a function|\bERR_REQUIRE_ESM\b|[Uu]nsupported engine|"
    r"requires? (?:a )?Node(?:\.js)? (?:version )?(?:v?\d|>=|\^|~)|You are using Node\.js|"
    r"Cannot find (?:package|module) '(?:@[\w.-]+/)?(?:vitest|jest|mocha|eslint|typescript|"
    r"playwright|test|vite|ts-node|tsx|prettier|biome)(?:/[^']*)?'|"
    r"No module named '?(?:pytest|mypy|ruff|pylint|flake8|black|isort|pyright|coverage|tox|"
    r"nox|_pytest)\b|"
    r"SDK resolver failed|A compatible (?:installed )?\.NET (?:Core )?SDK|"
    r"The SDK '[^']+' specified could not be found|toolchain '[^']+' is not installed|"
    r"failed to get `[^`]+` as a dependency|Could not resolve host|"
    r"Timed out waiting \d+ms from config\.webServer|Executable doesn't exist at|"
    r"Failed to start plugin worker|"
    # A toolchain older than the project or a dependency needs, a dependency that cannot
    # be fetched, a container daemon that is not running.
    r"requires rustc [\d.]+ or newer|\bNETSDK1045\b|does not support targeting \.NET|"
    r"Could not resolve dependencies for project|Could not transfer artifact|"
    r"Could not resolve all (?:files|dependencies|artifacts) for configuration|"
    r"Cannot connect to the Docker daemon|Is the docker daemon running|"
    # The port the run needs is taken (a dev server left running): the machine, not the code.
    r"\bEADDRINUSE\b|[Aa]ddress already in use|is already used, make sure that nothing is "
    r"running on the port|"
    # No network where the runner fetches its dependencies.
    r"\bdial tcp\b|no such host|[Nn]etwork is unreachable|getaddrinfo|\bENOTFOUND\b|"
    r"Temporary failure in name resolution"
)
_CONFIGURATION = re.compile(
    r"\b\d+ validation errors? for \w*(?:Settings|Config)\b|"
    r"\b(?:missing|required) (?:required )?(?:environment|env) variables?\b|"
    r"\b(?:environment|env) variables? [\"'`]?[A-Z][A-Z0-9_]+[\"'`]? (?:is )?"
    r"(?:not set|missing|required|undefined)|"
    r"^KeyError: '[A-Z][A-Z0-9_]{2,}'$|"
    # The type checker's own configuration is missing.
    r"\berror TS(?:5057|5058|6053)\b.*tsconfig",
    re.MULTILINE,
)
# Installed code, not the project's: a location in one of these is the runner's own.
_INSTALLED = re.compile(
    r"(?:^|[/\\])(?:node_modules|site-packages|dist-packages|\.pnpm|\.yarn|go[/\\]pkg[/\\]mod|"
    r"\.cache[/\\]go-mod|\.cargo[/\\]registry|\.rustup|lib[/\\]python[\d.]+)[/\\]|^<frozen "
)
# `go generate`'s report of the command it ran: the wrapper, not where the error is.
_WRAPPER_REPORT = re.compile(r'^\S+:\d+: running "[^"]+": exit status \d+$')
# A post-processor: an interpreter or filter that reads the check's output from a pipe.
_POST_PROCESSOR = re.compile(
    r"^(?:[A-Za-z_]\w*=\S*\s+)*(?:\S*/)?(?:python[\d.]*|node|ruby|perl|php|jq)(?=$|\s)"
)
_POST_PROCESSOR_CRASH = re.compile(
    r'File "<(?:stdin|string)>"|^Traceback \(most recent call last\):|'
    r"^(?:SyntaxError|IndentationError|TabError)\b|^json\.decoder\.JSONDecodeError\b|"
    r"^Expecting value: line \d+ column \d+|^jq: error\b|^parse error: |\[(?:stdin|eval)\]:\d",
    re.MULTILINE,
)
# Words a failure report has in one form or another; an output with none of them says
# nothing about the code.
_EVIDENCE = re.compile(
    r"error|fail|panic|exception|traceback|assert|undefined|cannot|can't|unable|not found|no such|"
    r"denied|invalid|unexpected|expected|mismatch|violation|problem|warning|abort|"
    r"[✕×✗✖]|\bE\d{3,4}\b|\b[A-Z]{1,4}\d{3,4}\b|"
    # A format check's verdict: the code is not formatted as the project requires.
    r"reformat|code style issues|not (?:properly )?formatted|^Diff in ",
    re.IGNORECASE,
)
# The run was stopped before it judged the code: MSBuild's "the build was canceled"
# (MSB5021, `0 Error(s)`), a `^C`, a run cancelled or interrupted by its user.
_CANCELLED = re.compile(
    r"\bbuild was cancell?ed\b|^\^C|^(?:Build|Run|Test run|Operation|Command) (?:was )?"
    r"(?:cancell?ed|aborted)\b|\bcancell?ed by (?:the )?user\b|^!* ?KeyboardInterrupt ?!*$",
    re.MULTILINE | re.IGNORECASE,
)
# The exit statuses of a run killed by a signal: SIGINT (130), SIGKILL (137), SIGTERM (143).
_KILLED_EXIT = re.compile(r"^(?:Exit code:? |Process exited with code )(?:130|137|143)\s*$", re.M)
# An error a compiler or runner reported: a cancelled or killed run that said one has a
# verdict all the same (what it printed before it was stopped is true).
_ERROR_REPORTED = re.compile(
    r"\b(?:fatal )?error (?:[A-Z]{2,}\d+|TS\d+)\b|^\s*error(?:\[\w+\])?:|"
    r":\d+(?::\d+)?:?\s*(?:fatal\s+)?error\b|\b[1-9]\d* (?:Error\(s\)|errors?)\b|"
    r"^Traceback \(most recent call last\)|^E\s{2,}\S|^\s*ERROR collecting\b|^panic: ",
    re.MULTILINE,
)
# A test run that ran no test: no verdict about the code (a filter that matched nothing, no
# test files found, a runner pointed at the wrong place). Whole-run summaries only: a
# per-binary or per-package "0 tests" (cargo's doc-tests, go's `[no test files]`) is one
# part of a run that may have run others.
_ZERO_TESTS = re.compile(
    r"^\s*Ran 0 tests\b|^NO TESTS RAN$|\bno tests ran\b|^No test files found\b|"
    r"^No tests found\b|\bTotal(?: tests)?: 0\b|^Tests:\s+0 total\b|^\s*0 passing\b|"
    r"^No test is available in\b",
    re.MULTILINE | re.IGNORECASE,
)
_SOME_TESTS = re.compile(
    r"\b[1-9]\d* (?:passed|failed|failing|passing|tests? (?:passed|ran|failed))\b|"
    r"\bRan [1-9]|\b(?:Passed|Failed|Total(?: tests)?): [1-9]|^Tests:\s+[1-9]",
    re.MULTILINE | re.IGNORECASE,
)
_HEAD_LINES = 6
_MAX_REFUSAL_LINES = 40


def _refused(lines: list[str], text: str) -> bool:
    if len(lines) > _MAX_REFUSAL_LINES or TESTS_FAILED.search(text):
        return False
    return any(_REFUSED.search(ln) for ln in lines[:_HEAD_LINES])


def _environment(text: str) -> bool:
    if TESTS_FAILED.search(text):
        return False
    if _ENVIRONMENT.search(text):
        return True
    located = [r for r in refs(text) if r.path and not r.path.startswith("<")]
    wrappers = {ln.split(":", 1)[0] for ln in text.splitlines() if _WRAPPER_REPORT.match(ln)}
    located = [r for r in located if r.path not in wrappers]
    return bool(located) and all(_INSTALLED.search(r.path) for r in located)


def _post_processor_failed(command: str, text: str) -> bool:
    """The last stage after a pipe reads the check's output and crashed on its own."""
    stages = split_shell(command)
    pipes = [i for i, (_, op) in enumerate(stages) if op in ("|", "|&")]
    if not pipes:
        return False
    last = stages[pipes[-1] + 1][0].strip()
    return bool(_POST_PROCESSOR.match(last)) and bool(_POST_PROCESSOR_CRASH.search(text))


def cancelled(output: str | None) -> bool:
    """The run was cancelled or killed before it judged the code (`Build was canceled`,
    `^C`, exit 130/137/143) and reported no error of the code before it stopped."""
    text = strip_ansi(output or "")
    if not (_CANCELLED.search(text) or _KILLED_EXIT.search(text)):
        return False
    return not TESTS_FAILED.search(text) and not _ERROR_REPORTED.search(text)


def ran_no_tests(output: str | None) -> bool:
    """A test run's summary says it ran no test (`Ran 0 tests`, `no tests ran`, `Total:
    0`, `No test files found`), with no test run or error reported anywhere in it."""
    text = unframe(strip_ansi(output or ""))
    if not _ZERO_TESTS.search(text):
        return False
    return not (
        _SOME_TESTS.search(text) or TESTS_FAILED.search(text) or _ERROR_REPORTED.search(text)
    )


def no_verdict(command: str | None, output: str | None, *, exited: bool) -> str | None:
    """Why a failed run of a check says nothing about the code, or None when it does:
    `environment`, `configuration`, `refused`, `post-processor`, `cancelled`, `no tests`
    or `silent` (the output shows no failure at all). `exited`: the run exited non-zero
    (not a masked failure)."""
    text = unframe(strip_ansi(output or ""))
    lines = meaningful_lines(text)
    if exited and command and _post_processor_failed(command, text):
        return "post-processor"
    if cancelled(output):
        return "cancelled"
    if ran_no_tests(output):
        return "no tests"
    if exited and not any(_EVIDENCE.search(ln) for ln in lines) and not refs(text):
        # Nothing in it says what failed (no output, or progress lines alone): the agent
        # cannot act on it, and a careful reader cannot say the code is broken.
        return "silent"  # (a located diagnostic is evidence: `x.go:3:2: x is unused`)
    if _refused(lines, text):
        return "refused"
    if _environment(text):
        return "environment"
    if _CONFIGURATION.search(text) and not TESTS_FAILED.search(text):
        return "configuration"
    return None
