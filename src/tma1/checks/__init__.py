"""Checks (design §2.15): what a shell command checks and what its run said.

A *check* is a build, test, lint or type-check run, recognised by its runner rather than
its spelling. The modules, by concern: `normalize` (shell splitting, wrappers, output
plumbing, `cd DIR &&`), `identity` (runner identity, scope and coverage), `outcome` (pass,
fail, invocation error, coverage-only, interruption), `verdict` (no verdict: what failed was
not the code), `locations` (error locations and
error lines), `testids` (failing and passing test ids).

Every function is pure: the ingest path, the rules and replay agree on what a run says.
"""

from __future__ import annotations

from tma1.checks.identity import (
    Check,
    check_of,
    covers,
    relative_workdir,
    runs_build_or_test,
)
from tma1.checks.locations import (
    error_line,
    error_line_of_file,
    error_locations,
    lines_in,
    located_in,
    refs,
)
from tma1.checks.normalize import (
    files_read_by,
    normalise,
    runs_only_plumbing,
    split_shell,
)
from tma1.checks.outcome import (
    NOT_CHECK_FAILURES,
    Outcome,
    failure_kind_of_exit,
    has_failure_markers,
    is_masked_failure,
    masked_kind,
    outcome_of,
)
from tma1.checks.testids import (
    error_line_for_test,
    extract_passed_ids,
    extract_test_ids,
    file_of_test_id,
    reported_passing,
)
from tma1.checks.text import strip_ansi
from tma1.checks.verdict import no_verdict

__all__ = [
    "NOT_CHECK_FAILURES",
    "Check",
    "Outcome",
    "check_of",
    "covers",
    "error_line",
    "error_line_for_test",
    "error_line_of_file",
    "error_locations",
    "extract_passed_ids",
    "extract_test_ids",
    "failure_kind_of_exit",
    "file_of_test_id",
    "files_read_by",
    "has_failure_markers",
    "is_masked_failure",
    "lines_in",
    "located_in",
    "masked_kind",
    "no_verdict",
    "normalise",
    "outcome_of",
    "refs",
    "relative_workdir",
    "reported_passing",
    "runs_build_or_test",
    "runs_only_plumbing",
    "split_shell",
    "strip_ansi",
]
