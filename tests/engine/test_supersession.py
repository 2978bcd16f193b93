"""Supersession (design §2.21, `tma1.engine.supersession`) as the open checks see it.

Scripted after the held-out recordings of turn 3 (the corpus in ../shared/data has no
`cargo check` followed by a passing `cargo build` of the same crate): the session bundle
listed `cargo check` as failing an hour after a `cargo build` of the crate passed.
Each test failed on the turn-2 code (`covers` only, whole runs only).
"""

from __future__ import annotations

from rulekit import at, bash_fail, bash_ok, window

from tma1.checks import check_of
from tma1.engine.checkruns import check_runs
from tma1.engine.supersession import errors_of, names_test, supersedes

RUSTC = (
    "error[E0425]: cannot find value `cfg` in this scope\n --> src/main.rs:12:5\n"
    'error: could not compile `app` (bin "app") due to 1 previous error\n'
)
RUSTC_OTHER = (
    "error[E0308]: mismatched types\n --> src/db.rs:40:9\n"
    "error: could not compile `app` (lib) due to 1 previous error\n"
)


def _open(events: list, now: float = 30) -> list[str]:  # type: ignore[type-arg]
    return sorted(check_runs(window(events), at(now)).open_failures)


def _check(cmd: str):  # type: ignore[no-untyped-def]
    c = check_of(cmd)
    assert c is not None
    return c


def test_a_passing_cargo_build_closes_cargo_check_of_the_same_crate() -> None:
    events = [bash_fail(at(0), "cargo check", RUSTC), bash_ok(at(5), "cargo build --release")]
    assert _open(events) == []
    # cargo test and clippy compile all that cargo check checks, too.
    assert _open([events[0], bash_ok(at(5), "cargo test 2>&1 | tail -3")]) == []
    assert _open([events[0], bash_ok(at(5), "cargo clippy --all-targets")]) == []


def test_supersession_needs_the_same_crate_and_directory() -> None:
    fail = bash_fail(at(0), "cargo check -p server", RUSTC)
    assert _open([fail, bash_ok(at(5), "cargo build -p client")]) == ["cargo check"]
    assert _open([fail, bash_ok(at(5), "cargo build -p server")]) == []
    assert _open([fail, bash_ok(at(5), "cd web && cargo build")]) == ["cargo check"]
    # The narrower never closes the wider: a passing `cargo check` says nothing of tests.
    assert _open([bash_fail(at(0), "cargo test", RUSTC), bash_ok(at(5), "cargo check")]) == [
        "cargo test"
    ]
    assert supersedes(_check("cargo build"), _check("cargo check -p x"))
    assert not supersedes(_check("cargo test --lib"), _check("cargo check"))


def test_a_later_failing_wider_run_with_other_errors_makes_the_narrower_stale() -> None:
    check_fail = bash_fail(at(0), "cargo check", RUSTC)
    other = bash_fail(at(5), "cargo build", RUSTC_OTHER)
    runs = check_runs(window([check_fail, other]), at(30))
    assert sorted(runs.open_failures) == ["cargo build"]
    assert runs.superseded(runs.runs[0])
    # The same errors: both still say what is true, neither is stale.
    same = bash_fail(at(5), "cargo build", RUSTC)
    assert _open([check_fail, same]) == ["cargo build", "cargo check"]
    assert errors_of(check_fail) == errors_of(same) != errors_of(other)


PYTEST_OUT = (
    "tests/test_x.py F.\n"
    "E   AssertionError: assert 2 == 3\n"
    "FAILED tests/test_x.py::test_a - AssertionError: assert 2 == 3\n"
    "1 failed, 1 passed in 0.12s\n"
)


def test_a_passing_rerun_of_exactly_the_failing_test_closes_it() -> None:
    suite = bash_fail(at(0), "pytest -q", PYTEST_OUT)
    assert suite.test_ids == ["tests/test_x.py::test_a"]
    alone = bash_ok(at(2), "pytest -q tests/test_x.py::test_a", "1 passed in 0.05s")
    assert _open([suite, alone]) == []
    # Its file re-run whole closes it too; another test's re-run does not.
    assert _open([suite, bash_ok(at(2), "pytest tests/test_x.py", "2 passed")]) == []
    other = bash_ok(at(2), "pytest tests/test_y.py::test_b", "1 passed")
    assert _open([suite, other]) == ["pytest"]
    # A re-run before the failure says nothing of it.
    assert _open([alone, bash_fail(at(3), "pytest -q", PYTEST_OUT)]) == ["pytest"]


def test_names_test_reads_paths_node_ids_and_name_filters() -> None:
    assert names_test(_check("pytest tests/test_x.py::test_a"), "tests/test_x.py::test_a")
    assert names_test(_check("npx jest src/cart.test.ts"), "src/cart.test.ts > Cart > totals")
    assert names_test(_check("go test -run TestParse ./pkg"), "TestParse")
    assert not names_test(_check("pytest tests/test_x.py::test_b"), "tests/test_x.py::test_a")


def test_a_name_filtered_pass_closes_only_the_tests_it_names() -> None:
    # templar-d423c9b0.chat.json (session 5e052a87, 18:44): `go test -short
    # ./internal/monitoring` fails (`FAIL github.com/…/internal/monitoring`), then
    # `go test -v ./internal/monitoring -run TestMonitoring` passes and prints `ok <pkg>`:
    # it ran some tests of the package, and the package stays open.
    pkg = "github.com/conneroisu/templar/internal/monitoring"
    failing = bash_fail(at(0), "go test -short ./internal/monitoring", f"FAIL\t{pkg}\t3.136s\n")
    assert failing.test_ids == [pkg]
    filtered = bash_ok(
        at(1),
        "go test -v ./internal/monitoring -run TestMonitoring",
        "=== RUN   TestMonitoringMiddleware\n--- PASS: TestMonitoringMiddleware (0.00s)\n"
        f"PASS\nok  \t{pkg}\t0.2s\n",
    )
    assert _open([failing, filtered]) == ["go test"]
    # A filter naming exactly the failing test closes it.
    one = bash_fail(at(0), "go test ./internal/monitoring", "--- FAIL: TestAlertManager (0.01s)\n")
    assert one.test_ids == ["TestAlertManager"]
    alone = bash_ok(at(1), "go test ./internal/monitoring -run TestAlertManager", f"ok  \t{pkg}\n")
    assert _open([one, alone]) == []


def test_a_chained_check_closes_when_each_step_passed_since() -> None:
    # attio-7c4ca6ea.chat.json (session 6706089d, 16:35–16:43): `npm run lint:check && npm
    # run check:format && npm run build && npm run test:offline -- <file>` fails on
    # Prettier; the agent formats, `npm run check:format && npm run build` passes, later the
    # file's tests pass. The bundle still listed the chain as failing (stale).
    chain = "npm run lint:check && npm run check:format && npm run build && npm test -- a.test.ts"
    out = "src/a.ts\n  3:1  error  'x' is assigned a value but never used  no-unused-vars\n"
    fail = bash_fail(at(0), chain, out)
    later = [
        bash_ok(at(1), "npm run check:format && npm run build 2>&1 | tail -5"),
        bash_ok(at(2), "npm test -- a.test.ts"),
    ]
    # lint:check has not passed since: the chain is still open.
    assert _open([fail, *later]) == [_check(chain).identity]
    assert _open([fail, *later, bash_ok(at(3), "npm run lint:check")]) == []


def test_a_skipped_go_tests_log_line_is_no_error() -> None:
    """`go test -v` prints a skipped (or passing) test's `t.Skip`/`t.Log` line before its
    `--- SKIP`: not an error, so a `-v` run of the same failure says the same errors."""
    tail = "FAIL\nFAIL\tgithub.com/acme/app/internal/monitoring\t3.173s\nFAIL"
    verbose = (
        "=== RUN   TestAlerting\n    monitor_test.go:331: Alerting tests need more setup\n"
        "--- SKIP: TestAlerting (0.00s)\n=== RUN   TestHealth\n"
        "    monitor_test.go:88: expected 2 checks, got 1\n--- FAIL: TestHealth (0.20s)\n"
    )
    errs = errors_of(bash_fail(at(0), "go test -v ./internal/monitoring", verbose + tail))
    # The failing test's log line stays; the skipped one's goes.
    assert errs == {
        "monitor_test.go:#: expected # checks, got #",
        "FAIL",
        "FAIL github.com/acme/app/internal/monitoring #.#s",
    }
    assert errors_of(bash_fail(at(0), "go test ./internal/monitoring", tail)) <= errs
