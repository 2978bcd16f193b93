"""What the detector and its store-backed window source remember of a session is bounded
by the working set (issue 31): a session idle past the longest window (a project's file
changes: 90 minutes) leaves nothing in their per-session maps, and one that ended
(`Detector.forget`, on SessionEnd) leaves nothing at once. Before, a session's start,
context epoch and project were kept 24 hours, so they grew with history."""

from __future__ import annotations

from enginekit import bash_fail, payload, store_event

from tma1.clock import ManualClock
from tma1.counters import Counters
from tma1.engine.detector import Detector
from tma1.engine.window import CHANGES_WINDOW_MS, RuleConfig
from tma1.events import Usage
from tma1.live.windows import StoreWindows
from tma1.store import Store


def make(store: Store, clock: ManualClock) -> tuple[Detector, StoreWindows]:
    config, counters = RuleConfig(context_pressure_threshold=1234), Counters()
    source = StoreWindows(store, config=config, counters=counters)
    det = Detector(source=source, clock=clock, config=config, counters=counters)
    return det, source


def remembered(det: Detector, source: StoreWindows, sid: str) -> list[str]:
    maps = {
        "detector.cache": det._cache,
        "detector.dropped": det._dropped,
        "detector.session_project": det._session_project,
        "windows.held": source._held,
        "windows.first_ts": source._first_ts,
        "windows.epochs": source._epochs,
    }
    return sorted(name for name, m in maps.items() if sid in m)


def seen(store: Store, clock: ManualClock, sid: str) -> None:
    """An event of `sid` now, with its context past the threshold (so its epoch is read)."""
    now = clock.now_ms()
    store_event(store, payload(sid, "SessionStart"), now - 2)
    store_event(store, bash_fail(sid, "make"), now - 1)
    store.insert_usages([Usage(ts=now - 1, session_id=sid, occupancy=99_000)])


def test_a_session_idle_past_the_longest_window_leaves_nothing(
    store: Store, clock: ManualClock
) -> None:
    det, source = make(store, clock)
    seen(store, clock, "idle")
    det.detect("idle")
    det.invalidate("idle")
    det.detect("idle")
    everything = [
        "detector.cache", "detector.dropped", "detector.session_project",
        "windows.epochs", "windows.first_ts", "windows.held",
    ]  # fmt: skip
    assert remembered(det, source, "idle") == everything

    clock.advance(CHANGES_WINDOW_MS - 60_000)
    seen(store, clock, "busy")
    det.detect("busy")  # a sweep, before the window has passed: the start stays
    assert "windows.first_ts" in remembered(det, source, "idle")

    clock.advance(60_000)
    seen(store, clock, "busy")
    det.detect("busy")  # the next sweep, past the longest window
    assert remembered(det, source, "idle") == []
    assert remembered(det, source, "busy") == [
        "detector.cache", "detector.session_project",
        "windows.epochs", "windows.first_ts", "windows.held",
    ]  # fmt: skip


def test_a_forgotten_session_is_read_afresh_with_the_same_findings(
    store: Store, clock: ManualClock
) -> None:
    det, source = make(store, clock)
    seen(store, clock, "ended")
    for _ in range(2):
        store_event(store, bash_fail("ended", "make"), clock.now_ms())
    before = det.detect("ended")
    det.forget("ended")
    assert remembered(det, source, "ended") == ["detector.dropped"]  # a mark, for 5 min
    after = det.detect("ended")
    assert not after.cached
    assert after.candidates == before.candidates and after.candidates
    assert [e.id for e in after.window.events] == [e.id for e in before.window.events]
