"""Property tests of `tma1.checks` identity and coverage (design §2.15).

Spelling variants of one check — `cd DIR &&`, env assignments, wrappers, output plumbing,
redirections, verbosity/colour/reporter flags — map to one identity; a run with an empty
or wider scope covers a narrower one; an unrelated command never does.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tma1.checks import Outcome, check_of, covers, failure_kind_of_exit, normalise, outcome_of

# (the check as a bare command, a scope it may carry, the identity it must have)
CHECKS = [
    ("cargo build", "", "cargo build"),
    ("cargo test", "parser", "cargo test"),
    ("go test", "./internal/api", "go test"),
    ("go vet", "./pkg/...", "go vet"),
    ("golangci-lint run", "./internal/...", "golangci-lint run"),
    ("tsc --noEmit", "", "tsc"),
    ("eslint", "src/components", "eslint"),
    ("ruff check", "src/app", "ruff check"),
    ("mypy", "src/tma1", "mypy"),
    ("pytest", "tests/test_api.py", "pytest"),
    ("jest", "src/cart.test.ts", "jest"),
    ("vitest run", "test/a.test.ts", "vitest"),
    ("npm run build", "", "npm run build"),
    ("npm test", "", "npm run test"),
    ("make test", "", "make test"),
    ("dotnet test", "", "dotnet test"),
    ("./scripts/check.sh", "", "script scripts/check.sh"),
    ("python scripts/check_imports.py", "", "script scripts/check_imports.py"),
]

_DIRS = st.sampled_from(["", "web", "crates/core", "services/api"])
_ENV = st.lists(st.sampled_from(["CI=1", "RUST_BACKTRACE=1", "NODE_ENV=test", "FOO=bar"]),
                max_size=2)  # fmt: skip
_WRAPPERS = st.sampled_from(
    ["", "time ", "npx ", "pnpm exec ", "uv run ", "poetry run ", "bundle exec ", "timeout 600 "]
)
_FLAGS = st.lists(
    st.sampled_from(
        ["-v", "--verbose", "-q", "--color=always", "--no-color", "--reporter=dot",
         "--reporter verbose"]
    ),
    max_size=2,
)  # fmt: skip
_PLUMBING = st.sampled_from(
    ["", " 2>&1", " 2>&1 | tail -20", " | head -50", " | grep -E 'FAIL|error'",
     " 2>&1 | tee /tmp/out.log", " > /tmp/out.txt 2>&1", " |& tail"]
)  # fmt: skip


def _spell(base: str, scope: str, d: str, env: list[str], wrapper: str, flags: list[str],
           plumbing: str) -> str:  # fmt: skip
    # npm scripts and project scripts take no runner wrapper in front of them.
    if base.startswith(("npm ", "make ", "./", "python ", "dotnet ")):
        wrapper = "time " if wrapper == "time " else ""
    words = [*env, f"{wrapper}{base}", *flags, scope]
    line = " ".join(w for w in words if w) + plumbing
    return f"cd {d} && {line}" if d else line


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(CHECKS), _DIRS, _ENV, _WRAPPERS, _FLAGS, _PLUMBING)
def test_spelling_variants_of_one_check_have_one_identity(
    check: tuple[str, str, str], d: str, env: list[str], wrapper: str, flags: list[str],
    plumbing: str,
) -> None:  # fmt: skip
    base, scope, ident = check
    plain = check_of(_spell(base, scope, d, [], "", [], ""))
    spelled = check_of(_spell(base, scope, d, env, wrapper, flags, plumbing))
    assert plain is not None and spelled is not None
    expected = f"{ident} (in {d})" if d else ident
    assert plain.identity == spelled.identity == expected
    assert [s.scope for s in plain.steps] == [s.scope for s in spelled.steps]
    # Each covers the other: the same check, however spelled.
    assert covers(plain, spelled) and covers(spelled, plain)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(CHECKS), _DIRS, _PLUMBING)
def test_a_run_with_empty_scope_covers_every_scoped_run(
    check: tuple[str, str, str], d: str, plumbing: str
) -> None:
    base, scope, _ = check
    whole = check_of(_spell(base, "", d, [], "", [], plumbing))
    part = check_of(_spell(base, scope, d, [], "", [], ""))
    assert whole is not None and part is not None
    assert covers(whole, part)
    if scope and any(s.scope for s in part.steps):
        assert not covers(part, whole)  # a part never covers the whole


@pytest.mark.parametrize(
    ("wide", "narrow"),
    [
        ("go test ./...", "go test ./internal/api"),
        ("go test ./internal/...", "go test ./internal/api"),
        ("pytest tests", "pytest tests/test_api.py::test_get"),
        ("pytest tests/test_api.py", "pytest tests/test_api.py::test_get"),
        ("cargo build --release | tail -5", "cargo build 2>&1 | grep error"),
        ("npm run test", "npx jest src/cart.test.ts"),
        ("npm test", "npx vitest run test/a.test.ts"),
        ("npx jest src/cart.test.ts --verbose", "npx jest src/cart.test.ts"),
        ("cargo fmt && cargo build", "cargo build"),
        ("cargo build && cargo test", "cargo test -p core"),
    ],
)
def test_covering_runs_cover(wide: str, narrow: str) -> None:
    w, n = check_of(wide), check_of(narrow)
    assert w is not None and n is not None
    assert covers(w, n)


UNRELATED = ["git status", "ls -la", "git add src/*.snap", "grep -rn TODO src", "cat log.txt",
             "npm install", "npm run dev", "echo done", "rm -rf dist", "cargo fmt",
             "prettier --write src", "curl localhost:3000"]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(UNRELATED), st.sampled_from(CHECKS), _PLUMBING)
def test_an_unrelated_command_is_no_check_and_never_covers(
    other: str, check: tuple[str, str, str], plumbing: str
) -> None:
    assert check_of(other + plumbing) is None
    target = check_of(_spell(check[0], check[1], "", [], "", [], ""))
    assert target is not None
    # A different check never covers it either.
    for base, _, ident in CHECKS:
        # The project's own whole `npm test`/`npm run build` runs its usual runner: the
        # one deliberate cross-runner coverage (tma1.checks.identity._SCRIPT_COVERS).
        alias = (ident, check[2]) in (("npm run test", "jest"), ("npm run test", "vitest"),
                                      ("npm run build", "tsc"))  # fmt: skip
        if ident != check[2] and not alias:
            c = check_of(base)
            assert c is not None and not covers(c, target), (base, check)


def test_cd_dir_becomes_the_working_directory() -> None:
    assert [i.workdir for i in normalise("cd web && npm test")] == ["web"]
    a, b = check_of("cd web && npm test"), check_of("npm test", "web")
    assert a is not None and b is not None and a.identity == b.identity == "npm run test (in web)"
    root = check_of("npm test")
    assert root is not None and not covers(root, a)  # another directory, another check


@pytest.mark.parametrize(
    ("output", "kind"),
    [
        ('npm error Missing script: "test"', "invocation"),
        ("sh: vitest: command not found", "invocation"),
        ("bash: ./build.sh: No such file or directory", "invocation"),
        ("error: unexpected argument '--foo' found\n\nUsage: cargo build [OPTIONS]", "invocation"),
        ("ERROR: file or directory not found: tests/nope.py", "invocation"),
        ('Tests: 8 passed, 8 total\nJest: "global" coverage threshold for lines (80%) not met: 71%',
         "coverage"),
        ("   Compiling app v0.1.0\nerror: could not compile `app`", "exit"),
        # Nothing about the code at all: no verdict (design §2.21; this row said `exit`).
        ("   Compiling app v0.1.0", "no_verdict"),
        ("FAILED tests/a.py::t - FileNotFoundError: [Errno 2] No such file or directory", "exit"),
    ],
)  # fmt: skip
def test_outcomes_of_failed_runs(output: str, kind: str) -> None:
    assert failure_kind_of_exit("npm run test", f"Exit code 1\n{output}") == kind
    if kind != "exit":
        assert outcome_of("npm run test", "PostToolUseFailure", False, kind) != Outcome.FAIL


def test_exit_124_with_no_error_output_is_an_interruption() -> None:
    assert failure_kind_of_exit("cargo build", "Exit code 124\n   Compiling app") == "interrupted"
    said = "Exit code 124\nerror[E0425]: cannot find value `x`"
    assert failure_kind_of_exit("cargo build", said) == "exit"  # it had a verdict


# A name filter (`-t`, `-k`, `-run`, `--grep`) only narrows the run it is given to: the
# same files run without it cover it. From attio-mcp-server (../shared/data/sessions,
# claude-code/attio-7c4ca6ea.chat.json, 2025-08-06 16:42–16:43): a `-t` run of one test
# failed, then the whole file passed ("Tests 13 passed (13)").
@pytest.mark.parametrize(
    ("wide", "narrow"),
    [
        (
            'npm run test:offline -- test/performance/regression.test.ts 2>&1 | grep -E "(Test Files|Tests)" | tail -2',  # noqa: E501
            'npm run test:offline -- test/performance/regression.test.ts -t "should create record within budget" 2>&1 | tail -5',  # noqa: E501
        ),
        ("pytest tests/test_api.py", "pytest tests/test_api.py -k test_get"),
        ("go test ./internal/api", "go test ./internal/api -run TestGet"),
        ("npx playwright test e2e/a.spec.ts", "npx playwright test e2e/a.spec.ts --grep login"),
    ],
)
def test_the_same_files_without_a_name_filter_cover_the_filtered_run(
    wide: str, narrow: str
) -> None:
    w, n = check_of(wide), check_of(narrow)
    assert w is not None and n is not None
    assert covers(w, n)
    assert not covers(n, w)  # the filtered run never covers the whole file


@pytest.mark.parametrize(
    ("wide", "narrow"),
    [
        # Other files, or a filter that is not a name filter, do not cover.
        ("pytest tests/test_other.py", "pytest tests/test_api.py -k test_get"),
        ("pytest tests/test_api.py -k test_put", "pytest tests/test_api.py -k test_get"),
        ("npx vitest run a.test.ts", "npx vitest run -t total"),
    ],
)
def test_a_name_filtered_run_is_not_covered_by_other_files_or_filters(
    wide: str, narrow: str
) -> None:
    w, n = check_of(wide), check_of(narrow)
    assert w is not None and n is not None
    assert not covers(w, n)
