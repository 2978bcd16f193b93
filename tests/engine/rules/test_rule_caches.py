"""The rules' own memos of an output or a final message hold no big text (issue 31; see
tests/checks/test_output_caches.py): a big one is keyed by its digest."""

from __future__ import annotations

import sys

from tma1.engine.rules._handback import hands_back
from tma1.engine.rules.build_broken_after_my_edit import _file_lines

BIG = "\n".join(f"pkg/other_{i}.go:{i}:1: warning: unused" for i in range(500))


def test_file_lines_does_not_hold_a_big_output() -> None:
    output = "".join([BIG, "\nsrc/app.go:12:5: undefined: frobnicate"])
    refs = sys.getrefcount(output)
    lines = _file_lines(output, "/p/src/app.go")
    assert sys.getrefcount(output) == refs
    assert lines and all("frobnicate" in ln for ln in lines)


def test_hands_back_does_not_hold_a_big_message() -> None:
    message = "".join(["All done. " * 600, "The build still fails: make build is broken."])
    refs = sys.getrefcount(message)
    terms = frozenset({"make", "build"})
    answer = hands_back(message, terms)
    assert sys.getrefcount(message) == refs
    assert answer and hands_back("".join(["All done. " * 600, message[6000:]]), terms)
