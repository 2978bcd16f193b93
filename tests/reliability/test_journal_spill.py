"""Nothing answered is lost (issue 28.11): a database outage longer than the in-memory
queue spills to the journal, a hook body over 1 MiB is on disk before it is answered, and
with the data dir's disk full every event dropped is counted and shown.

A real `tma1 serve` on SQLite; another connection holds the write lock (the database is
"down" for writers), as in test_journal_kill9.py."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import LOOPBACK_TLS, tma1_cmd
from loadkit import ServeProcess, hook_headers

from tma1.ingest.journal import JOURNAL_FILE

pytestmark = pytest.mark.slow


def _count(db: Path, marker: str) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return int(
            conn.execute(
                "SELECT count(DISTINCT tool_use_id) FROM tma1_hook_events WHERE tool_use_id LIKE ?",
                (marker + "%",),
            ).fetchone()[0]
        )
    finally:
        conn.close()


def _stored(db: Path, marker: str) -> set[str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        rows = conn.execute(
            "SELECT tool_use_id FROM tma1_hook_events WHERE tool_use_id LIKE ?", (marker + "%",)
        )
        return {r[0] for r in rows}
    finally:
        conn.close()


@contextlib.contextmanager
def _write_locked(db: Path) -> Iterator[None]:
    lock = sqlite3.connect(db, timeout=10, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        lock.execute("ROLLBACK")
        lock.close()


def _payload(marker: str, output: str = "a\nb") -> dict[str, Any]:
    return {
        "session_id": "outage",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_use_id": marker,
        "tool_input": {"command": "ls"},
        "tool_response": {"stdout": output, "stderr": "", "interrupted": False},
        "cwd": "/tmp",
    }


def _post(client: httpx.Client, srv: ServeProcess, payload: dict[str, Any]) -> int:
    r = client.post(f"{srv.url}/api/hooks", json=payload, headers=hook_headers(srv.token))
    return r.status_code


def _wait_stored(db: Path, marker: str, n: int, timeout: float = 120) -> int:
    deadline = time.monotonic() + timeout
    while (stored := _count(db, marker)) < n and time.monotonic() < deadline:
        time.sleep(0.2)
    return stored


def test_an_outage_longer_than_the_queue_spills_to_the_journal(tmp_path: Path) -> None:
    """Past TMA1_INGEST_QUEUE_MAX the events were dropped although the disk could hold
    them; now the journal holds them and they are written when the database returns."""
    data = tmp_path / "data"
    db = data / "tma1.db"
    queue_max, n = 20, 300
    srv = ServeProcess.start(data, env={"TMA1_INGEST_QUEUE_MAX": str(queue_max)})
    marker = f"sp{uuid.uuid4().hex[:6]}-"
    try:
        with _write_locked(db), httpx.Client(timeout=30, verify=LOOPBACK_TLS) as client:
            answered = [i for i in range(n) if _post(client, srv, _payload(f"{marker}{i:04d}"))]
            during = srv.health()["ingest"]
        stored = _wait_stored(db, marker, n)
        health = srv.health()["ingest"]
        journal = (data / JOURNAL_FILE).stat().st_size
    finally:
        srv.stop()
    print(
        f"\nSPILL answered={len(answered)} stored={stored} spilled={during.get('spilled')} "
        f"dropped={health['dropped_queue_full']} journal_after={journal}"
    )
    assert len(answered) == n
    assert during["database_available"] is False
    assert stored == n  # every answered event, once
    assert health["dropped_queue_full"] == 0 and health["dropped_disk_full"] == 0
    assert during["spilled"] >= n - queue_max - 5  # past the queue, on disk
    assert during["queue_depth"] <= queue_max
    assert journal == 0  # written back: emptied


def _big(marker: str) -> dict[str, Any]:
    # 2 MiB of output: over LARGE_BODY_BYTES, answered before it is parsed.
    return _payload(marker, output="x" * (2 * 1024 * 1024))


def test_big_bodies_answered_survive_kill9(tmp_path: Path) -> None:
    """A body over 1 MiB was answered before it was durable: kill -9 lost 1–3 of ~400."""
    data = tmp_path / "data"
    db = data / "tma1.db"
    srv = ServeProcess.start(data)
    marker = f"bb{uuid.uuid4().hex[:6]}-"
    answered: list[str] = []
    lock = threading.Lock()
    halt = threading.Event()

    def agent(k: int) -> None:
        with httpx.Client(timeout=30, verify=LOOPBACK_TLS) as client:
            i = 0
            while not halt.is_set():
                m = f"{marker}{k}-{i:04d}"
                i += 1
                try:
                    if _post(client, srv, _big(m)) == 200:
                        with lock:
                            answered.append(m)
                except httpx.HTTPError:
                    return  # the server was killed mid-request: not answered

    threads = [threading.Thread(target=agent, args=(k,)) for k in range(4)]
    try:
        for t in threads:
            t.start()
        time.sleep(3)
        # The database stalls just before the crash: answered bodies now wait out the
        # insert budget (400 ms) before anything else keeps them — the widest window.
        with _write_locked(db):
            time.sleep(0.25)
            srv.kill9()
    finally:
        halt.set()
        for t in threads:
            t.join(30)
        srv.kill9()
    before = _count(db, marker)
    srv2 = ServeProcess.start(data)
    try:
        _wait_stored(db, marker, len(answered), timeout=60)
        stored = _stored(db, marker)
        health = srv2.health()["ingest"]
    finally:
        srv2.stop()
    missing = set(answered) - stored
    print(
        f"\nBIG KILL9 answered={len(answered)} stored_before_restart={before} "
        f"stored={len(stored)} from_spool={health.get('recovered_from_spool')} "
        f"missing={len(missing)}"
    )
    assert len(answered) >= 20
    assert not missing, sorted(missing)[:5]


@contextlib.contextmanager
def _tiny_disk(path: Path, size: str = "2m") -> Iterator[Path]:
    path.mkdir(parents=True)
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
        capture_output=True,
        timeout=30,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode(errors='replace').strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


def test_a_full_data_dir_counts_and_shows_every_event_dropped(tmp_path: Path) -> None:
    """The data dir on a 2 MB tmpfs, the database elsewhere (locked): the journal fills
    the disk. Answered = stored + counted drops, and health and `tma1 doctor` say so."""
    db_dir = tmp_path / "db"
    db_dir.mkdir()
    db = db_dir / "tma1.db"
    url = f"sqlite:///{db}"
    marker = f"df{uuid.uuid4().hex[:6]}-"
    n = 200
    with _tiny_disk(tmp_path / "tiny") as data:
        srv = ServeProcess.start(
            data,
            database_url=url,
            env={"TMA1_INGEST_QUEUE_MAX": "20"},
            log_dir=tmp_path,
        )
        try:
            output = "y" * 12_000  # ~12 KB a journal line: 2 MB holds ~150 of them
            with _write_locked(db), httpx.Client(timeout=30, verify=LOOPBACK_TLS) as client:
                answered = [
                    i for i in range(n) if _post(client, srv, _payload(f"{marker}{i:04d}", output))
                ]
                during = srv.health()
            dropped_then = during["ingest"].get("dropped_disk_full", 0)
            stored = _wait_stored(db, marker, n - dropped_then, timeout=60)
            after = srv.health()
            # The journal was written back and emptied: the disk takes writes again, and
            # the next queued event says what the full disk cost.
            with _write_locked(db), httpx.Client(timeout=30, verify=LOOPBACK_TLS) as client:
                assert _post(client, srv, _payload(f"{marker}late")) == 200
            said = srv.log_tail(200)
            doctor = subprocess.run(
                tma1_cmd("doctor"),
                env={
                    "PATH": "/usr/bin:/bin",
                    "HOME": str(tmp_path),
                    "TMA1_DATA_DIR": str(data),
                    "TMA1_PORT": str(srv.port),
                    "TMA1_DATABASE_URL": url,
                },
                capture_output=True,
                text=True,
                timeout=60,
            )
        finally:
            srv.stop()
    ingest = after["ingest"]
    dropped = ingest.get("dropped_disk_full", 0)
    print(
        f"\nDISK FULL answered={len(answered)} stored={stored} dropped_disk_full={dropped} "
        f"spilled={ingest.get('spilled')} not_durable={ingest.get('not_durable')}"
    )
    assert len(answered) == n
    assert dropped > 0  # the disk did fill
    assert stored + dropped == n  # every answered event is stored or counted
    lost_writes = dropped + ingest["not_durable"]
    assert f"writable again: {lost_writes} hook events could not be written" in said
    assert said.count("cannot write the outage journal") == 1  # not once a hook
    doctor_line = [ln for ln in doctor.stdout.splitlines() if "ingest" in ln]
    assert doctor_line and str(dropped) in doctor_line[0], doctor.stdout
