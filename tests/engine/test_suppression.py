"""Suppression with resolution: the seed's four cases, every kind's resolution check,
one-shot context_pressure, "emitted means delivered", restart rebuild, eviction, and a
preview that changes nothing.

Pure `decide` cases first; then the same semantics through a real `Delivery` on a real
store (SQLite and PostgreSQL) with a ManualClock and a scripted rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from enginekit import (
    PROJECT,
    Scripted,
    bash_fail,
    bash_ok,
    finding,
    payload,
    read,
    store_event,
)

from tma1.checks import check_of
from tma1.clock import MINUTE_MS, ManualClock
from tma1.config import Settings
from tma1.counters import Counters
from tma1.engine.anomaly import Anomaly, Channel, Kind
from tma1.engine.delivery import Delivery
from tma1.engine.suppression import (
    IDLE_EVICT_MS,
    SUPPRESSION_WINDOW_MS,
    KeyState,
    Suppression,
    decide,
)
from tma1.engine.window import SessionWindow
from tma1.live.engine import stored_delivery
from tma1.store import Store

NOW = 1_700_000_000_000
UPS = Channel.USER_PROMPT_SUBMIT.value
STOP = Channel.STOP_BLOCK.value

# --- the pure decision step: the seed's four cases -----------------------------------


def test_case1_fresh_key_emits_and_stamps_first_emitted_at() -> None:
    f = finding(Kind.REPEATED_FAILED_BUILD, subject="make", last_evidence_ts=NOW - 5)
    d = decide(f, None, None, NOW)
    assert (d.emit, d.reason, d.finding.first_emitted_at) == (True, "fresh", NOW)
    assert d.outstanding_since is None


@pytest.mark.parametrize("age", [1, 5 * MINUTE_MS, SUPPRESSION_WINDOW_MS - 1])
def test_case2_same_key_within_window_without_resolution_is_silent(age: int) -> None:
    f = finding(Kind.REPEATED_FAILED_BUILD, subject="make", last_evidence_ts=NOW - 1)
    st = KeyState(last_emit_ts=NOW - age, first_emitted_at=NOW - age - 7)
    d = decide(f, st, None, NOW)
    assert (d.emit, d.reason) == (False, "suppressed")
    assert d.outstanding_since == NOW - age - 7


def test_case3_resolution_then_newer_evidence_reemits_with_fresh_first_emitted_at() -> None:
    st = KeyState(last_emit_ts=NOW - MINUTE_MS, first_emitted_at=NOW - 30 * MINUTE_MS)
    newer = finding(Kind.TEST_STUCK, subject="t", last_evidence_ts=NOW - 10)
    d = decide(newer, st, NOW - 20, NOW)
    assert (d.emit, d.reason, d.finding.first_emitted_at) == (True, "resolved_new_evidence", NOW)


@pytest.mark.parametrize("evidence_offset", [-30, -20])  # older than, and equal to, the fix
def test_case3_resolution_without_newer_evidence_is_silent(evidence_offset: int) -> None:
    st = KeyState(last_emit_ts=NOW - MINUTE_MS, first_emitted_at=NOW - MINUTE_MS)
    old = finding(Kind.TEST_STUCK, subject="t", last_evidence_ts=NOW + evidence_offset)
    d = decide(old, st, NOW - 20, NOW)
    assert (d.emit, d.reason) == (False, "resolved")
    # ... even long after the window: a resolved finding needs new evidence.
    reset = KeyState(resolved_at=NOW - 20)
    later = decide(old, reset, None, NOW + 3 * SUPPRESSION_WINDOW_MS)
    assert (later.emit, later.reason) == (False, "resolved")
    fresh = decide(replace(old, last_evidence_ts=NOW - 19), reset, None, NOW)
    assert (fresh.emit, fresh.reason, fresh.finding.first_emitted_at) == (True, "fresh", NOW)


@pytest.mark.parametrize("age", [SUPPRESSION_WINDOW_MS, SUPPRESSION_WINDOW_MS + 1, 60 * MINUTE_MS])
def test_case4_after_window_emits_keeping_first_emitted_at(age: int) -> None:
    f = finding(Kind.STALE_FILE_VIEW, subject="/p/a.go", last_evidence_ts=NOW - age - 1)
    st = KeyState(last_emit_ts=NOW - age, first_emitted_at=NOW - age - 99)
    d = decide(f, st, None, NOW)
    assert (d.emit, d.reason, d.finding.first_emitted_at) == (
        True,
        "window_elapsed",
        NOW - age - 99,
    )


def test_context_pressure_is_one_shot() -> None:
    f = finding(Kind.CONTEXT_PRESSURE, last_evidence_ts=NOW)
    assert decide(f, None, None, NOW).emit
    st = KeyState(last_emit_ts=NOW - 2 * SUPPRESSION_WINDOW_MS, first_emitted_at=NOW - 1)
    d = decide(f, st, None, NOW)
    assert (d.emit, d.reason) == (False, "one_shot")


def test_new_external_changes_are_news_inside_the_window() -> None:
    st = KeyState(last_emit_ts=NOW - MINUTE_MS, first_emitted_at=NOW - 2 * MINUTE_MS)
    same = finding(Kind.EXTERNAL_MODIFIED_DURING_SESSION, last_evidence_ts=NOW - 2 * MINUTE_MS)
    assert decide(same, st, None, NOW).reason == "suppressed"
    newer = replace(same, last_evidence_ts=NOW - 10)
    d = decide(newer, st, None, NOW)
    assert (d.emit, d.reason, d.finding.first_emitted_at) == (
        True,
        "new_evidence",
        NOW - 2 * MINUTE_MS,
    )
    # Only external changes: a newer failure of a stuck test inside the window stays quiet.
    stuck = finding(Kind.TEST_STUCK, subject="t", last_evidence_ts=NOW - 10)
    assert decide(stuck, st, None, NOW).reason == "suppressed"


def test_severity_climb_is_a_new_key() -> None:
    medium = finding(Kind.BUILD_BROKEN_AFTER_MY_EDIT, subject="go build", severity="medium")
    high = replace(medium, severity="high")
    assert medium.stable_key != high.stable_key
    sup = Suppression()
    win = SessionWindow(session_id="s", project=None)
    sup.commit("s", sup.evaluate("s", [medium], win, NOW), NOW, limit=4)
    assert not sup.evaluate("s", [medium], win, NOW + 1)[0].emit
    assert sup.evaluate("s", [high], win, NOW + 1)[0].emit


# --- the Suppression object -----------------------------------------------------------


def test_concurrent_deliveries_emit_a_finding_once() -> None:
    sup = Suppression()
    win = SessionWindow(session_id="s", project=None)
    f = finding(Kind.REPEATED_FAILED_BUILD, subject="make", last_evidence_ts=NOW)
    first = sup.evaluate("s", [f], win, NOW)
    second = sup.evaluate("s", [f], win, NOW)  # evaluated before the first commits
    assert [a.stable_key for a in sup.commit("s", first, NOW, limit=3)] == [f.stable_key]
    assert sup.commit("s", second, NOW, limit=3) == []


def test_commit_honours_the_limit_and_leaves_the_rest_undelivered() -> None:
    sup = Suppression()
    win = SessionWindow(session_id="s", project=None)
    fs = [finding(Kind.TEST_STUCK, subject=f"t{i}", last_evidence_ts=NOW) for i in range(6)]
    got = sup.commit("s", sup.evaluate("s", fs, win, NOW), NOW, limit=4)
    assert [a.subject for a in got] == ["t0", "t1", "t2", "t3"]
    rest = sup.commit("s", sup.evaluate("s", fs, win, NOW + 1), NOW + 1, limit=4)
    assert [a.subject for a in rest] == ["t4", "t5"]
    assert [a.first_emitted_at for a in rest] == [NOW + 1, NOW + 1]


def test_idle_sessions_are_evicted_after_24h() -> None:
    sup = Suppression()
    win = SessionWindow(session_id="s", project=None)
    f = finding(Kind.TEST_STUCK, subject="t", last_evidence_ts=NOW)
    sup.commit("s", sup.evaluate("s", [f], win, NOW), NOW, limit=4)
    sup.touch("s", NOW + 5)
    assert sup.evict_idle(NOW + 5 + IDLE_EVICT_MS - 1) == 0
    assert sup.state("s", f.stable_key) is not None
    assert sup.evict_idle(NOW + 5 + IDLE_EVICT_MS) == 1
    assert sup.state("s", f.stable_key) is None and len(sup) == 0


def test_restore_rebuilds_last_emit_per_key_and_one_shot() -> None:
    sup = Suppression()
    rows = [
        {
            "session_id": "s",
            "stable_key": "k|high|x",
            "kind": "k",
            "ts": NOW,
            "first_emitted_at": NOW,
        },
        {
            "session_id": "s",
            "stable_key": "k|high|x",
            "kind": "k",
            "ts": NOW + 60_000,
            "first_emitted_at": NOW,
        },
        {
            "session_id": "s",
            "stable_key": "context_pressure|medium|",
            "kind": "context_pressure",
            "ts": NOW,
            "first_emitted_at": NOW,
        },
    ]
    assert sup.restore(rows) == 3
    st = sup.state("s", "k|high|x")
    assert st is not None and (st.last_emit_ts, st.first_emitted_at) == (NOW + 60_000, NOW)
    cp = finding(Kind.CONTEXT_PRESSURE, last_evidence_ts=NOW + 10**9)
    win = SessionWindow(session_id="s", project=None)
    assert sup.evaluate("s", [cp], win, NOW + 10**9)[0].reason == "one_shot"


def test_context_pressure_is_one_shot_per_epoch_and_so_is_its_restore() -> None:
    """The epoch is the finding's subject (design §2.17): a new epoch is a new key, told
    once; an epoch already told stays silent, in memory and after a rebuild."""
    win = SessionWindow(session_id="s", project=None)
    old = finding(Kind.CONTEXT_PRESSURE, last_evidence_ts=NOW)
    new = finding(Kind.CONTEXT_PRESSURE, subject=f"epoch {NOW + 1}", last_evidence_ts=NOW + 2)
    sup = Suppression()
    assert len(sup.commit("s", sup.evaluate("s", [old], win, NOW), NOW, limit=4)) == 1
    later = NOW + 10**9
    assert [d.reason for d in sup.evaluate("s", [old, new], win, later)] == ["one_shot", "fresh"]
    [told] = sup.commit("s", sup.evaluate("s", [new], win, later), later, limit=4)
    assert told.stable_key == new.stable_key
    assert sup.evaluate("s", [new], win, later + 10**9)[0].reason == "one_shot"

    rebuilt = Suppression()
    rebuilt.restore(
        [{"session_id": "s", "stable_key": old.stable_key, "kind": old.kind, "ts": NOW,
          "first_emitted_at": NOW}]
    )  # fmt: skip
    decisions = rebuilt.evaluate("s", [old, new], win, later)
    assert [d.reason for d in decisions] == ["one_shot", "fresh"]


# --- through a real Delivery, store and clock -----------------------------------------


@pytest.fixture
def rule() -> Scripted:
    return Scripted()


@pytest.fixture
def make_delivery(
    store: Store, clock: ManualClock, tmp_path: Path, rule: Scripted
) -> Callable[[], Delivery]:
    made: list[Delivery] = []

    def make() -> Delivery:
        d = stored_delivery(
            store,
            clock=clock,
            settings=Settings(data_dir=tmp_path, watch_files=False),
            counters=Counters(),
            rules={"scripted": rule},
        )
        d.start()
        made.append(d)
        return d

    yield make  # type: ignore[misc]
    for d in made:
        d.stop()


class Session:
    """One session driven through store + delivery, as the service would."""

    def __init__(self, delivery: Delivery, store: Store, clock: ManualClock, rule: Scripted):
        self.d, self.store, self.clock, self.rule = delivery, store, clock, rule
        self.sid = "sess-1"

    def event(self, data: dict[str, object]) -> int:
        ts = self.clock.advance(1_000)
        store_event(self.store, data, ts)
        self.d.invalidate(self.sid)
        return ts

    def sees(self, *findings: Anomaly) -> None:
        self.rule.findings = [replace(f, session_id=self.sid) for f in findings]
        self.d.invalidate(self.sid)

    def deliver(self, channel: str) -> list[Anomaly]:
        return self.d.deliver(self.sid, channel)


@pytest.fixture
def sess(
    make_delivery: Callable[[], Delivery], store: Store, clock: ManualClock, rule: Scripted
) -> Session:
    s = Session(make_delivery(), store, clock, rule)
    s.event(payload(s.sid, "SessionStart"))
    return s


def test_stale_file_view_resolves_on_reread_of_the_related_file(sess: Session) -> None:
    path = f"{PROJECT}/pkg/a.go"
    edit_ts = sess.clock.now_ms()
    f = finding(Kind.STALE_FILE_VIEW, subject=path, related_files=(path,), last_evidence_ts=edit_ts)
    sess.sees(f)
    assert [a.subject for a in sess.deliver(UPS)] == [path]
    sess.event(read(sess.sid, f"{PROJECT}/pkg/b.go"))  # another file resolves nothing
    sess.clock.advance(MINUTE_MS)
    assert sess.deliver(UPS) == []
    preview = {p["stable_key"]: p for p in sess.d.preview(sess.sid)["findings"]}
    assert preview[f.stable_key]["decision"] == "suppressed"
    sess.event(read(sess.sid, "pkg/a.go"))  # relative path, resolved against cwd
    assert sess.deliver(UPS) == []
    assert sess.d.preview(sess.sid)["findings"][0]["decision"] == "resolved"
    sess.clock.advance(SUPPRESSION_WINDOW_MS + MINUTE_MS)
    assert sess.deliver(UPS) == []  # resolved, and no new stale edit
    new_edit = sess.clock.advance(1_000)
    sess.sees(replace(f, last_evidence_ts=new_edit))
    got = sess.deliver(UPS)
    assert [a.first_emitted_at for a in got] == [sess.clock.now_ms()]


@pytest.mark.parametrize(
    "kind",
    [Kind.BUILD_BROKEN_AFTER_MY_EDIT, Kind.REPEATED_FAILED_BUILD, Kind.TEST_STUCK],
)
def test_build_and_test_kinds_resolve_on_a_covering_pass_of_their_check(
    sess: Session, kind: Kind
) -> None:
    # Design §2.15 (turn 2): the rules carry the failing check; only a passing run that
    # covers it resolves (turn 1: any successful shell command, so an `ls` "fixed" a build).
    check = check_of("make build")
    f = replace(
        finding(kind, subject="make build", last_evidence_ts=sess.clock.now_ms()),
        extra={"check": check},
    )
    channel = str(f.channel)
    sess.sees(f)
    assert len(sess.deliver(channel)) == 1
    first_emit = sess.clock.now_ms()
    # None of these resolve: a failure, a failure hidden by a pipe, a non-shell success.
    sess.event(bash_fail(sess.sid, "make build"))
    sess.event(
        bash_ok(
            sess.sid,
            "pytest -q 2>&1 | tail -5",
            stdout="FAILED tests/test_a.py::test_x - assert 1 == 2\n1 failed in 0.1s",
        )
    )
    sess.event(payload(sess.sid, "PostToolUse", tool_name="Read", tool_input={"file_path": "x"}))
    assert sess.deliver(channel) == []
    assert sess.d.preview(sess.sid)["findings"][0]["decision"] == "suppressed"
    sess.event(bash_ok(sess.sid, "ls"))  # no check: resolves nothing
    assert sess.d.preview(sess.sid)["findings"][0]["decision"] == "suppressed"
    fixed_at = sess.event(bash_ok(sess.sid, "make build 2>&1 | tail -3", stdout="ok"))
    assert sess.deliver(channel) == []
    sess.clock.advance(SUPPRESSION_WINDOW_MS * 2)
    assert sess.deliver(channel) == []  # resolved: the old evidence never comes back
    sess.sees(replace(f, last_evidence_ts=fixed_at - 1))
    assert sess.deliver(channel) == []
    sess.sees(replace(f, last_evidence_ts=fixed_at + 1))
    again = sess.deliver(channel)
    assert len(again) == 1 and again[0].first_emitted_at == sess.clock.now_ms() > first_emit


def test_external_modified_has_no_resolution_and_decays_by_time(sess: Session) -> None:
    t0 = sess.clock.now_ms()
    f = finding(Kind.EXTERNAL_MODIFIED_DURING_SESSION, last_evidence_ts=t0)
    sess.sees(f)
    assert [a.first_emitted_at for a in sess.deliver(UPS)] == [t0]
    sess.event(bash_ok(sess.sid, "ls"))
    sess.event(read(sess.sid, f"{PROJECT}/x.py"))
    assert sess.deliver(UPS) == []
    sess.clock.set(t0 + SUPPRESSION_WINDOW_MS)
    assert [a.first_emitted_at for a in sess.deliver(UPS)] == [t0]  # case 4 keeps it
    sess.clock.advance(MINUTE_MS)
    assert sess.deliver(UPS) == []
    newer = sess.clock.now_ms() - 5
    sess.sees(replace(f, last_evidence_ts=newer))
    assert [a.first_emitted_at for a in sess.deliver(UPS)] == [t0]  # a new change is news


def test_context_pressure_is_one_shot_even_across_a_restart(
    sess: Session, make_delivery: Callable[[], Delivery]
) -> None:
    f = finding(Kind.CONTEXT_PRESSURE, last_evidence_ts=sess.clock.now_ms())
    sess.sees(f)
    assert len(sess.deliver(UPS)) == 1
    sess.event(bash_ok(sess.sid, "ls"))
    sess.clock.advance(3 * SUPPRESSION_WINDOW_MS)
    sess.sees(replace(f, last_evidence_ts=sess.clock.now_ms()))
    assert sess.deliver(UPS) == []
    sess.d.stop()
    sess.d = make_delivery()
    sess.sees(replace(f, last_evidence_ts=sess.clock.now_ms()))
    assert sess.deliver(UPS) == []
    assert sess.d.preview(sess.sid)["findings"][0]["decision"] == "one_shot"


def test_restart_rebuilds_state_from_the_emit_log(
    sess: Session, make_delivery: Callable[[], Delivery], store: Store
) -> None:
    f = finding(Kind.REPEATED_FAILED_BUILD, subject="make", last_evidence_ts=sess.clock.now_ms())
    sess.sees(f)
    t_emit = sess.clock.now_ms()
    assert len(sess.deliver(STOP)) == 1
    sess.d.stop()  # graceful: the emit log is flushed
    assert [r["first_emitted_at"] for r in store.emits_since(0)] == [t_emit]
    sess.d = make_delivery()
    sess.sees(f)
    sess.clock.advance(SUPPRESSION_WINDOW_MS - 1_000)
    assert sess.deliver(STOP) == []
    sess.clock.advance(1_000)
    # A Stop block is not repeated on the same evidence (issue 15, pattern 7) ...
    assert sess.deliver(STOP) == []
    # ... and is, keeping its first_emitted_at, once a newer failure supports it.
    sess.sees(replace(f, last_evidence_ts=sess.clock.now_ms()))
    assert [a.first_emitted_at for a in sess.deliver(STOP)] == [t_emit]
    sess.d.flush()
    assert [r["first_emitted_at"] for r in store.emits_since(0)] == [t_emit, t_emit]


def test_a_channel_only_consumes_its_own_findings(sess: Session) -> None:
    """Emitted means delivered: a UserPromptSubmit never uses up a stop_block finding."""
    now = sess.clock.now_ms()
    block = finding(Kind.REPEATED_FAILED_BUILD, subject="make", last_evidence_ts=now)
    ctx = [finding(Kind.TEST_STUCK, subject=f"t{i}", last_evidence_ts=now - i) for i in range(5)]
    sess.sees(block, *ctx)
    got = sess.deliver(UPS)
    assert [a.subject for a in got] == ["t0", "t1", "t2", "t3"]  # newest evidence first
    assert [a.subject for a in sess.deliver(STOP)] == ["make"]
    assert [a.subject for a in sess.deliver(UPS)] == ["t4"]  # the undelivered one waits
    sess.d.flush()
    rows = sess.store.emits_since(0)
    assert sorted((r["channel"], r["stable_key"].split("|")[-1]) for r in rows) == sorted(
        [(UPS, f"t{i}") for i in range(5)] + [(STOP, "make")]
    )


def test_preview_called_100_times_changes_nothing_a_delivery_sees(
    sess: Session, store: Store
) -> None:
    now = sess.clock.now_ms()
    stuck = finding(Kind.TEST_STUCK, subject="t1", last_evidence_ts=now)
    block = finding(Kind.REPEATED_FAILED_BUILD, subject="make", last_evidence_ts=now)
    sess.sees(stuck, block)
    sess.deliver(STOP)  # give the block finding some state to (not) disturb
    sess.event(bash_ok(sess.sid, "ls"))  # ... and a resolution the preview must not commit
    before = [sess.d.suppression.state(sess.sid, f.stable_key) for f in (stuck, block)]
    for i in range(100):
        if i % 10 == 0:
            sess.clock.advance(7)
        out = sess.d.preview(sess.sid)
        by_key = {p["stable_key"]: p for p in out["findings"]}
        assert by_key[stuck.stable_key]["would_deliver"] is True
        assert by_key[block.stable_key]["would_deliver"] is False
    after = [sess.d.suppression.state(sess.sid, f.stable_key) for f in (stuck, block)]
    assert before == after
    sess.d.flush()
    assert len(store.emits_since(0)) == 1  # only the Stop delivery above
    got = sess.deliver(UPS)
    assert [(a.subject, a.first_emitted_at) for a in got] == [("t1", sess.clock.now_ms())]


def test_delivery_evicts_sessions_idle_for_24h(sess: Session) -> None:
    f = finding(Kind.TEST_STUCK, subject="t", last_evidence_ts=sess.clock.now_ms())
    sess.sees(f)
    assert len(sess.deliver(UPS)) == 1
    assert sess.d.suppression.state(sess.sid, f.stable_key) is not None
    sess.rule.findings = []  # the other session's deliveries find nothing
    sess.clock.advance(IDLE_EVICT_MS - MINUTE_MS)
    sess.d.deliver("another-session", UPS)
    assert sess.d.suppression.state(sess.sid, f.stable_key) is not None
    sess.clock.advance(2 * MINUTE_MS)
    sess.d.deliver("another-session", UPS)
    assert sess.d.suppression.state(sess.sid, f.stable_key) is None
    assert sess.d.counters.get("engine.sessions_evicted") == 1


def test_stale_file_view_resolves_on_a_shell_read_codex_style(sess: Session) -> None:
    path = f"{PROJECT}/pkg/a.go"
    f = finding(
        Kind.STALE_FILE_VIEW,
        subject=path,
        related_files=(path,),
        last_evidence_ts=sess.clock.now_ms(),
    )
    sess.sees(f)
    assert [a.subject for a in sess.deliver(UPS)] == [path]
    sess.event(bash_ok(sess.sid, "cat pkg/b.go"))  # another file resolves nothing
    assert sess.d.preview(sess.sid)["findings"][0]["decision"] == "suppressed"
    sess.event(bash_ok(sess.sid, "sed -n '1,80p' pkg/a.go"))
    assert sess.d.preview(sess.sid)["findings"][0]["decision"] == "resolved"
