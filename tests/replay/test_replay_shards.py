"""Replay on several processes (`tma1.replay.shards`): the same deliveries, emits and
summary as one process, sessions of a project kept together, a failing child reported."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import require_sessions, tma1_cmd
from test_replay_driver import FIX, Transcript

from tma1.replay import driver, shards
from tma1.replay.model import FILE_CHANGE, HOOK


def _sessions(tmp_path: Path) -> list[Path]:
    """Four sessions in three projects; two of them share /work/a and fail the same way."""
    paths = []
    for n, (sid, cwd) in enumerate(
        [("a-1", "/work/a"), ("a-2", "/work/a"), ("b-1", "/work/b"), ("c-1", "/work/c")]
    ):
        t = Transcript(sid=sid, cwd=cwd)
        t.prompt(n, "make it build")
        t.bash(4 + n, "ls", "main.go", error=False)
        for k in range(3):
            t.bash(10 + n + 40 * k, "go build ./...", "Exit code 1\n./main.go:7:2: x", error=True)
        t.say(200 + n, "I could not fix it.", occupancy=150_000)
        t.prompt(260 + n, "try again")
        paths.append(t.write(tmp_path / f"{sid}.jsonl"))
    return paths


def _changes(tmp_path: Path) -> Path:
    """Someone edits /work/a while a-1 and a-2 work there."""
    path = tmp_path / "changes.jsonl"
    path.write_text(
        "".join(
            json.dumps({"type": "file_change", "ts": f"2025-02-03T10:0{m}:30Z",
                        "project": "/work/a", "path": "/work/a/main.go",
                        "change": "modified"}) + "\n"
            for m in range(4)
        )
    )  # fmt: skip
    return path


def _comparable(result: tuple[Any, ...]) -> tuple[Any, ...]:
    deliveries, emits, summary, _counters = result
    return (
        [(d.ts, d.session_id, d.hook_event, d.channel, d.body, d.findings) for d in deliveries],
        [{k: v for k, v in e.items() if k != "id"} for e in emits],
        summary,
    )


@pytest.fixture
def every_shard_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shard even tiny replays (a shard normally needs 1,000 hook events to pay off)."""
    monkeypatch.setattr(shards, "MIN_EVENTS_PER_SHARD", 1)


def test_plan_keeps_a_project_with_file_changes_together_and_each_shard_in_time_order(
    tmp_path: Path, every_shard_counts: None
) -> None:
    inputs, _ = driver.load([*_sessions(tmp_path), FIX / "eventlog.jsonl", _changes(tmp_path)])
    items, _ = driver.merge_items(inputs)
    plan = shards.plan(items, 4)
    # a-1 + a-2 (they see /work/a's change), b-1, c-1, e1 (with /work/eproj's changes):
    # four groups for four shards.
    assert len(plan) == 4
    positions = sorted(pos for shard in plan for pos, _ in shard)
    assert positions == list(range(len(items)))
    where: dict[str, int] = {}
    for i, shard in enumerate(plan):
        assert [pos for pos, _ in shard] == sorted(pos for pos, _ in shard)
        for _, item in shard:
            if item.kind == HOOK:
                assert where.setdefault(item.session_id, i) == i
    assert where["a-1"] == where["a-2"]
    assert len({where["a-1"], where["b-1"], where["c-1"], where["e1"]}) == 4
    for i, shard in enumerate(plan):
        for _, item in shard:
            if item.kind == FILE_CHANGE:
                assert item.change is not None
                owner = {"/work/a": where["a-1"], "/work/eproj": where["e1"]}
                assert owner[item.change.project] == i


def test_sessions_of_one_project_stay_together_even_without_file_changes(
    tmp_path: Path, every_shard_counts: None
) -> None:
    """The session bundle at SessionStart reads the project's other sessions (their open
    checks, whether they are active): a project's sessions share a shard."""
    inputs, _ = driver.load(_sessions(tmp_path))
    items, _ = driver.merge_items(inputs)
    plan = shards.plan(items, 4)
    assert len(plan) == 3  # a-1 and a-2 share /work/a, which nothing outside changed
    together = [{i.session_id for _, i in shard} for shard in plan]
    assert any({"a-1", "a-2"} <= s for s in together), together


def test_a_sharded_replay_gives_what_one_process_gives(
    tmp_path: Path, every_shard_counts: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs, _ = driver.load([*_sessions(tmp_path), FIX / "eventlog.jsonl", _changes(tmp_path)])
    items, _ = driver.merge_items(inputs)
    serial = driver.replay_items(items, jobs=1)
    ran: list[int] = []
    real_run = shards.run

    def counted(plan: shards.Plan, **kw: Any) -> Any:
        ran.append(len(plan))
        return real_run(plan, **kw)

    monkeypatch.setattr(shards, "run", counted)
    sharded = driver.replay_items(items, jobs=3)
    # Four groups (a-1 with a-2, b-1, c-1, e1) packed for three processes.
    assert ran == [min(4, 3 * shards.SHARDS_PER_WORKER)]
    assert _comparable(sharded) == _comparable(serial)
    assert len(serial[0]) >= 4  # every session's Stop was blocked: there is something to compare
    assert serial[3]["events.stored"] == sharded[3]["events.stored"]


def test_a_sharded_replay_keeps_its_database_when_asked(
    tmp_path: Path, every_shard_counts: None
) -> None:
    inputs, _ = driver.load(_sessions(tmp_path))
    items, _ = driver.merge_items(inputs)
    db = tmp_path / "kept.db"
    _deliveries, emits, _summary, counters = driver.replay_items(items, jobs=2, db=db)
    from tma1.store import Store

    store = Store.open(f"sqlite:///{db}", migrate=False)
    try:
        assert store.counts()["tma1_hook_events"] == counters["events.stored"]
        assert len(store.emits_since(0)) == len(emits) > 0
    finally:
        store.close()


def test_a_failing_shard_is_reported(
    tmp_path: Path, every_shard_counts: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs, _ = driver.load(_sessions(tmp_path))
    items, _ = driver.merge_items(inputs)

    def broken(self: driver.Replayer, items: Any) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(driver.Replayer, "feed", broken)  # the forked children inherit it
    with pytest.raises(RuntimeError, match="disk on fire"):
        driver.replay_items(items, jobs=2)


def test_cli_jobs_option(tmp_path: Path) -> None:
    paths = [str(p) for p in _sessions(tmp_path)]
    bad = subprocess.run(
        [*tma1_cmd(), "replay", "--jobs", "0", *paths], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "--jobs" in bad.stderr
    one = subprocess.run(
        [*tma1_cmd(), "replay", "--json", "--jobs", "1", *paths], capture_output=True, text=True
    )
    two = subprocess.run(
        [*tma1_cmd(), "replay", "--json", "--jobs", "2", *paths], capture_output=True, text=True
    )
    assert one.returncode == two.returncode == 0
    first, second = json.loads(one.stdout), json.loads(two.stdout)
    for doc in (first, second):
        doc.pop("elapsed_s", None)
    assert first == second and first["deliveries"]


def test_the_corpus_replays_the_same_on_two_processes_and_with_its_database_kept(
    tmp_path: Path,
) -> None:
    corpus = require_sessions()
    inputs, _ = driver.load([corpus])
    items, _ = driver.merge_items(inputs)
    assert len(shards.plan(items, 2)) == 2 * shards.SHARDS_PER_WORKER
    # Kept: every event with its texts, one process. Not kept: lean events, and only the
    # sessions that were told something written for the summary.
    kept = _comparable(driver.replay_items(items, jobs=1, db=tmp_path / "kept.db"))
    assert kept[0] and kept[2]["follow_rate"]["kinds"]
    assert _comparable(driver.replay_items(items, jobs=1)) == kept
    assert _comparable(driver.replay_items(items, jobs=2)) == kept


@pytest.mark.parametrize("jobs", [1, 2])
def test_texts_are_left_out_only_where_nobody_keeps_the_database(
    tmp_path: Path, every_shard_counts: None, jobs: int
) -> None:
    """Without --db, events are stored without their tool input and successful output:
    the result is the same as with every text kept, and a kept database has them all."""
    from tma1.store import Store

    inputs, _ = driver.load(_sessions(tmp_path))
    items, _ = driver.merge_items(inputs)
    db = tmp_path / f"kept-{jobs}.db"
    assert _comparable(driver.replay_items(items, jobs=jobs, db=db)) == _comparable(
        driver.replay_items(items, jobs=jobs)
    )
    store = Store.open(f"sqlite:///{db}", migrate=False)
    try:
        sessions = {i.session_id for i in items if i.kind == HOOK}
        stored = [e for s in sorted(sessions) for e in store.session_events(s, 0)]
    finally:
        store.close()
    pres = [e for e in stored if e.event_type == "PreToolUse"]
    oks = [e for e in stored if e.event_type == "PostToolUse" and e.tool_success]
    assert pres and all(e.tool_input for e in pres)
    assert oks and all(e.tool_result for e in oks)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_replay_without_a_database_never_connects_to_one(
    tmp_path: Path, every_shard_counts: None, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    """Held in memory, a replay gives what a replay into a kept database gives, and its
    scratch store is never opened: any connection to it fails this test."""
    from sqlalchemy import create_engine

    from tma1.store import Store

    inputs, _ = driver.load([*_sessions(tmp_path), FIX / "eventlog.jsonl", _changes(tmp_path)])
    items, _ = driver.merge_items(inputs)
    kept = driver.replay_items(items, jobs=jobs, db=tmp_path / f"kept-{jobs}.db")
    connects: list[str] = []

    def refuse() -> Any:
        connects.append("connect")
        raise AssertionError("the scratch database was connected to")

    def unreachable(path: Any) -> Store:
        return Store(create_engine("sqlite://", creator=refuse))

    monkeypatch.setattr(Store, "scratch", staticmethod(unreachable))
    held = driver.replay_items(items, jobs=jobs)
    assert connects == []
    assert not any(k.startswith("errors.") for k in held[3]), held[3]
    assert _comparable(held) == _comparable(kept)
    assert [e["id"] for e in held[1]] == list(range(1, len(held[1]) + 1))
