"""The follow-rate verdict cache gives the same figures as a full recomputation while data
arrives and after a purge, on a real SQLite and a real PostgreSQL."""

from __future__ import annotations

from gateseed import Session

from tma1.gates import DAY_MS, live
from tma1.store import Store, retention

NOW = 1_700_000_000_000
F = "/repo/a.py"


def _both(store: Store) -> tuple[dict[str, object], dict[str, object]]:
    cached = live.follow_rate(store, now_ms=NOW)
    fresh = live.follow_rate(store, now_ms=NOW, use_cache=False)
    return cached["kinds"], fresh["kinds"]


def _stale(result: dict[str, object]) -> tuple[int, int]:
    k = result["stale_file_view"]
    assert isinstance(k, dict)
    return k["emits"], k["followed"]


def test_cache_matches_recomputation_as_data_arrives(store: Store) -> None:
    hour = 3_600_000
    # A: closed window (6 calls after the emit), followed by its 2nd call.
    a = Session(store, "A", ts=NOW - 5 * hour).emit("stale_file_view", F, [F])
    a.bash("ls").read(F).bash("x").bash("y").bash("z").bash("w").flush()
    # B: open window, not followed so far.
    b = Session(store, "B", ts=NOW - 4 * hour).emit("stale_file_view", F, [F])
    b.bash("ls").read("/repo/other.py").flush()
    cached, fresh = _both(store)
    assert cached == fresh
    assert _stale(cached) == (2, 1)
    assert live._follow_cache(store, 7, 5).floor == 1  # A settled, B still open

    # B reads the file as its 3rd call: only the open window is recomputed, and it counts.
    b.read(F).flush()
    cached, fresh = _both(store)
    assert cached == fresh
    assert _stale(cached) == (2, 2)

    # A new emit in A's session, followed by nothing yet.
    a.emit("stale_file_view", "/repo/b.py", ["/repo/b.py"]).flush()
    cached, fresh = _both(store)
    assert cached == fresh
    assert _stale(cached) == (3, 2)


def test_cache_resets_when_rows_under_the_floor_disappear(store: Store) -> None:
    old = Session(store, "old", ts=NOW - 3 * DAY_MS).emit("stale_file_view", F, [F])
    old.read(F)
    for i in range(6):
        old.bash(f"cmd {i}")
    old.flush()
    new = Session(store, "new", ts=NOW - 2 * DAY_MS).emit("stale_file_view", F, [F]).flush()
    assert new.session_id == "new"
    cached, fresh = _both(store)
    assert cached == fresh and _stale(cached) == (2, 1)
    assert live._follow_cache(store, 7, 5).floor == 2  # both settled (older than a day)
    # The purge takes the old emit away; the cache notices and recomputes.
    retention.purge_before(store, NOW - 2 * DAY_MS - 1)
    cached, fresh = _both(store)
    assert cached == fresh and _stale(cached) == (1, 0)


def test_settled_emit_keeps_its_verdict_and_days_out_of_range_drop(store: Store) -> None:
    s = Session(store, "quiet", ts=NOW - 2 * DAY_MS).emit("stale_file_view", F, [F]).flush()
    assert _stale(live.follow_rate(store, now_ms=NOW)["kinds"]) == (1, 0)
    # The session resumes two days later and reads the file: a settled verdict stays.
    s.ts = NOW - 60_000
    s.read(F).flush()
    assert _stale(live.follow_rate(store, now_ms=NOW)["kinds"]) == (1, 0)
    assert _stale(live.follow_rate(store, now_ms=NOW, use_cache=False)["kinds"]) == (1, 1)
    # Eight days on, the emit is out of the 7-day range on both paths.
    later = NOW + 8 * DAY_MS
    assert live.follow_rate(store, now_ms=later)["kinds"]["stale_file_view"]["emits"] == 0
    assert live._follow_cache(store, 7, 5).verdicts == {}


def test_caches_per_store_are_bounded(store: Store) -> None:
    Session(store, "s", ts=NOW - 60_000).emit("stale_file_view", F, [F]).read(F).flush()
    for window in range(1, 13):
        assert live.follow_rate(store, now_ms=NOW, window=window)["overall"]["followed"] == 1
    kept = live._FOLLOW_CACHES[store]
    assert len(kept) == live._MAX_CACHES_PER_STORE
    assert (7, 12) in kept and (7, 1) not in kept  # the least recently used went first
