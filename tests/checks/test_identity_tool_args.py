"""What follows `--` (Go: `-args`) belongs to the tool the runner drives (design §2.15):
for a compile or lint run it is the compiler's flags and narrows nothing; for a test run
libtest's name filters narrow it as `cargo test name` does, its output flags do not.

Commands are the recorded sessions' own where the file is named.
"""

from __future__ import annotations

import pytest

from tma1.checks import check_of, covers
from tma1.checks.identity import Step


def _steps(command: str) -> tuple[Step, ...]:
    check = check_of(command)
    assert check is not None, command
    return check.steps


@pytest.mark.parametrize(
    "command",
    [
        # mail-agent-2a0b1f40 (batch 3), testframework and parkinglot rollouts (codex)
        "cargo clippy --all-targets -- -D warnings",
        "cargo clippy --all-targets --all-features -- -D warnings",
        "cargo clippy -- -D warnings -W clippy::pedantic",
        "cargo build --release -- -C target-cpu=native",
        "cargo check -- -A dead_code",
        "go test ./... -args -v -update",
    ],
)
def test_a_compilers_or_test_binarys_flags_are_no_scope(command: str) -> None:
    (step,) = _steps(command)
    assert step.scope == ()


def test_a_strict_clippy_pass_closes_a_plain_clippy_failure_and_back() -> None:
    strict = check_of("cargo clippy --all-targets -- -D warnings")
    plain = check_of("cargo clippy")
    assert strict is not None and plain is not None
    assert covers(strict, plain) and covers(plain, strict)
    assert strict.identity == plain.identity == "cargo clippy"


@pytest.mark.parametrize(
    ("command", "scope"),
    [
        ("cargo test -- parse", ("parse",)),  # a test-name filter: the run is narrower
        ("cargo test parse -- --nocapture", ("parse",)),
        ("cargo test -p codex-core -- --nocapture", ("-p=codex-core",)),  # ocodex legacy
        ("cargo test -- --nocapture", ()),
        ("cargo test -- --test-threads 1", ()),
        ("cargo test -- --skip slow", ("--skip=slow",)),
        ("cargo nextest run", ()),
        ("cargo nextest run -- parse", ("parse",)),
        ("npm test -- src/a.test.ts", ("src/a.test.ts",)),  # the script's runner takes it
        ("pytest -- tests/test_x.py", ("tests/test_x.py",)),
    ],
)
def test_which_tails_narrow_a_test_run(command: str, scope: tuple[str, ...]) -> None:
    (step,) = _steps(command)
    assert step.scope == scope


def test_a_filtered_test_pass_does_not_close_the_whole_suite() -> None:
    whole, filtered = check_of("cargo test"), check_of("cargo test -- parse")
    skipping = check_of("cargo test -- --skip slow")
    assert whole is not None and filtered is not None and skipping is not None
    assert covers(whole, filtered) and not covers(filtered, whole)
    assert not covers(skipping, whole)
