"""`stale_file_view` over whole windows: which reads, edits and changes count."""

from __future__ import annotations

from rulekit import OTHER, SID, at, change, edit, edit_result, read, src, window

from tma1.clock import MINUTE_MS
from tma1.engine.anomaly import Channel, Kind, Severity
from tma1.engine.rules.stale_file_view import stale_file_view
from tma1.engine.window import RuleConfig

CFG = RuleConfig()
FOO = src("internal/foo.go")
BAR = src("internal/bar.go")


def test_plan_scenario_fires_once_for_the_file() -> None:
    w = window([read(at(1), FOO), edit(at(3), FOO)], [change(at(2), FOO)])
    [a] = stale_file_view(w, at(4), CFG)
    assert (a.kind, a.severity, a.channel) == (
        Kind.STALE_FILE_VIEW,
        Severity.HIGH,
        Channel.USER_PROMPT_SUBMIT,
    )
    assert a.subject == FOO
    assert a.related_files == (FOO,)
    assert a.last_evidence_ts == at(3)
    assert a.session_id == SID and a.first_emitted_at == 0
    assert "internal/foo.go" in a.evidence and "outside any agent" in a.evidence
    assert a.suggestion.startswith("Read internal/foo.go again")


def test_change_by_another_session_is_external_and_named() -> None:
    w = window([read(at(1), FOO), edit(at(3), FOO)], [change(at(2), FOO, writer=OTHER)])
    [a] = stale_file_view(w, at(4), CFG)
    assert "another agent session" in a.evidence


def test_change_written_by_this_session_is_not_external() -> None:
    w = window([read(at(1), FOO), edit(at(3), FOO)], [change(at(2), FOO, writer=SID)])
    assert stale_file_view(w, at(4), CFG) == []


def test_change_of_another_file_does_not_count() -> None:
    w = window([read(at(1), FOO), edit(at(3), FOO)], [change(at(2), BAR)])
    assert stale_file_view(w, at(4), CFG) == []


def test_watcher_path_relative_to_the_project_matches_the_absolute_edit_path() -> None:
    w = window([read(at(1), FOO), edit(at(3), FOO)], [change(at(2), "internal/foo.go")])
    [a] = stale_file_view(w, at(4), CFG)
    assert a.subject == FOO


def test_reread_after_the_change_is_silent() -> None:
    w = window([read(at(1), FOO), read(at(2.5), FOO), edit(at(3), FOO)], [change(at(2), FOO)])
    assert stale_file_view(w, at(4), CFG) == []


def test_a_post_read_without_its_pre_counts_as_the_read() -> None:
    # Hooks configured for PostToolUse only: the Post is the only sign of the Read.
    stale = window([read(at(1), FOO, hook="PostToolUse"), edit(at(3), FOO)], [change(at(2), FOO)])
    assert len(stale_file_view(stale, at(4), CFG)) == 1
    fresh = window(
        [
            read(at(1), FOO, tuid="r0"),
            read(at(1.1), FOO, hook="PostToolUse", tuid="r0"),
            read(at(2.5), FOO, hook="PostToolUse", tuid="r1"),
            edit(at(3), FOO),
        ],
        [change(at(2), FOO)],
    )
    assert stale_file_view(fresh, at(4), CFG) == []


def test_a_post_read_paired_with_its_pre_is_timed_at_the_pre() -> None:
    # The Pre (before the change) is when the agent asked; its Post after the change
    # must not count as a fresh read.
    w = window(
        [
            read(at(1), FOO, tuid="r1"),
            read(at(2.5), FOO, hook="PostToolUse", tuid="r1"),
            edit(at(3), FOO),
        ],
        [change(at(2), FOO)],
    )
    assert len(stale_file_view(w, at(4), CFG)) == 1


def test_every_write_tool_is_an_edit() -> None:
    for tool in ("Edit", "Write", "MultiEdit", "NotebookEdit"):
        w = window([read(at(1), FOO), edit(at(3), FOO, tool=tool)], [change(at(2), FOO)])
        assert len(stale_file_view(w, at(4), CFG)) == 1, tool


def test_codex_apply_patch_edits_every_file_of_the_patch() -> None:
    from rulekit import event

    patch = (
        "*** Begin Patch\n*** Update File: internal/foo.go\n@@\n-a\n+b\n"
        "*** Update File: internal/bar.go\n@@\n-a\n+b\n*** End Patch"
    )
    ap = event("PreToolUse", at(3), tool_name="apply_patch", tool_input={"input": patch})
    w = window(
        [read(at(1), FOO), read(at(1), BAR), ap],
        [change(at(2), FOO), change(at(2), BAR)],
    )
    found = stale_file_view(w, at(4), CFG)
    assert sorted(a.subject for a in found) == [BAR, FOO]


def test_an_edit_that_failed_did_not_happen() -> None:
    w = window(
        [
            read(at(1), FOO),
            edit(at(3), FOO, tuid="e1"),
            edit_result(at(3.1), FOO, ok=False, tuid="e1"),
        ],
        [change(at(2), FOO)],
    )
    assert stale_file_view(w, at(4), CFG) == []


def test_edits_after_now_are_not_seen() -> None:
    w = window([read(at(1), FOO), edit(at(3), FOO)], [change(at(2), FOO)])
    assert stale_file_view(w, at(3) - 1, CFG) == []
    assert len(stale_file_view(w, at(3), CFG)) == 1


def test_stale_edit_older_than_30_minutes_is_history() -> None:
    w = window([read(at(1), FOO), edit(at(3), FOO)], [change(at(2), FOO)])
    assert len(stale_file_view(w, at(3) + 30 * MINUTE_MS, CFG)) == 1
    assert stale_file_view(w, at(3) + 30 * MINUTE_MS + 1, CFG) == []


def test_latest_stale_edit_is_the_evidence_time() -> None:
    w = window(
        [read(at(1), FOO), edit(at(3), FOO), read(at(4), FOO), edit(at(6), FOO)],
        [change(at(2), FOO), change(at(5), FOO)],
    )
    [a] = stale_file_view(w, at(7), CFG)
    assert a.last_evidence_ts == at(6)
    assert "2 of your edits" in a.evidence


def test_results_without_ids_pair_one_to_one_with_their_pre() -> None:
    # Old Claude Code versions send no tool_use_id: a Post pairs with the latest earlier
    # Pre of the same file, once.
    paired = window(
        [read(at(1), FOO), read(at(2.5), FOO, hook="PostToolUse"), edit(at(3), FOO)],
        [change(at(2), FOO)],
    )
    assert len(stale_file_view(paired, at(4), CFG)) == 1
    extra = window(
        [
            read(at(1), FOO),
            read(at(1.1), FOO, hook="PostToolUse"),
            read(at(2.5), FOO, hook="PostToolUse"),
            edit(at(3), FOO),
        ],
        [change(at(2), FOO)],
    )
    assert stale_file_view(extra, at(4), CFG) == []


def test_codex_reads_through_the_shell() -> None:
    from rulekit import event

    def sh(ts: int, cmd: str, hook: str = "PreToolUse", tuid: str | None = None):  # type: ignore[no-untyped-def]
        kw = {"tool_response": "Exit code: 0\nOutput:\nx"} if hook == "PostToolUse" else {}
        return event(
            hook, ts, tool_name="exec_command", tool_input={"cmd": cmd}, tool_use_id=tuid, **kw
        )

    patch = "*** Begin Patch\n*** Update File: internal/foo.go\n@@\n-a\n+b\n*** End Patch"
    ap = event("PreToolUse", at(3), tool_name="apply_patch", tool_input={"input": patch})
    # `sed -n` before the change, patch after it: stale.
    stale = window([sh(at(1), "sed -n '1,200p' internal/foo.go"), ap], [change(at(2), FOO)])
    [a] = stale_file_view(stale, at(4), CFG)
    assert a.subject == FOO
    # `cat` after the change: a fresh view.
    fresh = window(
        [sh(at(1), "sed -n '1,200p' internal/foo.go"), sh(at(2.5), "cat internal/foo.go"), ap],
        [change(at(2), FOO)],
    )
    assert stale_file_view(fresh, at(4), CFG) == []
    # A result whose Pre was seen is the same read, not a later one.
    paired = window(
        [
            sh(at(1), "cat internal/foo.go", tuid="c1"),
            sh(at(2.5), "cat internal/foo.go", hook="PostToolUse", tuid="c1"),
            ap,
        ],
        [change(at(2), FOO)],
    )
    assert len(stale_file_view(paired, at(4), CFG)) == 1
    # `sed -i` edits; it is no read.
    inplace = window(
        [
            sh(at(1), "sed -n '1,200p' internal/foo.go"),
            sh(at(2.5), "sed -i 's/a/b/' internal/foo.go"),
            ap,
        ],
        [change(at(2), FOO)],
    )
    assert len(stale_file_view(inplace, at(4), CFG)) == 1
