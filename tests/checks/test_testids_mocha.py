"""Mocha's failing titles (`tma1.checks.testids.extract_test_ids`): a title runs over
indented lines up to the one ending in `:`; a line indented no deeper ends it unnamed."""

from __future__ import annotations

from tma1.checks.testids import extract_test_ids

MOCHA_CUT_TITLE = """\
  2 failing

  1) Suite
       nested title:
     AssertionError: boom

  2) Lonely title
  Error: expected 1 to equal 2, got:
"""


def test_a_title_no_deeper_line_continues_names_no_test() -> None:
    assert extract_test_ids(MOCHA_CUT_TITLE) == ["Suite nested title"]
