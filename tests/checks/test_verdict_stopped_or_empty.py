"""Runs that are no verdict although they exited non-zero (design §2.21): a build or test
run cancelled or killed before it judged the code, the sandbox's refusal in Codex's own
words with no error of the tool behind it, a test run that ran no test. And their
counterparts that keep the verdict: what the run reported before it stopped is true.

Outputs are the recorded sessions' own where the file is named, fed through the ingest
path the way the hook delivers them.
"""

from __future__ import annotations

from typing import Any

import pytest

from tma1.checks import Outcome, outcome_of
from tma1.checks.outcome import NOT_CHECK_FAILURES
from tma1.events import parse_payload


def _codex(command: str, output: str, hook: str = "PostToolUse") -> Any:
    return parse_payload(
        {
            "session_id": "s",
            "cwd": "/p",
            "hook_event_name": hook,
            "tool_name": "shell",
            "tool_input": {"command": command},
            "tool_response": output,
        },
        ts=1,
        source="codex",
    )


def _claude(command: str, output: str, *, exited: bool = True) -> Any:
    payload: dict[str, Any] = {
        "session_id": "s",
        "cwd": "/p",
        "hook_event_name": "PostToolUseFailure" if exited else "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
    }
    if exited:
        payload["error"] = output
    else:
        payload["tool_response"] = {"stdout": output, "stderr": "", "interrupted": False}
    return parse_payload(payload, ts=1)


def _outcome(ev: Any) -> Outcome:
    return outcome_of(ev.tool_command, ev.event_type, ev.tool_success, ev.failure_kind)


def _no_verdict(ev: Any) -> None:
    assert ev.failure_kind in NOT_CHECK_FAILURES, ev.failure_kind
    assert _outcome(ev) not in (Outcome.PASS, Outcome.FAIL, Outcome.NOT_A_CHECK)


# sessions-batch3/codex/…019c6a7c…jsonl (07:32:52): MSBuild cancelled; 0 Error(s).
MSBUILD_CANCELLED = (
    "Exit code: 1\nWall time: 2.7 seconds\nOutput:\n"
    r"C:\Program Files\dotnet\sdk\9.0.300\Roslyn\Microsoft.CSharp.Core.targets(84,5): "
    'warning MSB5021: Terminating the task executable "dotnet" and its child processes '
    r"because the build was canceled. [C:\src\Ecommerce.Domain\Ecommerce.Domain.csproj]"
    "\n\nBuild FAILED.\n\n    1 Warning(s)\n    0 Error(s)\n\nTime Elapsed 00:00:02.04\n"
)

STOPPED = [
    (r"dotnet build src\Ecommerce.sln --no-restore -v minimal", MSBUILD_CANCELLED),
    ("dotnet build", "Exit code 1\n  Determining projects to restore...\nBuild was canceled.\n"),
    ("npm run build", "Exit code 130\n> app@1.0.0 build\n> tsc -p .\n^C\n"),
    (
        "npm run build",
        "Exit code 130\n> tsc -p .\n^C\nnpm ERR! code ELIFECYCLE\nnpm ERR! errno 130\n"
        "npm ERR! app@1.0.0 build: `tsc -p .`\nnpm ERR! Exit status 130\n",
    ),
    ("pytest -q", "Exit code 2\n....\n!!!!!!!! KeyboardInterrupt !!!!!!!!\n"),
    ("cargo test", "Exit code 137\n   Compiling app v0.1.0 (/p)\n"),
]


@pytest.mark.parametrize(("command", "output"), STOPPED)
def test_a_cancelled_or_killed_run_is_no_verdict(command: str, output: str) -> None:
    _no_verdict(_claude(command, output))


def test_a_cancelled_run_that_reported_errors_keeps_its_verdict() -> None:
    output = (
        "Exit code 1\nsrc/Api/Program.cs(12,5): error CS1002: ; expected\n"
        "Build was canceled.\n    1 Error(s)\n"
    )
    ev = _claude("dotnet build", output)
    assert ev.failure_kind == "exit" and _outcome(ev) is Outcome.FAIL


def test_the_sandboxs_refusal_in_codexs_words_is_no_verdict() -> None:
    # sessions/codex/ocodex-rollout-2025-08-24-legacy-format.jsonl: cargo was stopped while
    # compiling; the sandbox's note and nothing of cargo's own verdict.
    output = (
        "failed in sandbox MacosSeatbelt with execution error: sandbox denied exec error, "
        "exit code: 101, stdout: , stderr:    Compiling codex-core v0.0.0 "
        "(/Users/k/ocodex/codex-rs/core)\n"
    )
    _no_verdict(_claude("cd codex-rs && cargo test -p codex-core", output))
    _no_verdict(_claude("go test ./...", "failed in sandbox: "))
    # A job stopped under it: cargo's words of a failed build, and no error of its own.
    stopped = (
        "failed in sandbox MacosSeatbelt with execution error: sandbox denied exec error, "
        "exit code: 101, stdout: , stderr:    Compiling codex-core v0.0.0 (/p/core)\n"
        "warning: build failed, waiting for other jobs to finish...\n"
    )
    _no_verdict(_claude("cargo build", stopped))


def test_a_test_failure_inside_the_sandbox_keeps_its_verdict() -> None:
    output = (
        "failed in sandbox LinuxSeccomp with execution error: sandbox denied exec error, "
        "exit code: 1, stdout: ....F...\n=== FAILURES ===\n___ test_install ___\n"
        ">       assert backup.exists()\nE       AssertionError\n\n"
        "tests/test_install.py:41: AssertionError\n1 failed, 7 passed in 0.31s\n"
    )
    ev = _claude("pytest -q", output)
    assert ev.failure_kind == "exit" and _outcome(ev) is Outcome.FAIL


ZERO_TESTS = [
    # sessions/codex/ship-rollout-2026-03-12T14-37-47-….jsonl (19:45:30): the project's
    # test watcher had no result at all.
    (
        "./scripts/watch-tests.sh --once",
        "Chunk ID: c01b18\nWall time: 0.0000 seconds\nProcess exited with code 1\n"
        "Original token count: 31\nOutput:\n\x1b[0;32mPassed: 0\x1b[0m | Failed: 0 | "
        "Pending: 0 | Flaky: 0 | \x1b[0;34mTotal: 0\x1b[0m | Retries: 0\n",
    ),
    # sessions-batch3/codex/youtube-mcp-server-b96d6883/…: unittest found nothing.
    (
        "python -m unittest discover -s tests",
        "Process exited with code 5\nOutput:\n\n" + "-" * 70 + "\nRan 0 tests in 0.000s\n\n"
        "NO TESTS RAN\n",
    ),
    (
        "pytest tests/unit -k parse",
        "Process exited with code 5\nOutput:\n===== test session starts =====\n"
        "platform linux -- Python 3.12.1, pytest-8.3.2\nrootdir: /p\nconfigfile: pyproject.toml\n"
        "plugins: anyio-4.4.0, cov-5.0.0\ncollected 12 items / 12 deselected / 0 selected\n"
        "\n===== 12 deselected in 0.05s =====\nno tests ran\n",
    ),
    (
        "npx vitest run src/missing",
        "Process exited with code 1\nOutput:\n RUN  v1.6.0 /p\n\n"
        "include: **/*.{test,spec}.?(c|m)[jt]s?(x)\nfilter:  src/missing\n"
        "No test files found, exiting with code 1\n",
    ),
]


@pytest.mark.parametrize(("command", "output"), ZERO_TESTS)
def test_a_run_of_no_test_is_no_verdict(command: str, output: str) -> None:
    _no_verdict(_codex(command, output))


def test_a_passing_run_of_no_test_is_no_pass() -> None:
    ev = _claude("python -m unittest tests.test_new", "Ran 0 tests in 0.000s\n\nOK\n", exited=False)
    assert ev.failure_kind == "no_verdict" and _outcome(ev) is Outcome.NO_VERDICT


@pytest.mark.parametrize(
    "output",
    [
        # A collection error in the project's code: pytest's "no tests ran" is the code's.
        "Process exited with code 2\nOutput:\n==== ERRORS ====\n"
        "____ ERROR collecting tests/test_a.py ____\ntests/test_a.py:2: in <module>\n"
        "    from app import x\nE   ImportError: cannot import name 'x' from 'app'\n"
        "!!!! Interrupted: 1 error during collection !!!!\n1 error, no tests ran in 0.1s\n",
        # Some tests ran in another suite of the same run.
        "Process exited with code 1\nOutput:\nTotal: 0\nFAIL tests/b.test.ts\n"
        "Tests: 1 failed, 4 passed, 5 total\n",
    ],
)
def test_zero_tests_beside_an_error_keeps_the_verdict(output: str) -> None:
    ev = _codex("pytest", output)
    assert ev.failure_kind == "exit" and _outcome(ev) is Outcome.FAIL


def test_a_cargo_run_whose_doc_tests_ran_none_still_passes() -> None:
    # `| tail` keeps cargo's last section: the doc-tests' "running 0 tests" is one binary's.
    ev = _claude(
        "cargo test 2>&1 | tail -4",
        "   Doc-tests app\n\nrunning 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored\n",
        exited=False,
    )
    assert ev.failure_kind is None and _outcome(ev) is Outcome.PASS
