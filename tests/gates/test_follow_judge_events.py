"""`gates.judge_events` (the follow-rate of a replay that writes no events) judges every
emit exactly as the SQL gate does over the same events stored in a real SQLite file."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gateseed import Session
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tma1 import gates
from tma1.engine.rules import SPECS
from tma1.events import HookEvent, Usage
from tma1.gates import live
from tma1.store import Store

TEST_LOOKBACK_MS = SPECS["test_stuck"].follow.test_lookback_ms or 0

FILES = ["/repo/a.py", "/repo/b.py", "tests/t.py", "/repo/tests/t.py"]
TEST_ID = "tests/t.py::test_a"
COMMANDS = ["pytest -q", "make build", "cat a.py", "git commit -m x", "ls"]
FAILURES = [None, "Exit code 1\nboom", f"Exit code 1\nFAILED {TEST_ID} - assert 1 == 2"]
KINDS = list(gates.KINDS)
# Milliseconds between two events: the same instant, next to each other, and far enough
# apart that failures leave the 30-minute test lookback.
STEPS = [0, 1, 1000, 11 * 60_000]

_op = st.one_of(
    st.tuples(st.just("read"), st.sampled_from(FILES)),
    st.tuples(st.just("edit"), st.sampled_from(FILES)),
    st.tuples(st.just("patch"), st.lists(st.sampled_from(FILES), min_size=1, max_size=2)),
    st.tuples(st.just("bash"), st.sampled_from(COMMANDS), st.sampled_from(FAILURES)),
    st.tuples(st.just("grep")),
    st.tuples(
        st.just("hook"),
        st.sampled_from(["PreCompact", "PostCompact", "SessionEnd", "Stop", "UserPromptSubmit"]),
    ),
    st.tuples(st.just("start"), st.sampled_from(["compact", "startup"])),
    st.tuples(st.just("transcript_compaction")),
    st.tuples(
        st.just("emit"),
        st.sampled_from(KINDS),
        st.sampled_from(["", TEST_ID, "pytest -q", "make build", "/repo/a.py"]),
        st.lists(st.sampled_from(FILES), max_size=2),
    ),
)
_session = st.lists(st.tuples(st.sampled_from(STEPS), _op), max_size=25)


@contextmanager
def _store() -> Iterator[Store]:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.scratch(Path(tmp) / "judge.db")
        try:
            yield store
        finally:
            store.close()


def _play(s: Session, ops: list[tuple[int, tuple[Any, ...]]]) -> list[int]:
    """Plays `ops`; returns the ts of the compactions the transcript tailer would see."""
    compactions: list[int] = []
    for step, op in ops:
        s.step_ms = step
        match op:
            case ("read", f):
                s.read(f)
            case ("edit", f):
                s.edit(f)
            case ("patch", files):
                body = "".join(f"*** Update File: {f}\n" for f in files)
                s.call("apply_patch", command=f"*** Begin Patch\n{body}*** End Patch")
            case ("bash", command, fail):
                s.bash(command, fail=fail)
            case ("grep",):
                s.call("Grep", pattern="x")
            case ("hook", name):
                s.hook(name)
            case ("start", source):
                s.hook("SessionStart", source=source)
            case ("emit", kind, subject, related):
                s.emit(kind, subject, related)
            case ("transcript_compaction",):
                s.ts += step
                compactions.append(s.ts)
    return compactions


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_session, min_size=1, max_size=3), st.sampled_from([1, 2, 5]))
def test_judging_in_memory_gives_the_verdicts_of_the_sql_gate(
    sessions: list[list[tuple[int, tuple[Any, ...]]]], window: int
) -> None:
    held: dict[str, list[HookEvent]] = {}
    compactions: dict[str, list[int]] = {}
    with _store() as store:
        for n, ops in enumerate(sessions):
            # Sessions overlap in time: each starts at the same instant.
            s = Session(store, f"s{n}", ts=1_700_000_000_000)
            compactions[s.session_id] = seen = _play(s, ops)
            store.insert_events(s.events, with_ids=True)
            store.insert_usages(
                [
                    Usage(ts=ts, session_id=s.session_id, occupancy=0, kind="compaction")
                    for ts in seen
                ]
            )
            held[s.session_id] = sorted(s.events, key=lambda e: (e.ts, e.id or 0))
        emits = store.emits_since(0)
        in_sql = sorted(live.judge_stored(store, 0, window), key=lambda j: j[0].id)
    judged = gates.judge_events(emits, held, compactions=compactions, window=window)
    in_memory = sorted(judged, key=lambda j: j[0].id)
    assert [(ref.id, ok) for ref, ok in in_memory] == [(ref.id, ok) for ref, ok in in_sql]
    # The inputs too, not only the verdicts they happen to give.
    assert [ref for ref, _ in in_memory] == [ref for ref, _ in in_sql]


def test_a_hand_worked_session_is_judged_the_same_in_memory() -> None:
    """A concrete case of each outcome, so a bug that breaks both judges alike shows too."""
    with _store() as store:
        s = Session(store, "w", ts=1_700_000_000_000)
        s.read("/repo/a.py").emit("stale_file_view", "/repo/a.py", ["/repo/a.py"])
        s.bash("ls").read("/repo/a.py")  # followed: a Read of the file, 2nd call
        s.emit("repeated_failed_build", "make build").bash("make build", fail="Exit code 2")
        s.emit("context_pressure").bash("ls").hook("PreCompact")  # followed: a compaction
        store.insert_events(s.events, with_ids=True)
        emits = store.emits_since(0)
        held = {"w": s.events}
        verdicts = [(r.kind, ok) for r, ok in gates.judge_events(emits, held)]
        assert verdicts == [
            ("stale_file_view", True),
            ("repeated_failed_build", False),  # a blind re-run
            ("context_pressure", True),
        ]
        assert verdicts == [(r.kind, ok) for r, ok in live.judge_stored(store, 0, 5)]


def test_the_edges_of_the_windows_are_where_the_sql_gate_has_them() -> None:
    """The test lookback takes failures up to the emit's very instant and back to exactly
    30 minutes; markers count only before the (window+1)-th call."""
    fail = f"Exit code 1\nFAILED {TEST_ID} - assert 1 == 2"
    with _store() as store:
        # A failing run of the test at the emit's instant: re-running it blindly is not
        # following (its prefix is known); without that failure the prefix is unknown.
        now = Session(store, "same-instant", ts=1_700_000_000_000)
        now.bash("pytest -q", fail=fail)
        now.step_ms = 0
        now.emit("test_stuck", TEST_ID, [])
        now.step_ms = 1000
        now.bash("pytest -q", fail=fail)
        # The failure 30 minutes and 1 ms before the emit is out of the lookback.
        old = Session(store, "too-old", ts=1_700_000_000_000)
        old.bash("pytest -q", fail=fail)
        old.step_ms = TEST_LOOKBACK_MS + 1
        old.emit("test_stuck", TEST_ID, [])
        old.step_ms = 1000
        old.bash("pytest -q", fail=fail)
        # context_pressure with window 1: the compaction after the 2nd call is outside.
        late = Session(store, "late-compaction", ts=1_700_000_000_000)
        late.emit("context_pressure").bash("ls").bash("ls").hook("PreCompact")
        # … and at the very instant of the 2nd call, outside too (strictly before wend).
        tie = Session(store, "tie-compaction", ts=1_700_000_000_000)
        tie.emit("context_pressure").bash("ls")
        tie.step_ms = 0
        tie.bash("ls").hook("PreCompact")
        held = {}
        for s in (now, old, late, tie):
            store.insert_events(s.events, with_ids=True)
            held[s.session_id] = s.events
        emits = store.emits_since(0)
        expected = [
            ("late-compaction", (), False),
            ("same-instant", ("pytest -q",), False),
            ("tie-compaction", (), False),
            ("too-old", (), False),  # no known command: not followed either
        ]
        for judged in (gates.judge_events(emits, held, window=1), live.judge_stored(store, 0, 1)):
            got = sorted((r.session_id, r.test_commands, ok) for r, ok in judged)
            assert got == expected


def test_a_transcript_compaction_in_the_window_counts_in_memory_as_in_sql() -> None:
    """The transcript tailer's compaction (a `messages` row, no hook) follows a
    context_pressure emit on both paths; one after the window's end follows on neither."""
    with _store() as store:
        inside = Session(store, "inside", ts=1_700_000_000_000)
        inside.emit("context_pressure").bash("ls")
        inside_compaction = inside.ts + 500  # between the 1st and the 2nd call
        inside.bash("ls").bash("ls")
        after = Session(store, "after", ts=1_700_000_000_000)
        after.emit("context_pressure").bash("ls").bash("ls")
        after_compaction = after.ts + 500  # after the 2nd call: outside a window of 1
        compactions = {"inside": [inside_compaction], "after": [after_compaction]}
        held = {}
        for s in (inside, after):
            store.insert_events(s.events, with_ids=True)
            held[s.session_id] = s.events
        store.insert_usages(
            [
                Usage(ts=ts, session_id=sid, occupancy=0, kind="compaction")
                for sid, seen in compactions.items()
                for ts in seen
            ]
        )
        emits = store.emits_since(0)
        in_sql = sorted((r.session_id, ok) for r, ok in live.judge_stored(store, 0, 1))
    in_memory = gates.judge_events(emits, held, compactions=compactions, window=1)
    assert sorted((r.session_id, ok) for r, ok in in_memory) == in_sql
    assert in_sql == [("after", False), ("inside", True)]
