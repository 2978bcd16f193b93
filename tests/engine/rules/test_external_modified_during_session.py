"""`external_modified_during_session`: changes this session did not write, ≤ 30 min old."""

from __future__ import annotations

from rulekit import OTHER, PROJECT, SID, at, change, edit, src, window

from tma1.engine.anomaly import Channel, Kind, Severity
from tma1.engine.rules.external_modified_during_session import external_modified_during_session
from tma1.engine.window import RuleConfig

CFG = RuleConfig()
A, B = src("src/a.ts"), src("src/b.ts")


def run(changes: list, now: int, start: int | None = at(0), events: tuple = ()) -> list:  # type: ignore[type-arg]
    return external_modified_during_session(window(events, changes, start=start), now, CFG)


def test_change_by_nobody_we_know_fires_session_wide() -> None:
    [a] = run([change(at(5), A)], at(6))
    assert (a.kind, a.severity, a.channel) == (
        Kind.EXTERNAL_MODIFIED_DURING_SESSION,
        Severity.MEDIUM,
        Channel.USER_PROMPT_SUBMIT,
    )
    assert a.subject == ""
    assert a.related_files == (A,)
    assert a.last_evidence_ts == at(5)
    assert a.session_id == SID
    assert "outside any agent" in a.evidence and "src/a.ts" in a.evidence


def test_change_by_another_session_fires_and_says_so() -> None:
    [a] = run([change(at(5), A, writer=OTHER)], at(6))
    assert "1 other agent session" in a.evidence
    assert "outside any agent" not in a.evidence


def test_own_writes_are_not_external() -> None:
    assert run([change(at(5), A, writer=SID)], at(6)) == []


def test_changes_before_the_session_started_do_not_count() -> None:
    assert run([change(at(5), A)], at(6), start=at(5)) == []
    assert len(run([change(at(5), A)], at(6), start=at(5) - 1)) == 1


def test_unknown_start_falls_back_to_the_first_event_of_the_window() -> None:
    events = (edit(at(4), B),)
    assert run([change(at(3), A)], at(6), start=None, events=events) == []
    assert len(run([change(at(5), A)], at(6), start=None, events=events)) == 1


def test_thirty_minute_edge() -> None:
    assert len(run([change(at(5), A)], at(35))) == 1
    assert run([change(at(5), A)], at(35) + 1) == []


def test_future_changes_are_not_seen() -> None:
    assert run([change(at(5), A)], at(5) - 1) == []


def test_related_files_newest_first_deduplicated_and_capped() -> None:
    changes = [change(at(1), A), change(at(2), B), change(at(3), A)]
    [a] = run(changes, at(4))
    assert a.related_files == (A, B)
    many = [change(at(1) + i, src(f"gen/f{i:02}.ts")) for i in range(15)]
    [b] = run(many, at(4))
    assert len(b.related_files) == 10
    assert b.related_files[0] == src("gen/f14.ts")
    assert "and 5 more" in b.evidence


def test_relative_watcher_paths_are_made_absolute() -> None:
    [a] = run([change(at(5), "src/a.ts")], at(6))
    assert a.related_files == (f"{PROJECT}/src/a.ts",)
