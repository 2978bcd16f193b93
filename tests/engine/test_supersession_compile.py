"""Compile errors a later type-check found clean (design §2.21, `engine.supersession`).

After templar 5e052a87: `make test-unit` failed at 18:53:55 on `declared and not used:
resp` in websocket_enhanced_test.go (the agent's half-done edit); the agent fixed the file
and a golangci-lint run, which type-checks the same test package, reported only lint
findings. The bundle kept quoting the compile error. A run whose evidence is only such
errors is no longer evidence (the check is no longer open); a run that also failed on test
assertions stays open and quotes those. Both directions, in Go, TypeScript, Rust and
Python; every test but the guards failed on the code before (the compile error stayed the
run's open failure and its quoted line).
"""

from __future__ import annotations

from rulekit import at, bash_fail, bash_ok, edit_result, src, window

from tma1.checks import check_of
from tma1.engine.bundle import open_checks
from tma1.engine.checkruns import check_runs
from tma1.engine.supersession import compile_errors, type_checks

GO_COMPILE = (
    "# example.com/app/internal/server [example.com/app/internal/server.test]\n"
    "internal/server/ws_test.go:337:11: declared and not used: resp\n"
    "FAIL\texample.com/app/internal/server [build failed]\n"
    "ok  \texample.com/app/internal/build\t0.010s\n"
    "FAIL\n"
    "make: *** [Makefile:14: test-unit] Error 1\n"
)
GO_ASSERT = (
    "--- FAIL: TestPermissions (0.00s)\n"
    "    helpers_test.go:58: got 644, want 600\n"
    "FAIL\texample.com/app/internal/testutils\t0.120s\n"
)
LINT_ONLY = (
    "internal/server/fuzz_test.go:150:33: response body must be closed (bodyclose)\n"
    "1 issues:\n* bodyclose: 1\n"
)
LINT_TYPECHECK = (
    "internal/server/ws_test.go:337:11: declared and not used: resp (typecheck)\n"
    "1 issues:\n* typecheck: 1\n"
)


def _open(events: list, now: float = 30) -> list[str]:  # type: ignore[type-arg]
    return sorted(check_runs(window(events), at(now)).open_failures)


def test_a_go_compile_error_fixed_and_type_checked_clean_is_no_longer_open() -> None:
    fail = bash_fail(at(0), "make test-unit", GO_COMPILE)
    fixed = edit_result(at(1), src("internal/server/ws_test.go"))
    lint = bash_fail(at(2), "golangci-lint run --enable-only bodyclose", LINT_ONLY)
    assert _open([fail, fixed, lint]) == ["golangci-lint run"]
    # `go vet` type-checks test files too; a pass says the same.
    assert _open([fail, fixed, bash_ok(at(2), "go vet ./...")]) == []


def test_the_compile_error_stays_when_nothing_shows_it_gone() -> None:
    fail = bash_fail(at(0), "make test-unit", GO_COMPILE)
    fixed = edit_result(at(1), src("internal/server/ws_test.go"))
    lint = bash_fail(at(2), "golangci-lint run", LINT_ONLY)
    # No edit of the file between: the clean lint says nothing of it.
    assert _open([fail, lint]) == ["golangci-lint run", "make test-unit"]
    # `go build` compiles no `_test.go` file.
    assert _open([fail, fixed, bash_ok(at(2), "go build ./...")]) == ["make test-unit"]
    # The later type-check still reports the error in that file.
    still = bash_fail(at(2), "golangci-lint run", LINT_TYPECHECK)
    assert _open([fail, fixed, still]) == ["golangci-lint run", "make test-unit"]
    # A lint cut by `| head` may have left the error out.
    cut = bash_fail(at(2), "golangci-lint run 2>&1 | head -5", LINT_ONLY)
    assert "make test-unit" in _open([fail, fixed, cut])
    # Another package's scope does not hold the file.
    other = bash_ok(at(2), "go vet ./cmd/...")
    assert _open([fail, fixed, other]) == ["make test-unit"]


def test_a_run_that_also_failed_on_tests_stays_open_and_quotes_the_test() -> None:
    fail = bash_fail(at(0), "make test-unit", GO_COMPILE + GO_ASSERT)
    fixed = edit_result(at(1), src("internal/server/ws_test.go"))
    lint = bash_fail(at(2), "golangci-lint run --enable-only bodyclose", LINT_ONLY)
    runs = check_runs(window([fail, fixed, lint]), at(30))
    assert sorted(runs.open_failures) == ["golangci-lint run", "make test-unit"]
    said = runs.error_of(runs.open_failures["make test-unit"]) or ""
    assert "TestPermissions" in said and "resp" not in said
    # Without the clean type-check, the compile error is still the telling line.
    before = check_runs(window([fail]), at(30))
    assert "declared and not used" in (before.error_of(before.runs[0]) or "")


def test_a_test_assertion_failure_is_not_closed_by_a_lint_or_build_pass() -> None:
    fail = bash_fail(at(0), "go test ./...", GO_ASSERT)
    fixed = edit_result(at(1), src("internal/testutils/helpers_test.go"))
    later = [bash_ok(at(2), "golangci-lint run"), bash_ok(at(3), "go build ./...")]
    assert _open([fail, fixed, *later]) == ["go test"]


def test_the_bundle_drops_it_when_the_tool_had_reported_the_error_itself() -> None:
    # The bundle reads shell results only (no edits): golangci-lint had reported the very
    # error, and no longer does — it sees the file, and the file changed.
    runs = [
        bash_fail(at(0), "golangci-lint run --enable-only bodyclose", LINT_TYPECHECK),
        bash_fail(at(1), "make test-unit", GO_COMPILE),
        bash_fail(at(2), "golangci-lint run --enable-only bodyclose", LINT_ONLY),
    ]
    assert [c.key for c in open_checks(runs, at(30))] == ["golangci-lint run"]
    # The report may come after the failing run, too; but the tool must have made it.
    between = [runs[1], runs[0], runs[2]]
    between[1] = bash_fail(at(1.5), "golangci-lint run --enable-only bodyclose", LINT_TYPECHECK)
    assert [c.key for c in open_checks(between, at(30))] == ["golangci-lint run"]
    assert [c.key for c in open_checks([runs[1], runs[2]], at(30))] == [
        "golangci-lint run",
        "make test-unit",
    ]
    # With test failures in it, the check is told with the test's line, not the stale error.
    runs[1] = bash_fail(at(1), "make test-unit", GO_COMPILE + GO_ASSERT)
    told = {c.key: c.error for c in open_checks(runs, at(30))}
    assert "TestPermissions" in (told["make test-unit"] or "")


TSC = "src/api.ts(12,5): error TS2322: Type 'string' is not assignable to type 'number'.\n"
VITEST_FAIL = (
    " FAIL  src/api.test.ts > api > parses\n"
    "AssertionError: expected 2 to be 3\n"
    " Test Files  1 failed (1)\n"
)


def test_typescript_a_clean_tsc_supersedes_a_builds_type_error_not_a_tests_assertion() -> None:
    build = bash_fail(at(0), "npm run build", TSC)
    fixed = edit_result(at(1), src("src/api.ts"))
    assert _open([build, fixed, bash_ok(at(2), "npx tsc --noEmit")]) == []
    assert _open([build, fixed, bash_ok(at(2), "npm run typecheck")]) == []
    # A lint pass does not type-check.
    assert _open([build, fixed, bash_ok(at(2), "npx eslint src")]) == ["npm run build"]
    tests = bash_fail(at(0), "npx vitest run", VITEST_FAIL)
    fixed_t = edit_result(at(1), src("src/api.test.ts"))
    assert _open([tests, fixed_t, bash_ok(at(2), "npx tsc --noEmit")]) == ["vitest"]


RUST_LIB = "error[E0425]: cannot find value `cfg` in this scope\n --> src/lib.rs:12:5\n"
RUST_TEST = "error[E0425]: cannot find value `cfg` in this scope\n --> tests/api.rs:8:5\n"
RUST_PANIC = (
    "thread 'tests::parses' panicked at src/lib.rs:40:9:\nassertion `left == right` failed\n"
    "test result: FAILED. 3 passed; 1 failed\n"
)


def test_rust_cargo_check_clears_a_library_compile_error_not_a_test_file_or_a_panic() -> None:
    fixed = edit_result(at(1), src("src/lib.rs"))
    assert (
        _open([bash_fail(at(0), "cargo test", RUST_LIB), fixed, bash_ok(at(2), "cargo check")])
        == []
    )
    # `cargo check` compiles no integration test (tests/): `cargo test` still says nothing.
    fixed_t = edit_result(at(1), src("tests/api.rs"))
    test_err = bash_fail(at(0), "cargo test", RUST_TEST)
    assert _open([test_err, fixed_t, bash_ok(at(2), "cargo check")]) == ["cargo test"]
    panic = bash_fail(at(0), "cargo test", RUST_PANIC)
    assert _open([panic, fixed, bash_ok(at(2), "cargo clippy")]) == ["cargo test"]


MYPY = (
    "src/app.py:3: error: Incompatible types in assignment  [assignment]\nFound 1 error in 1 file\n"
)
PYTEST_FAIL = (
    "FAILED tests/test_app.py::test_total - AssertionError: assert 2 == 3\n"
    "1 failed, 4 passed in 0.2s\n"
)


def test_python_a_clean_mypy_clears_a_type_error_not_a_test_failure() -> None:
    fixed = edit_result(at(1), src("src/app.py"))
    typecheck = bash_fail(at(0), "make typecheck", MYPY)
    assert _open([typecheck, fixed, bash_ok(at(2), "mypy src")]) == []
    assert _open([typecheck, fixed, bash_ok(at(2), "mypy tests")]) == ["make typecheck"]
    tests = bash_fail(at(0), "pytest", PYTEST_FAIL)
    assert _open([tests, fixed, bash_ok(at(2), "mypy src")]) == ["pytest"]


def test_compile_errors_and_type_checkers_read_the_languages() -> None:
    assert compile_errors(GO_COMPILE).files == {"internal/server/ws_test.go"}
    assert compile_errors(LINT_ONLY).files == set()  # a linter's finding is no compile error
    assert compile_errors(LINT_TYPECHECK).files == {"internal/server/ws_test.go"}
    assert compile_errors(RUST_LIB).files == {"src/lib.rs"}
    assert compile_errors(RUST_PANIC + GO_ASSERT + PYTEST_FAIL).files == set()

    def tc(cmd: str, path: str) -> bool:
        c = check_of(cmd)
        assert c is not None
        return type_checks(c, path)

    assert tc("golangci-lint run", "internal/server/ws_test.go")
    assert tc("go vet ./internal/...", "internal/server/ws_test.go")
    assert not tc("go build ./...", "internal/server/ws_test.go")
    assert tc("go build ./...", "internal/server/ws.go")
    assert not tc("go vet ./cmd/...", "internal/server/ws.go")
    assert not tc("pytest", "src/app.py")
