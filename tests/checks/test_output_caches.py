"""The checks memoise what they read from an output (every detection reads the hour's
failures again), but never hold a big output: before issue 31 each of these caches kept
up to 256–1,024 whole outputs (16 KB each), alive after their events had left every
window. A big output is keyed by its digest (`tma1.storable.textmemo`); the answers are the same."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

from tma1.checks import error_line, error_locations, has_failure_markers

# ~20 KB of pytest output with a failure and a file:line reference: over the key limit.
BIG = "\n".join(
    [f"tests/test_mod.py::test_case_{i} PASSED" for i in range(600)]
    + ["tests/test_mod.py:42: AssertionError", "FAILED tests/test_mod.py::test_x - boom"]
)


@pytest.mark.parametrize(
    "check", [has_failure_markers, error_line, error_locations], ids=lambda f: f.__name__
)
def test_a_big_output_is_not_held(check: Callable[[str], object]) -> None:
    output = "".join([BIG, "\n1 failed"])  # a fresh object, as a window read makes
    refs = sys.getrefcount(output)
    first = check(output)
    assert sys.getrefcount(output) == refs
    assert check("".join([BIG, "\n1 failed"])) == first  # and the answer is the same


def test_the_answers_on_a_big_output() -> None:
    output = BIG + "\n1 failed"
    assert has_failure_markers(output)
    assert error_line(output) == "FAILED tests/test_mod.py::test_x - boom"
    assert [(r.path, r.line) for r in error_locations(output)] == [("tests/test_mod.py", 42)]
