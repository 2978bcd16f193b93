"""The Detector: what one SessionWindow holds, the 30-second candidate cache and its
invalidation, and rule isolation (a failing rule never silences the others)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from enginekit import PROJECT, Scripted, bash_fail, bash_ok, finding, payload, read, store_event
from hypothesis import given, settings
from hypothesis import strategies as st

from tma1.clock import MINUTE_MS, ManualClock
from tma1.counters import Counters
from tma1.engine.anomaly import Anomaly, Kind
from tma1.engine.detector import CACHE_TTL_MS, Detector, run_rules
from tma1.engine.rules import SPECS
from tma1.engine.window import RuleConfig, SessionWindow
from tma1.events import FileChange, Usage
from tma1.live.windows import FULL_RELOAD_MS, StoreWindows
from tma1.store import Store

SID = "sess-d"


def make(store: Store, clock: ManualClock, **rules: object) -> Detector:
    config, counters = RuleConfig(context_pressure_threshold=1234), Counters()
    return Detector(
        source=StoreWindows(store, config=config, counters=counters),
        clock=clock,
        config=config,
        counters=counters,
        rules=rules,  # type: ignore[arg-type]
    )


def test_window_holds_the_last_hour_of_events_and_90_minutes_of_project_changes(
    store: Store, clock: ManualClock
) -> None:
    now = clock.now_ms()
    first = store_event(store, payload(SID, "SessionStart"), now - 3 * 60 * MINUTE_MS)
    too_old = store_event(store, read(SID, "/a"), now - 60 * MINUTE_MS - 1)
    edge = store_event(store, read(SID, "/b"), now - 60 * MINUTE_MS)
    recent = store_event(store, bash_fail(SID, "make"), now - 1)
    store_event(store, read(SID, "/future"), now + 1)  # not yet visible at `now`
    store_event(store, read("other-session", "/c"), now - 2)
    for ts, project in [
        (now - 90 * MINUTE_MS - 1, PROJECT),
        (now - 90 * MINUTE_MS, PROJECT),
        (now - 5, PROJECT),
        (now - 5, "/another/project"),
    ]:
        store.insert_change(
            FileChange(ts=ts, project=project, path=f"{project}/f.py", change="modified")
        )
    store.insert_usages(
        [
            Usage(ts=now - 10_000, session_id=SID, occupancy=10),
            Usage(ts=now - 1_000, session_id=SID, occupancy=99_000),
            Usage(ts=now - 1_000, session_id="other-session", occupancy=5),
        ]
    )
    rule = Scripted()
    det = make(store, clock, scripted=rule)
    w = det.detect(SID).window
    assert [e.id for e in w.events] == [edge.id, recent.id]
    assert too_old.id not in [e.id for e in w.events]
    assert w.project == PROJECT
    assert [c.ts for c in w.changes] == [now - 90 * MINUTE_MS, now - 5]
    assert w.usage is not None and w.usage.occupancy == 99_000
    assert w.session_start_ts == first.ts
    assert rule.calls[0][1] == now and rule.calls[0][0] is w


def test_project_comes_from_older_events_when_the_last_hour_is_quiet(
    store: Store, clock: ManualClock
) -> None:
    store_event(store, payload(SID, "SessionStart"), clock.now_ms() - 2 * 60 * MINUTE_MS)
    store.insert_change(
        FileChange(ts=clock.now_ms() - 1, project=PROJECT, path=f"{PROJECT}/x", change="added")
    )
    w = make(store, clock).detect(SID).window
    assert (w.events, w.project, len(w.changes)) == ([], PROJECT, 1)


def test_candidates_are_cached_30_seconds(store: Store, clock: ManualClock) -> None:
    store_event(store, payload(SID, "SessionStart"), clock.now_ms())
    rule = Scripted([finding(Kind.TEST_STUCK, subject="t")])
    det = make(store, clock, scripted=rule)
    cold = det.detect(SID)
    assert not cold.cached and cold.candidates[0].session_id == SID
    clock.advance(CACHE_TTL_MS - 1)
    warm = det.detect(SID)
    assert warm.cached and warm.candidates == cold.candidates and len(rule.calls) == 1
    clock.advance(1)
    assert not det.detect(SID).cached and len(rule.calls) == 2
    assert det.counters.get("engine.detect.warm") == 1


def test_every_event_of_the_session_drops_its_cache(store: Store, clock: ManualClock) -> None:
    store_event(store, payload(SID, "SessionStart"), clock.now_ms())
    store_event(store, payload("other", "SessionStart"), clock.now_ms())
    rule = Scripted()
    det = make(store, clock, scripted=rule)
    det.detect(SID)
    det.detect("other")
    store_event(store, read(SID, "/x"), clock.advance(1_000))
    det.invalidate(SID)
    assert not det.detect(SID).cached
    assert len(rule.calls[-1][0].events) == 2  # the new event is in the reloaded window
    assert det.detect("other").cached


def test_a_file_change_drops_the_cache_of_every_session_of_its_project(
    store: Store, clock: ManualClock
) -> None:
    for sid in ("a", "b"):
        store_event(store, payload(sid, "SessionStart"), clock.now_ms())
    store_event(store, {**payload("c", "SessionStart"), "cwd": "/elsewhere"}, clock.now_ms())
    det = make(store, clock, scripted=Scripted())
    for sid in ("a", "b", "c"):
        det.detect(sid)
    det.invalidate_project(PROJECT)
    assert [det.detect(s).cached for s in ("a", "b", "c")] == [False, False, True]
    det.invalidate_project("/never/seen")  # harmless


def test_an_invalidation_during_detection_is_not_lost(store: Store, clock: ManualClock) -> None:
    store_event(store, payload(SID, "SessionStart"), clock.now_ms())
    det: Detector

    def invalidating(window: SessionWindow, now: int, config: RuleConfig) -> list[Anomaly]:
        det.invalidate(SID)  # an event arrives while the rules run
        return []

    det = make(store, clock, r=invalidating)
    det.detect(SID)
    assert not det.detect(SID).cached


def test_a_failing_rule_is_counted_logged_and_skipped(
    store: Store, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    store_event(store, payload(SID, "SessionStart"), clock.now_ms())

    def broken(window: SessionWindow, now: int, config: RuleConfig) -> list[Anomaly]:
        raise ZeroDivisionError("bug in a rule")

    def wrong_type(window: SessionWindow, now: int, config: RuleConfig) -> list[Anomaly]:
        return ["not an anomaly"]  # type: ignore[list-item]

    good = Scripted([finding(Kind.TEST_STUCK, subject="t")])
    det = make(store, clock, broken=broken, good=good, wrong=wrong_type)
    with caplog.at_level("ERROR", logger="tma1.engine"):
        cands = det.detect(SID).candidates
    assert [c.subject for c in cands] == ["t"]
    assert det.counters.snapshot("engine.rule_errors.") == {"broken": 1, "wrong": 1}
    assert any("rule broken failed" in r.getMessage() for r in caplog.records)


def test_run_rules_is_a_pure_function_of_the_window() -> None:
    w = SessionWindow(session_id="s", project=None)
    seen: list[tuple[int, int]] = []

    def rule(window: SessionWindow, now: int, config: RuleConfig) -> list[Anomaly]:
        seen.append((now, config.context_pressure_threshold))
        return [finding(Kind.CONTEXT_PRESSURE)]

    out = run_rules({"r": rule}, w, 42, RuleConfig(context_pressure_threshold=7))
    assert seen == [(42, 7)] and [a.session_id for a in out] == ["s"]


def test_the_default_rule_set_is_the_rules_package(
    store: Store, clock: ManualClock, tmp_path: Path
) -> None:
    counters = Counters()
    det = Detector(
        source=StoreWindows(store, config=RuleConfig(), counters=counters),
        clock=clock,
        config=RuleConfig(),
        counters=counters,
    )
    assert set(det.rules) == set(det.health()["rules"]) == set(SPECS)
    store_event(store, payload(SID, "SessionStart"), clock.now_ms())
    assert det.detect(SID).candidates == ()


def test_window_events_read_what_rules_need(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    extra = {"transcript_path": "/t.jsonl", "permission_mode": "default", "duration_ms": 7,
             "model": "m"}  # fmt: skip
    ok = store_event(store, {**bash_ok(SID, "ls", "a.txt"), **extra}, now - 3)
    fail = store_event(
        store, {**bash_fail(SID, "make", "Exit code 2\nx.go:3: boom"), **extra}, now - 2
    )
    masked = store_event(
        store,
        {**bash_ok(SID, "pytest | tail", "FAILED tests/t.py::test_a - x\n1 failed"), **extra},
        now - 1,
    )
    full = {e.id: e for e in store.session_events(SID, 0)}
    lean = store.window_events(SID, 0)
    assert [e.id for e in lean] == [ok.id, fail.id, masked.id]
    skipped = {
        "tool_input": None,
        "tool_result": None,
        "transcript_path": None,
        "permission_mode": None,
        "duration_ms": None,
        "metadata": {},
    }
    for e in lean:
        # Every field as the full read has it (the lean read builds events positionally),
        # except the columns it deliberately skips.
        assert e.tool_input is None and full[e.id].tool_input is not None
        assert e.transcript_path is None and full[e.id].transcript_path is not None
        assert e.metadata == {} and full[e.id].metadata
        assert replace(e, **skipped) == replace(full[e.id], **skipped)
    assert [e.tool_result is not None for e in lean] == [False, True, True]
    assert lean[1].tool_result == full[fail.id].tool_result


def test_incremental_reloads_match_a_fresh_load(store: Store, clock: ManualClock) -> None:
    """Reloads after invalidation fetch only new rows; the window must equal a fresh read,
    including rows written late with an older timestamp and rows leaving the hour."""
    import random

    rng = random.Random(7)
    det = make(store, clock, scripted=Scripted())
    store_event(store, payload(SID, "SessionStart"), clock.now_ms())
    for step in range(120):
        now = clock.advance(rng.choice([1_000, 20_000, 5 * MINUTE_MS]))
        late = rng.random() < 0.2
        ts = now - rng.randrange(1, 3 * MINUTE_MS) if late else now
        store_event(store, read(SID, f"/p/{step}.py") if step % 2 else bash_fail(SID, "m"), ts)
        store_event(store, payload("noise", "Stop"), now)  # other sessions share the id sequence
        det.invalidate(SID)
        got = [e.id for e in det.detect(SID).window.events]
        want = [e.id for e in store.session_events(SID, now - 60 * MINUTE_MS, now)]
        assert got == want, step
    assert det.counters.get("engine.window.full_loads") < 60  # most reloads were incremental


def test_a_delivery_runs_only_the_rules_that_serve_its_channel(
    store: Store, clock: ManualClock
) -> None:
    store_event(store, payload(SID, "SessionStart"), clock.now_ms())
    stale = Scripted([finding(Kind.STALE_FILE_VIEW, subject="/p/a.py")])
    repeated = Scripted([finding(Kind.REPEATED_FAILED_BUILD, subject="make")])
    custom = Scripted()  # a kind the seed does not know: runs for every channel
    det = make(
        store,
        clock,
        stale_file_view=stale,
        repeated_failed_build=repeated,
        probe=custom,
    )
    assert det.serves("no_such_channel")  # unknown kinds serve every channel
    d = det.detect(SID, channel="stop_block")
    assert (len(stale.calls), len(repeated.calls), len(custom.calls)) == (0, 1, 1)
    assert [c.subject for c in d.candidates] == ["make"]
    # The preview needs every rule: only the missing one runs, on the same window.
    full = det.detect(SID)
    assert (len(stale.calls), len(repeated.calls), len(custom.calls)) == (1, 1, 1)
    assert stale.calls[0][0] is d.window and [c.subject for c in full.candidates] == [
        "/p/a.py",
        "make",
    ]
    assert det.detect(SID, channel="user_prompt_submit").cached


def test_post_tool_use_needs_no_detection_with_the_seed_rules(
    store: Store, clock: ManualClock
) -> None:
    seed_only = make(store, clock, stale_file_view=Scripted(), context_pressure=Scripted())
    assert not seed_only.serves("post_tool_use")
    assert seed_only.serves("user_prompt_submit") and not seed_only.serves("stop_block")


def test_postgresql_rows_committed_out_of_id_order_are_not_missed(
    store: Store, clock: ManualClock
) -> None:
    if store.dialect != "postgresql":
        pytest.skip("only PostgreSQL lets two writers commit out of id order")
    from sqlalchemy import insert

    from tma1.events import parse_payload
    from tma1.store.events import event_row
    from tma1.store.schema import hook_events

    det = make(store, clock, scripted=Scripted())
    store_event(store, payload(SID, "SessionStart"), clock.now_ms())
    det.detect(SID)
    slow = store.connect()
    tx = slow.begin()
    slow.execute(
        insert(hook_events).values(
            **event_row(parse_payload(read(SID, "/slow"), ts=clock.advance(1)))
        )
    )
    quick = store_event(store, read(SID, "/quick"), clock.advance(1))  # higher id, commits first
    det.invalidate(SID)
    assert [e.tool_file_path for e in det.detect(SID).window.events][-1:] == ["/quick"]
    tx.commit()
    slow.close()
    det.invalidate(SID)
    files = [e.tool_file_path for e in det.detect(SID).window.events]
    assert files == [None, "/slow", "/quick"] and quick.id is not None


@settings(max_examples=500, deadline=None)
@given(st.lists(st.text(max_size=12), max_size=3))
def test_the_window_reads_stored_path_lists_back_exactly(paths: list[str]) -> None:
    from tma1.events import json_text
    from tma1.store.events import _path_list

    assert _path_list(json_text(paths)) == paths


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.text(max_size=12), max_size=2))
def test_stored_path_lists_are_the_json_of_the_list(paths: list[str]) -> None:
    from tma1.events import json_text
    from tma1.store.events import _json_paths

    assert _json_paths(paths) == json_text(paths)


def test_the_context_epoch_is_loaded_past_the_threshold_and_looked_up_incrementally(
    store: Store, clock: ManualClock
) -> None:
    """The window's epoch (design §2.17) is the newest compaction — a transcript row or a
    compaction hook — loaded only when the occupancy is past its threshold (1,234 here);
    later looks read only what is newer, minus EPOCH_LATE_MS, and every FULL_RELOAD_MS
    everything again."""
    det = make(store, clock)
    t0 = clock.now_ms()
    store_event(store, payload(SID, "SessionStart", source="startup"), t0 - 30 * MINUTE_MS)
    store.insert_usages([Usage(ts=t0 - 20 * MINUTE_MS, session_id=SID, occupancy=0,
                               kind="compaction")])  # fmt: skip
    store.insert_usages([Usage(ts=t0 - 1_000, session_id=SID, occupancy=1_233)])
    assert det.source.window(SID, t0).epoch_start_ts is None  # under the threshold: not read
    store.insert_usages([Usage(ts=t0 - 500, session_id=SID, occupancy=5_000)])
    assert det.source.window(SID, t0).epoch_start_ts == t0 - 20 * MINUTE_MS

    clock.advance(MINUTE_MS)
    t1 = clock.now_ms()
    store_event(store, payload(SID, "PreCompact", trigger="auto"), t1 - 2_000)
    store.insert_usages([Usage(ts=t1 - 1_000, session_id=SID, occupancy=5_000)])
    assert det.source.window(SID, t1).epoch_start_ts == t1 - 2_000

    clock.advance(MINUTE_MS)
    t2 = clock.now_ms()
    # A compaction row the tailer wrote late: older than the last look (t1), newer than
    # the epoch known then; found, as it is within EPOCH_LATE_MS of that look.
    store.insert_usages([Usage(ts=t1 - 1_000, session_id=SID, occupancy=0, kind="compaction")])
    store.insert_usages([Usage(ts=t2 - 1_000, session_id=SID, occupancy=5_000)])
    assert det.source.window(SID, t2).epoch_start_ts == t1 - 1_000
    store_event(store, payload(SID, "SessionStart", source="compact"), t2 - 500)
    store.insert_usages([Usage(ts=t2 - 100, session_id=SID, occupancy=5_000)])
    assert det.source.window(SID, t2).epoch_start_ts == t2 - 500
    clock.advance(FULL_RELOAD_MS)  # a full look again: the same answer
    t3 = clock.now_ms()
    store.insert_usages([Usage(ts=t3 - 1_000, session_id=SID, occupancy=5_000)])
    assert det.source.window(SID, t3).epoch_start_ts == t2 - 500


def test_a_session_holds_at_most_the_newest_max_window_events(
    store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-session bound (issue 16): past the cap the window is the newest events of
    the hour, on a full load and on incremental reloads alike."""
    import tma1.live.windows as stored_module

    monkeypatch.setattr(stored_module, "MAX_WINDOW_EVENTS", 5)
    now = clock.now_ms()
    for k in range(8):
        store_event(store, read(SID, f"/p/{k}.py"), now - 10 * MINUTE_MS + k)
    det = make(store, clock, scripted=Scripted())
    want = [e.id for e in store.session_events(SID, now - 60 * MINUTE_MS, now)]
    assert len(want) == 8
    assert [e.id for e in det.detect(SID).window.events] == want[-5:]
    for k in range(3):
        now = clock.advance(1_000)
        store_event(store, bash_fail(SID, "make"), now)
        det.invalidate(SID)
        want = [e.id for e in store.session_events(SID, now - 60 * MINUTE_MS, now)]
        assert [e.id for e in det.detect(SID).window.events] == want[-5:], k
    assert det.counters.get("engine.window.full_loads") == 1  # the reloads were incremental
