"""Issue 15, flaw 2: a lint finding is the edit's only where the edit was.

The session excerpt is from claude-code/templar-373740ff.chat.json (session c056cf62,
21:03–21:12): an Edit of internal/performance/optimizer.go that rewrote lines 72–78
(its `structuredPatch`: oldStart 72, oldLines 14, newStart 72, newLines 7), then
`golangci-lint run --enable-only staticcheck,unused` listing S1008 at optimizer.go:192 —
a finding the file already had — and a Stop.
"""

from __future__ import annotations

from typing import Any

from rulekit import at, bash_fail, event, src, window

from tma1.engine.anomaly import Channel, Kind, Severity
from tma1.engine.rules import RULES
from tma1.engine.window import RuleConfig
from tma1.events import EDITED_LINES, HookEvent
from tma1.storable.editlines import WHOLE_FILE, diff_ranges, edited_lines, near

CFG = RuleConfig()
OPTIMIZER = src("internal/performance/optimizer.go")
# The hunk as Claude Code wrote it: 3 context lines, the struct's 11 fields replaced by 4.
HUNK = {
    "oldStart": 72, "oldLines": 14, "newStart": 72, "newLines": 7,
    "lines": [" // CacheManager manages adaptive cache sizing", " type CacheManager struct {",
              *["-\tfield" + str(i) for i in range(11)], "+\t// removed", " }", " "],
}  # fmt: skip
S1008 = (
    "internal/performance/optimizer.go:192:2: S1008: should use 'return recentActions < "
    "ao.config.MaxActionsPerInterval' instead of 'if recentActions >= "
    "ao.config.MaxActionsPerInterval { return false }; return true' (staticcheck)\n"
    "\tif recentActions >= ao.config.MaxActionsPerInterval {\n\t^\n1 issues:\n* staticcheck: 1\n"
)


def _edit(ts: int, path: str, response: dict[str, Any], tuid: str = "toolu_1") -> list[HookEvent]:
    common = {"tool_name": "Edit", "tool_input": {"file_path": path}, "tool_use_id": tuid}
    return [
        event("PreToolUse", ts, **common),
        event("PostToolUse", ts + 500, tool_response={"filePath": path, **response}, **common),
    ]


def _found(events: list[HookEvent], now: int) -> list[tuple[str, str]]:
    found = RULES[Kind.BUILD_BROKEN_AFTER_MY_EDIT.value](window(events), now, CFG)
    return [(a.severity, a.channel) for a in found]


def _session(lint_out: str, response: dict[str, Any], cmd: str) -> list[HookEvent]:
    return [
        *_edit(at(0), OPTIMIZER, response),
        *(bash_fail(at(i), cmd, lint_out) for i in (1, 2)),
        event("Stop", at(3)),
    ]


LINT = "golangci-lint run --enable-only staticcheck,unused --timeout=5m"


def test_the_edit_keeps_the_lines_it_wrote() -> None:
    post = _edit(at(0), OPTIMIZER, {"structuredPatch": [HUNK]})[1]
    assert post.metadata[EDITED_LINES] == [[74, 74]]  # 11 lines removed, 1 written at 74


def test_a_lint_finding_far_from_the_edit_is_not_blamed_on_it() -> None:
    assert _found(_session(S1008, {"structuredPatch": [HUNK]}, LINT), at(3)) == []


def test_a_lint_finding_in_the_edited_lines_is_still_the_edits() -> None:
    near_edit = S1008.replace("optimizer.go:192:2", "optimizer.go:76:2")
    assert _found(_session(near_edit, {"structuredPatch": [HUNK]}, LINT), at(3)) == [
        (Severity.HIGH.value, Channel.STOP_BLOCK.value)
    ]


def test_a_compile_error_far_from_the_edit_is_still_the_edits() -> None:
    """A compiler reports what the code does now: a removed field breaks its users
    anywhere in the file. Only lint and type-check runs list old findings."""
    out = "internal/performance/optimizer.go:192:5: undefined: cm.hitRate\n"
    found = _found(_session(out, {"structuredPatch": [HUNK]}, "go build ./..."), at(3))
    assert found == [(Severity.HIGH.value, Channel.STOP_BLOCK.value)]


def test_an_edit_whose_lines_are_unknown_keeps_the_file_named() -> None:
    assert _found(_session(S1008, {}, LINT), at(3)) == [
        (Severity.HIGH.value, Channel.STOP_BLOCK.value)
    ]


def test_edited_lines_reads_hunks_writes_and_nothing_else() -> None:
    assert edited_lines("Edit", {"structuredPatch": [HUNK]}) == [(74, 74)]
    added = {"newStart": 10, "newLines": 5, "lines": [" a", "+b", "+c", " d", " e"]}
    assert edited_lines("Edit", {"structuredPatch": [added]}) == [(11, 12)]
    assert edited_lines("Write", {"type": "create", "content": "x"}) == [WHOLE_FILE]
    assert edited_lines("apply_patch", "Success. Updated the following files:\nM a.py") is None
    assert edited_lines("Edit", {"filePath": "/x"}) is None
    assert near(195, [(190, 192)], 3) and not near(196, [(190, 192)], 3)


def test_diff_ranges_reads_a_unified_diffs_hunks() -> None:
    # The diff Codex 0.171 wrote to its rollout for the captured patch (tests/fixtures/).
    captured = "@@ -2,2 +2,2 @@\n     # the build wants 2\n-    return 1\n+    return 2\n"
    assert diff_ranges(captured) == [(3, 3)]
    two = "@@ -1,3 +1,4 @@\n a\n+b\n c\n d\n@@ -10 +11,2 @@\n x\n+y\n\\ No newline at end of file\n"
    assert diff_ranges(two) == [(2, 2), (12, 12)]
    assert diff_ranges("@@ -5,2 +5 @@\n a\n-b\n") == [(6, 6)]  # a deletion: where it was
    assert diff_ranges("") is None and diff_ranges("--- a/x\n+++ b/x\n") is None
    # A hunk takes the lines its header counts: a file header after it is no removal.
    after = "@@ -1 +1 @@\n-a\n+b\n--- a/y\n+++ b/y\n@@ -7,0 +8 @@\n+z\n"
    assert diff_ranges(after) == [(1, 1), (8, 8)]
