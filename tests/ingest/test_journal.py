"""The outage journal on a real file: private at start, compacted to what is pending,
spilled events read back in order, and a write the disk refused cut off the file."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from ingestkit import make_ran

import tma1.ingest.journal
from tma1.ingest.journal import Journal


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_an_older_installs_journal_is_made_private_at_start(tmp_path: Path) -> None:
    path = tmp_path / "ingest-journal.jsonl"
    old = Journal(path)
    old.append(make_ran("m0"))
    old.close()
    os.chmod(path, 0o666)
    events = Journal(path).recover()
    assert [e.tool_use_id for e in events] == ["m0"]
    assert path.stat().st_mode & 0o777 == 0o600
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    os.chmod(empty, 0o666)
    assert Journal(empty).recover() == []
    assert empty.stat().st_mode & 0o777 == 0o600


def test_recover_compacts_to_the_pending_events_and_done_empties_it(tmp_path: Path) -> None:
    path = tmp_path / "ingest-journal.jsonl"
    j = Journal(path)
    events = [make_ran(f"m{i}") for i in range(3_000)]
    for e in events:
        j.append(e)
    j.done(events[:1_000])
    j.done(events[1_000:2_998])  # two left pending: a crash before they were written
    j.close()
    big = path.stat().st_size
    again = Journal(path)
    recovered = again.recover()
    assert [e.tool_use_id for e in recovered] == ["m2998", "m2999"]
    assert len(_lines(path)) == 2 and path.stat().st_size < big // 100
    again.done(recovered)
    assert path.stat().st_size == 0
    again.close()


def test_spilled_events_are_read_back_in_order(tmp_path: Path) -> None:
    path = tmp_path / "ingest-journal.jsonl"
    j = Journal(path)
    first = make_ran("mem")
    assert j.append(first)
    for i in range(25):
        assert j.spill(make_ran(f"s{i:02d}"))
    assert (j.pending(), j.spilled()) == (1, 25)
    j.done([first])
    assert path.stat().st_size > 0  # spilled events are still only here
    back: list[str] = []
    while j.spilled():
        batch = j.unspill(10)
        back += [e.tool_use_id or "" for e in batch]
        j.done(batch)
    assert back == [f"s{i:02d}" for i in range(25)]
    assert path.stat().st_size == 0
    j.close()


def test_recover_keeps_the_queues_share_in_memory_and_spills_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "ingest-journal.jsonl"
    j = Journal(path)
    # Events are known by their objects while pending: they must stay alive (the outage
    # queue holds them).
    alive = [make_ran(f"r{i:02d}") for i in range(30)]
    for e in alive:
        j.append(e)
    j.close()
    again = Journal(path)
    first = again.recover(keep_in_memory=10)
    assert [e.tool_use_id for e in first] == [f"r{i:02d}" for i in range(10)]
    assert again.spilled() == 20
    rest = again.unspill(100)
    assert [e.tool_use_id for e in rest] == [f"r{i:02d}" for i in range(10, 30)]
    again.done(first + rest)
    assert path.stat().st_size == 0
    again.close()


def test_a_write_the_full_disk_cut_short_is_cut_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC after a partial write: the half line must not swallow the next one."""
    path = tmp_path / "ingest-journal.jsonl"
    j = Journal(path)
    alive = [make_ran(m) for m in ("before", "lost", "lost-too", "after")]
    assert j.append(alive[0])
    real_write = os.write
    calls = {"n": 0}

    def full_disk(fd: int, data: bytes) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            return real_write(fd, bytes(data)[:40])  # the disk took part of it
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tma1.ingest.journal.os, "write", full_disk)
    assert j.append(alive[1]) is False
    assert j.spill(alive[2]) is False
    monkeypatch.setattr(tma1.ingest.journal.os, "write", real_write)
    assert j.append(alive[3])
    j.close()
    recovered = Journal(path).recover()
    assert [e.tool_use_id for e in recovered] == ["before", "after"]
