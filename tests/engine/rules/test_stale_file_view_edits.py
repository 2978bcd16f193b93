"""`detect_stale_edit`: the seed's six cases, plus the open-interval edges."""

from __future__ import annotations

from rulekit import at, change, src

from tma1.engine.rules.stale_file_view import detect_stale_edit, find_stale_edits

FOO = src("foo.go")


def test_plan_scenario_read_then_external_change_then_edit_is_stale() -> None:
    c = change(at(2), FOO)
    assert detect_stale_edit([at(1)], [at(3)], [c]) == c


def test_reread_after_the_change_makes_the_edit_fresh() -> None:
    assert detect_stale_edit([at(1), at(2.5)], [at(3)], [change(at(2), FOO)]) is None


def test_edit_without_any_read_is_not_judged() -> None:
    assert detect_stale_edit([], [at(3)], [change(at(2), FOO)]) is None


def test_change_before_the_read_is_already_seen() -> None:
    assert detect_stale_edit([at(1)], [at(3)], [change(at(0.5), FOO)]) is None


def test_two_stale_edits_the_latest_change_wins() -> None:
    first, second = change(at(2), FOO), change(at(5), FOO)
    found = detect_stale_edit([at(1), at(4)], [at(3), at(6)], [second, first])
    assert found == second
    stale = find_stale_edits([at(1), at(4)], [at(3), at(6)], [first, second])
    assert [(s.edit_ts, s.last_read_ts, s.change) for s in stale] == [
        (at(3), at(1), first),
        (at(6), at(4), second),
    ]


def test_no_changes_no_stale_edit() -> None:
    assert detect_stale_edit([at(1)], [at(3), at(4)], []) is None


def test_interval_is_open_at_both_ends() -> None:
    # A change stamped at the very ms of the read was read; one at the edit's ms is the edit.
    assert detect_stale_edit([at(1)], [at(3)], [change(at(1), FOO)]) is None
    assert detect_stale_edit([at(1)], [at(3)], [change(at(3), FOO)]) is None
    inside = change(at(3) - 1, FOO)
    assert detect_stale_edit([at(1)], [at(3)], [inside]) == inside


def test_read_at_the_same_ms_as_the_edit_does_not_count_as_before_it() -> None:
    c = change(at(2), FOO)
    assert detect_stale_edit([at(1), at(3)], [at(3)], [c]) == c


def test_only_the_most_recent_read_before_each_edit_matters() -> None:
    # Change between two reads, both before the edit: the second read saw it.
    assert detect_stale_edit([at(1), at(2.5)], [at(3)], [change(at(2), FOO)]) is None
    # A read after the edit does not rescue the edit.
    c = change(at(2), FOO)
    assert detect_stale_edit([at(1), at(4)], [at(3)], [c]) == c
