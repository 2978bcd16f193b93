"""Each runner of `tma1.checks.identity`'s runner table (`_RUNNERS`), branch by branch: the
shapes the rest of tests/checks does not reach (package-manager scripts by alias and by
directory, make's dry run, ruff without a subcommand, cmake, scripts run by deno, checks
run as a Python module). Pinned on the if-chain the table replaced (same answers)."""

from __future__ import annotations

import pytest

from tma1.checks import check_of

Steps = list[tuple[str, str, tuple[str, ...]]] | None

CASES: list[tuple[str, Steps]] = [
    # Package managers: `bun test` is bun's own runner; `t` is `test`.
    ("bun test src/a.test.ts", [("", "bun test", ("src/a.test.ts",))]),
    ("npm t", [("", "npm run test", ())]),
    ("yarn t -- src/x.test.ts", [("", "npm run test", ("src/x.test.ts",))]),
    ("pnpm --filter api test", [("", "npm run test", ())]),
    # The directory an option moves the run to.
    ("npm --prefix web test", [("web", "npm run test", ())]),
    ("pnpm -C web run lint", [("web", "npm run lint", ())]),
    ("make -C sub/dir lint", [("sub/dir", "make lint", ())]),
    ("cd api && npm --prefix ../web test", [("web", "npm run test", ())]),
    # Task runners: a dry run builds nothing.
    ("make -n test", None),
    ("make --dry-run", None),
    # Subcommands: ruff with none checks; a formatter without --check formats.
    ("ruff", [("", "ruff check", ())]),
    ("ruff .", [("", "ruff check", ())]),
    ("ruff --fix src", [("", "ruff check", ("src",))]),
    ("ruff server", None),
    ("ruff format src", None),
    ("cmake --build build", [("", "cmake --build", ())]),
    ("cmake -S . -B build", None),
    ("node --test test/", [("", "node --test", ("test",))]),
    # Interpreters: the script's name says whether it checks.
    ("node scripts/check.mjs", [("", "script scripts/check.mjs", ())]),
    ("deno run scripts/check.ts", [("", "script scripts/check.ts", ())]),
    ("deno run main.ts", None),
    ("python -m scripts.check_types src", [("", "python -m scripts.check_types", ("src",))]),
    ("python3 -m compileall .", None),
]


@pytest.mark.parametrize(("command", "steps"), CASES, ids=[c for c, _ in CASES])
def test_each_runner_names_its_check(command: str, steps: Steps) -> None:
    check = check_of(command)
    got = check and [(s.workdir, s.runner, s.scope) for s in check.steps]
    assert got == steps
