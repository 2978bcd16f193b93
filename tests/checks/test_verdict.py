"""Verdicts (design §2.21): pass, fail, or no verdict — the run said nothing about the code.

Each case asks: would a careful engineer reading this output conclude the code is broken?
The outputs are a few lines of a recorded session (the file is named) or the shape the
design names, fed through the ingest path (`parse_payload`) the way the hook delivers them.
"""

from __future__ import annotations

from typing import Any

import pytest

from tma1.checks import Outcome, error_line, failure_kind_of_exit, outcome_of
from tma1.checks.outcome import NOT_CHECK_FAILURES
from tma1.events import parse_payload


def _failed(command: str, output: str) -> Any:
    """A Claude Code PostToolUseFailure of `command` (its `error` begins `Exit code N`)."""
    return parse_payload(
        {
            "session_id": "s",
            "cwd": "/p",
            "hook_event_name": "PostToolUseFailure",
            "tool_name": "Bash",
            "tool_input": {"command": command},
            "error": output,
        },
        ts=1,
    )


def _codex(command: str, output: str) -> Any:
    """A Codex PostToolUse whose text says the exit status (`Exit code: N`)."""
    return parse_payload(
        {
            "session_id": "s",
            "cwd": "/p",
            "hook_event_name": "PostToolUse",
            "tool_name": "shell",
            "tool_input": {"command": command},
            "tool_response": output,
        },
        ts=1,
        source="codex",
    )


def _piped(command: str, output: str) -> Any:
    """A Claude Code PostToolUse that exited 0 (a pipe hid the status)."""
    return parse_payload(
        {
            "session_id": "s",
            "cwd": "/p",
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": command},
            "tool_response": {"stdout": output, "stderr": "", "interrupted": False},
        },
        ts=1,
    )


def _no_verdict(ev: Any) -> None:
    assert ev.failure_kind in NOT_CHECK_FAILURES
    outcome = outcome_of(ev.tool_command, ev.event_type, ev.tool_success, ev.failure_kind)
    assert outcome not in (Outcome.PASS, Outcome.FAIL, Outcome.NOT_A_CHECK)


NO_VERDICT_EXITS = [
    # ESLint crashing at start-up on an old Node: every frame inside its own package.
    (
        "npx eslint src",
        "Exit code 2\n"
        "TypeError: Module.createRequire is not a function\n"
        "    at Object.<anonymous> (/repo/node_modules/eslint/lib/cli.js:27:26)\n"
        "    at Module._compile (internal/modules/cjs/loader.js:778:30)",
    ),
    # vitest's own entry point failing to parse on an old Node.
    (
        "npx vitest run",
        "Exit code 1\n"
        "/repo/node_modules/vitest/vitest.mjs:1\n"
        "import { startVitest } from './dist/node.js'\n"
        "^^^^^^\n"
        "SyntaxError: Cannot use import statement outside a module",
    ),
    # sessions/claude-code/attio-aa5474ad.chat.json: the runner itself not installed.
    (
        "npx vitest run test/utils/error-sanitizer.test.ts 2>&1",
        "Exit code 1\n"
        "failed to load config from /Users/k/attio-mcp-server/vitest.config.ts\n"
        "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'vitest' imported from "
        "/Users/k/node_modules/.vite-temp/vitest.config.ts.timestamp-1-1f25a.mjs",
    ),
    # An unsupported engine.
    (
        "npm run build",
        "Exit code 1\nYou are using Node.js 16.20.0. Vite requires Node.js version 18+.",
    ),
    # Missing configuration the program names, until the env vars were set.
    (
        "uv run pytest -q",
        "Exit code 2\n"
        "ERROR tests/test_api.py - pydantic_core._pydantic_core.ValidationError: "
        "1 validation error for Settings\n"
        "database_url\n  Field required [type=missing, input_value={}, input_type=dict]\n"
        "1 error in 0.41s",
    ),
    # A refusal: the sandbox kept it from writing where it must
    # (sessions/codex/parkinglot-rollout-2025-12-06T15-11-37-….jsonl).
    (
        "cargo check",
        "Exit code 1\nerror: could not create temp file "
        "/Users/g/.rustup/tmp/yhc_4l_file: Operation not permitted (os error 1)",
    ),
    (
        "npm test",
        "Exit code 243\nnpm error code EACCES\nnpm error syscall open\n"
        "npm error Error: EACCES: permission denied, open '/home/u/.npm/_cacache/tmp/1'",
    ),
    # Non-zero in ≈0 s with no output at all.
    ("npm test", "Exit code 1\n"),
    # Errors only inside the Go module cache: a toolchain too new for a dependency
    # (sessions/codex/lmsgo-rollout-2025-10-06T09-58-53-….jsonl).
    (
        "GOCACHE=$(pwd)/.cache/go-build GOMODCACHE=$(pwd)/.cache/go-mod go generate ./internal/ent",
        "Exit code: 1\nOutput:\n# golang.org/x/tools/internal/tokeninternal\n"
        "../../.cache/go-mod/golang.org/x/tools@v0.19.0/internal/tokeninternal/"
        "tokeninternal.go:64:9: invalid array length -delta * delta (constant -256 of type int64)\n"
        'internal/ent/generate.go:3: running "go": exit status 1',
    ),
    # A dependency's build script with no network
    # (sessions/codex/shannon-rollout-2026-01-10T14-27-32-….jsonl).
    (
        "cargo test --test embedded_startup",
        "Exit code: 101\nOutput:\n"
        "error: failed to run custom build command for `utoipa-swagger-ui v9.0.2`\n"
        "  --- stderr\n  curl: (6) Could not resolve host: github.com",
    ),
    # A toolchain too old for a dependency, a dependency that cannot be fetched, no
    # container daemon: the machine, not the code.
    (
        "cargo build",
        "Exit code 101\nerror: package `clap_lex v0.7.4` cannot be built because it requires "
        "rustc 1.74 or newer, while the currently active rustc version is 1.70.0",
    ),
    (
        "dotnet build",
        "Exit code 1\n/usr/share/dotnet/sdk/8.0.100/Sdks/Microsoft.NET.Sdk/targets/x.targets"
        "(166,5): error NETSDK1045: The current .NET SDK does not support targeting .NET 9.0.",
    ),
    (
        "mvn test",
        "Exit code 1\n[ERROR] Failed to execute goal on project app: Could not resolve "
        "dependencies for project com.x:app:jar:1.0: Could not transfer artifact x:y:1.0",
    ),
    (
        "./gradlew test",
        "Exit code 1\nFAILURE: Build failed with an exception.\n* What went wrong:\nCould not "
        "resolve all files for configuration ':app:compileClasspath'.",
    ),
    (
        "make test",  # its recipe runs the tests in a container
        "Exit code 1\nCannot connect to the Docker daemon at unix:///var/run/docker.sock. Is "
        "the docker daemon running?",
    ),
    # The type checker's own configuration is missing.
    (
        "npx tsc --noEmit -p web",
        "Exit code 1\nerror TS5058: The specified path does not exist: 'web/tsconfig.json'.",
    ),
    # The port the run needs is taken: a server left running, not the code.
    (
        "npx playwright test tests/landing.spec.ts",
        "Exit code 1\nError: http://localhost:3000 is already used, make sure that nothing is "
        "running on the port/url or set reuseExistingServer:true in config.webServer.",
    ),
    (
        "npm test",
        "Exit code 1\nError: listen EADDRINUSE: address already in use :::3000\n"
        "    at Server.setupListenHandle [as _listen2] (node:net:1817:16)",
    ),
    # The post-processor after the check failed on its own: its heredoc does not parse.
    (
        "uv run ruff check src --output-format json | python3 << 'EOF'\n"
        "import json, sys\nprint(len(json.load(sys.stdin))\nEOF",
        "Exit code 1\n"
        '  File "<stdin>", line 2\n'
        "    print(len(json.load(sys.stdin))\n"
        "         ^\n"
        "SyntaxError: '(' was never closed",
    ),
]


@pytest.mark.parametrize(("command", "output"), NO_VERDICT_EXITS)
def test_a_run_that_says_nothing_about_the_code_has_no_verdict(command: str, output: str) -> None:
    ev = _failed(command, output)
    assert ev.failure_kind == "no_verdict"
    _no_verdict(ev)


USAGE_ERRORS = [
    # sessions/claude-code/templar-d423c9b0.chat.json
    (
        "golangci-lint run --disable-all --enable bodyclose",
        "Exit code 3\nError: unknown flag: --disable-all",
    ),
    # sessions/claude-code/templar-373740ff.chat.json
    (
        "golangci-lint run --disable typecheck --enable govet",
        "Exit code 3\nError: can't load config: typecheck is not a linter, it cannot be "
        "enabled or disabled",
    ),
    # sessions/claude-code/gallifrey-d50e1daf.chat.json
    ("npx playwright test tests/a.spec.ts --grep='title'", "Exit code 1\nError: No tests found."),
    # sessions/codex/zoqore-rollout-2025-12-09T00-04-14-….jsonl
    (
        "cd src-tauri; rustc -Z parse-only src/alden/cli.rs",
        "Exit code: 1\nOutput:\nerror: the option `Z` is only accepted on the nightly compiler",
    ),
]


USAGE_ERRORS += [
    # cac, yargs and commander (vitest, vite and most Node CLIs) refusing an option.
    ("npx vitest run --reporter=dots --foo", "Exit code 1\nCACError: Unknown option `--foo`"),
    ("npx eslint --fix-typo src", "Exit code 2\nerror: unknown option '--fix-typo'"),
    # `uv run` with no such program in the environment.
    (
        "uv run pytest -q",
        "Exit code 2\nerror: Failed to spawn: `pytest`\n  Caused by: No such "
        "file or directory (os error 2)",
    ),
]


@pytest.mark.parametrize(("command", "output"), USAGE_ERRORS)
def test_a_misused_cli_is_no_verdict(command: str, output: str) -> None:
    _no_verdict(_failed(command, output))


def test_a_codex_sandbox_note_is_no_refusal() -> None:
    # sessions/codex/ocodex-rollout-…-legacy-format.jsonl: Codex puts this note in front of
    # any failure inside its sandbox; what follows is cargo's real verdict.
    output = (
        "failed in sandbox MacosSeatbelt with execution error: sandbox denied exec error, "
        "exit code: 101, stdout: \n"
        "error[E0425]: cannot find value `is_ollama_like_provider` in this scope\n"
        "    --> core/src/codex.rs:1115:21\n"
    )
    ev = _failed("cd codex-rs && cargo test -p codex-core --no-run", output)
    assert ev.failure_kind == "exit"
    assert ev.tool_error_summary == (
        "error[E0425]: cannot find value `is_ollama_like_provider` in this scope"
        " --> core/src/codex.rs:1115:21"
    )


def test_a_sandbox_note_before_nothing_of_the_checks_own_is_environment() -> None:
    # sessions-batch3/codex/taskly-b22357e5/rollout-2025-11-26T16-23-40-….jsonl: nx could
    # not start its plugin worker inside the sandbox; no test ran.
    output = (
        "failed in sandbox MacosSeatbelt with execution error: sandbox denied exec error, "
        "exit code: 1, stdout: \n> taskly@1.0.0 test /Users/j/taskly\n"
        "> nx run-many --target=test --all --parallel\n\n"
        " ELIFECYCLE  Test failed. See above for more details.\n"
        ", stderr: Failed to start plugin worker.\n"
    )
    _no_verdict(_failed("pnpm test", output))


def test_a_masked_start_up_crash_has_no_verdict() -> None:
    # sessions/claude-code/attio-aa5474ad.chat.json: `| head` hid the status; the runner
    # was not installed, so it said nothing about the code — neither a pass nor a fail.
    output = (
        "failed to load config from /Users/k/attio-mcp-server/vitest.config.ts\n"
        "⎯⎯⎯⎯⎯⎯⎯ Startup Error ⎯⎯⎯⎯⎯⎯⎯⎯\n"
        "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'vitest' imported from "
        "/Users/k/node_modules/.vite-temp/vitest.config.ts.timestamp-1-1f25a.mjs\n"
    )
    ev = _piped("npx vitest run test/config/deal-defaults.test.ts 2>&1 | head -100", output)
    assert ev.failure_kind == "no_verdict" and ev.tool_success is False
    assert not ev.is_failure and not ev.is_success
    _no_verdict(ev)


FAILS = [
    # A real compile error, a test failure, a lint finding: verdicts about the code.
    ("npm run build", "Exit code 2\nsrc/a.ts(3,5): error TS2322: Type 'string' is not assignable."),
    ("go vet ./...", "Exit code 1\n# app\ninternal/x.go:12:2: fmt.Printf format %d has arg s"),
    (
        "pytest -q",
        "Exit code 1\nFAILED tests/test_a.py::test_b - assert 1 == 2\n1 failed, 3 passed in 0.2s",
    ),
    # A test that reads a missing env var is still a test failure among others.
    (
        "pytest -q",
        "Exit code 1\nFAILED tests/test_a.py::test_c - KeyError: 'API_TOKEN'\n"
        "FAILED tests/test_a.py::test_d - assert 2 == 3\n2 failed, 1 passed",
    ),
    # A stack through node_modules that reaches the project's own file: the code.
    (
        "npx jest",
        "Exit code 1\n"
        "TypeError: Cannot read properties of undefined (reading 'id')\n"
        "    at Object.<anonymous> (/repo/node_modules/lodash/get.js:12:3)\n"
        "    at getUser (/repo/src/users.ts:41:10)",
    ),
    # A format check that lists unformatted files: the code is not as the project requires
    # (CI fails on it), though no line says "error".
    ("uv run ruff format --check .", "Exit code 1\nWould reformat: src/app/models.py\n"
     "1 file would be reformatted, 40 files left unchanged"),
    ("npx prettier --check src", "Exit code 1\nChecking formatting...\n[warn] src/a.ts\n"
     "[warn] Code style issues found in the above file. Run Prettier with --write to fix."),
    # A Python one-liner that is the check itself, not a post-processor of one.
    ("python3 scripts/check_schema.py", "Exit code 1\nTraceback (most recent call last):\n"
     '  File "scripts/check_schema.py", line 3, in <module>\nKeyError: \'id\''),
]  # fmt: skip


@pytest.mark.parametrize(("command", "output"), FAILS)
def test_a_run_that_shows_broken_code_fails(command: str, output: str) -> None:
    ev = _failed(command, output)
    assert ev.failure_kind == "exit"
    assert outcome_of(ev.tool_command, ev.event_type, ev.tool_success, ev.failure_kind) is (
        Outcome.FAIL
    )


def test_no_verdict_is_a_kind_the_engine_does_not_count() -> None:
    # The contract with the engine, the bundle and Stop: these kinds are no verdict.
    assert Outcome.NO_VERDICT.value == "no_verdict"
    assert {"no_verdict", "invocation", "interrupted", "coverage", "fixed"} <= NOT_CHECK_FAILURES
    assert failure_kind_of_exit("npm test", "Exit code 1\n") == "no_verdict"
    # A command that is no check keeps its plain exit failure.
    assert failure_kind_of_exit("./target/release/app", "Exit code 1\n") == "exit"


# --- error lines: the tool's, never the agent's framing ------------------------------------


@pytest.mark.parametrize(
    ("output", "line"),
    [
        # sessions-batch3/codex/crm-admin-00919525/…: Codex's framing around dotnet's own line.
        (
            "Exit code: 1\nWall time: 2.9 seconds\nOutput:\n  Determining projects to restore...\n"
            "Build FAILED.",
            "Build FAILED.",
        ),
        # sessions/codex/ship-rollout-2026-03-12T14-37-47-….jsonl: exec_command's framing.
        (
            "Chunk ID: a598b9\nWall time: 10.0 seconds\nProcess exited with code 1\n"
            "Original token count: 12\nOutput:\nPassed: 0 | Failed: 3 | Total: 3",
            "Passed: 0 | Failed: 3 | Total: 3",
        ),
        # sessions/claude-code/venusos-2773c7f1.chat.json: uv's set-up and ruff's excerpt.
        (
            "Exit code 1\nUsing CPython 3.14.0\nCreating virtual environment at: .venv\n"
            "Installed 69 packages in 435ms\n"
            "F401 [*] `enum.Enum` imported but unused\n --> src/mcp_venus_os/safety.py:5:18\n"
            "  |\n5 | from enum import Enum\n  |                  ^^^^\n",
            "F401 [*] `enum.Enum` imported but unused --> src/mcp_venus_os/safety.py:5:18",
        ),
        (
            'Exit code 1\n64 |     logger.error("Callback error: %s", e)\n'
            "TRY400 Use `logging.exception` instead of `logging.error`\n"
            "  --> src/x.py:64:9",
            "TRY400 Use `logging.exception` instead of `logging.error` --> src/x.py:64:9",
        ),
        ("Exit code: 1\nWall time: 1 seconds\nOutput:\n", None),
    ],
)
def test_the_error_line_is_the_tools(output: str, line: str | None) -> None:
    assert error_line(output) == line


# --- masked failures for any check (design §2.8, §2.22) ------------------------------------


@pytest.mark.parametrize(
    ("command", "output"),
    [
        # pnpm with a filter is the project's check (the old reading found no check).
        ("pnpm --filter api test 2>&1 | tail -3", " Test Files  2 failed | 8 passed (10)"),
        ("just test 2>&1 | tail -2", "error: Recipe `test` failed on line 4 with exit code 1"),
        # A project script's own words at the end of its output.
        ("./scripts/ci.sh 2>&1 | tail -2", "make[1]: *** [Makefile:12: test] Error 2"),
        ("bash scripts/build.sh | tail -1", "error: could not compile `app` due to 2 errors"),
        # sessions/codex/lmsgo-rollout-2025-10-06T17-28-05-….jsonl: `; echo EXIT:$?` hid it,
        # and `$(pwd)` in the env assignment once made the splitter lose `go test`.
        (
            "GOCACHE=$(pwd)/.gobuild-cache GOPROXY=off go test ./internal/http/ui -v; echo EXIT:$?",
            "--- FAIL: TestLearnerHandler_Catalog (0.06s)\nFAIL\tlms-go/internal/http/ui\t0.1s\n"
            "EXIT:1",
        ),
    ],
)
def test_masked_failures_of_any_check(command: str, output: str) -> None:
    ev = _piped(command, output)
    assert ev.failure_kind == "masked"
    assert outcome_of(ev.tool_command, ev.event_type, ev.tool_success, ev.failure_kind) is (
        Outcome.FAIL
    )


def test_codex_framing_is_read_the_same() -> None:
    ev = _codex("cargo check", "Exit code: 1\nWall time: 0.1 seconds\nOutput:\n")
    assert ev.failure_kind == "no_verdict"
    assert ev.tool_error_summary is None


# --- a pass cut short by `head` -------------------------------------------------------------

GO_OKS = "".join(f"ok  \tgithub.com/acme/app/pkg{i}\t0.{i}s\n" for i in range(20))


@pytest.mark.parametrize(
    ("command", "output"),
    [
        # templar-373740ff 21:07: `go test -short ./... | head -20` showed 20 passing
        # packages; internal/monitoring, further down, failed (and did two minutes later).
        ("go test -short ./... 2>&1 | head -20", GO_OKS),
        ("pytest -q 2>&1 | head -n 5", "....\n....\n....\n....\n....\n"),
        ("npm run build 2>&1 | head", "".join(f"line {i}\n" for i in range(10))),
        ("cargo test 2>&1 | head --lines=3", "running 3 tests\ntest a ... ok\ntest b ... ok\n"),
    ],
)
def test_a_check_whose_output_filled_head_has_no_verdict(command: str, output: str) -> None:
    # The exit status is head's and the runner's own verdict lies past the cut: neither a
    # pass (it would close the failure) nor a failure.
    ev = _piped(command, output)
    assert ev.failure_kind == "no_verdict"
    assert outcome_of(ev.tool_command, ev.event_type, ev.tool_success, ev.failure_kind) is (
        Outcome.NO_VERDICT
    )


def test_a_head_that_was_not_filled_or_showed_a_failure_is_read_as_usual() -> None:
    short = _piped("go test ./... 2>&1 | head -50", GO_OKS)  # 20 lines of 50: all of it
    assert short.tool_success is True and short.failure_kind is None
    failing = _piped("pytest -q 2>&1 | head -3", "F...\nFAILED tests/test_a.py::test_b\n1 failed\n")
    assert failing.failure_kind == "masked"
    not_a_check = _piped("git log --oneline | head -3", "a\nb\nc\n")
    assert not_a_check.failure_kind is None
