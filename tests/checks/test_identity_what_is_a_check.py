"""What is a check (design §2.21): a build, test, lint, type-check or compile run — never
running the program, asking a tool for help, shipping, a post-processor or a heredoc.

Commands are the recorded sessions' own (the file is named) or the shapes the design names.
"""

from __future__ import annotations

import pytest

from tma1.checks import check_of, runs_build_or_test

NOT_CHECKS = [
    # Running the program.
    "./target/release/app --port 8080",
    "cd /tmp/scratch/jcode && ./target/release/jcode --version",  # jcode-4c111fef.chat.json
    "timeout 5 ./target/release/g3 --help 2>&1 | grep -i tui",  # g3-e0506ab0 hook log
    "./templar init test-wizard --wizard --minimal",  # templar-a46211b7.chat.json
    "./build/server --config dev.yaml",
    "dist/cli.js serve",
    "./run-with-opencv.sh",
    "./start-dev.sh",
    "./scripts/serve.sh 8080",
    "cargo run -- --help 2>&1 | head -20",  # jcode-4c111fef.chat.json
    "cargo run --release",
    "go run main.go list --help > /dev/null",  # templar-a46211b7.chat.json
    "go run ./cmd/api",
    "npm start",
    "npm run dev",
    "pnpm preview",
    "python app.py",
    "uv run python -m app.main",
    "make run-uvicorn",  # llm-guard-a1875b81 (batch 3)
    "make install",
    "make generate",
    # Help and versions.
    "./tool --help",
    "npm test -- --help",  # vitest's help: the script's tool describes itself
    "pnpm run test:e2e -- --version",
    "pytest --version",  # youtube-mcp-server-b96d6883 (batch 3)
    "npx vitest --version 2>&1",
    "rustc --version",
    "go help test",
    "cargo test -h",
    # Deploying, pushing, flashing, installing.
    "./scripts/fc1 push",
    "./scripts/build-and-deploy.sh",  # a deploy tool, whatever else its name says
    "./scripts/deploy.sh build",  # a shipping script's argument makes it no check
    "bash scripts/publish-test-release.sh",
    "./dist/cli.js test",  # the built program, given a `test` argument
    "node out/server.js check",
    "./scripts/fc1 flash --port /dev/ttyUSB0",
    "npx playwright install chromium",  # gallifrey-d50e1daf.chat.json
    "just fmt",
    # Post-processors and tools.
    "curl -s http://127.0.0.1:8000/api | python3 -m json.tool",
    "python3 -m venv .venv",
    "python3 -m pip install --user pytest",
    "python3 ~/.claude/skills/goal/scripts/claude_goal.py invoke 'x'",  # loopkit-73124c94
    "python download_models.py --models-dir /tmp/m",  # llm-guard (batch 3)
    "bash .specify/scripts/bash/setup-plan.sh --json",  # moonmind rollouts
    "bash .specify/scripts/bash/check-prerequisites.sh --json",  # the machine, not the code
    # A throw-away script the agent wrote outside the project (dmux-eef6c282.chat.json).
    "node /tmp/test-command-generation.js",
    # Paths with parentheses (a Next.js route group) and PowerShell here-strings.
    "ls -l apps/web/src/app/(payload)/admin/importMap.js",
    "@'\nfrom pathlib import Path\nprint(Path('src/a/test.rs'))\n'@ | python -",
]


@pytest.mark.parametrize("command", NOT_CHECKS)
def test_no_check(command: str) -> None:
    assert check_of(command) is None
    assert not runs_build_or_test(command)


CHECKS = [
    ("./build.sh", "script build.sh"),
    ("./scripts/run_tests.sh --fast", "script scripts/run_tests.sh"),
    ("./scripts/watch-tests.sh --once", "script scripts/watch-tests.sh"),  # ship (codex)
    ("python scripts/check_imports.py", "script scripts/check_imports.py"),
    ("node scripts/typecheck.mjs", "script scripts/typecheck.mjs"),
    ("./dev.sh test", "script dev.sh"),
    ("python manage.py test app", "manage.py test"),
    ("bin/rails test test/models", "rails test"),
    ("./node_modules/.bin/vitest run src", "vitest"),
    ("/usr/bin/python3 scripts/lint.py", "script scripts/lint.py"),
    ("make", "make"),
    ("make -j4 all", "make all"),
    ("make test-unit", "make test-unit"),  # templar-d423c9b0.chat.json
    ("npx playwright test e2e/a.spec.ts", "playwright"),
    # ship-rollout-2026-03-12T16-36-47 (codex): pnpm's `--filter` takes a value.
    ("pnpm --filter @ship/api type-check", "npm run type-check"),
    ("cargo test -- --help", "cargo test"),  # the test binary's option, after `--`
    ("GOCACHE=$(pwd)/.cache/go-build go test ./...", "go test"),  # lmsgo (codex)
]


@pytest.mark.parametrize(("command", "identity"), CHECKS)
def test_checks_stay_checks(command: str, identity: str) -> None:
    check = check_of(command)
    assert check is not None and check.identity == identity
    assert runs_build_or_test(command)
