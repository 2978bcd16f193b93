"""Replay with its database kept (`--db`) and without one: the same deliveries, emits and
summary; a kept database holds every event whole; a replay without one never connects to
a database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import require_sessions
from replaykit import FIX, Transcript

from tma1.replay import driver
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


def test_the_corpus_replays_the_same_with_its_database_kept(tmp_path: Path) -> None:
    corpus = require_sessions()
    inputs, _ = driver.load([corpus])
    items, _ = driver.merge_items(inputs)
    kept = _comparable(driver.replay_items(items, db=tmp_path / "kept.db"))
    assert kept[0] and kept[2]["follow_rate"]["kinds"]
    assert _comparable(driver.replay_items(items)) == kept


def test_a_kept_database_holds_every_event_whole(tmp_path: Path) -> None:
    from tma1.store import Store

    inputs, _ = driver.load([*_sessions(tmp_path), _changes(tmp_path)])
    items, _ = driver.merge_items(inputs)
    db = tmp_path / "kept.db"
    assert _comparable(driver.replay_items(items, db=db)) == _comparable(driver.replay_items(items))
    store = Store.open(f"sqlite:///{db}", migrate=False)
    try:
        sessions = {i.session_id for i in items if i.kind == HOOK}
        stored = [e for s in sorted(sessions) for e in store.session_events(s, 0)]
        changes = store.project_changes("/work/a", 0)
    finally:
        store.close()
    assert len(stored) == sum(1 for i in items if i.kind == HOOK)
    assert len(changes) == sum(1 for i in items if i.kind == FILE_CHANGE)
    pres = [e for e in stored if e.event_type == "PreToolUse"]
    oks = [e for e in stored if e.event_type == "PostToolUse" and e.tool_success]
    assert pres and all(e.tool_input for e in pres)
    assert oks and all(e.tool_result for e in oks)


def test_a_replay_without_a_database_never_connects_to_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held in memory, a replay gives what a replay into a kept database gives, and its
    scratch store is never opened: any connection to it fails this test."""
    from sqlalchemy import create_engine

    from tma1.store import Store

    inputs, _ = driver.load([*_sessions(tmp_path), FIX / "eventlog.jsonl", _changes(tmp_path)])
    items, _ = driver.merge_items(inputs)
    kept = driver.replay_items(items, db=tmp_path / "kept.db")
    connects: list[str] = []

    def refuse() -> Any:
        connects.append("connect")
        raise AssertionError("the scratch database was connected to")

    def unreachable(path: Any, *, machine_id: str | None = None) -> Store:
        return Store(create_engine("sqlite://", creator=refuse), machine_id=machine_id)

    monkeypatch.setattr(Store, "scratch", staticmethod(unreachable))
    held = driver.replay_items(items)
    assert connects == []
    assert not any(k.startswith("errors.") for k in held[3]), held[3]
    assert _comparable(held) == _comparable(kept)
    assert [e["id"] for e in held[1]] == list(range(1, len(held[1]) + 1))
