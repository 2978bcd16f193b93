"""Events answered while the database is down survive `kill -9` of `tma1 serve`.

A real `tma1 serve` on a SQLite file; another connection holds the database's write lock
(the database is "down" for writers), so every hook is answered 200 with an empty body
and queued — and journalled in the data dir. The server is killed with SIGKILL, the lock
released, and a new server started on the same data dir: every answered event is in the
database, once, without any operator action.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from pathlib import Path

import httpx
import pytest
from conftest import LOOPBACK_TLS
from loadkit import ServeProcess, hook_headers

from tma1.ingest.journal import JOURNAL_FILE

pytestmark = pytest.mark.slow

N = 60


def _count(db: Path, marker: str) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return int(
            conn.execute(
                "SELECT count(*) FROM tma1_hook_events WHERE tool_use_id LIKE ?", (marker + "%",)
            ).fetchone()[0]
        )
    finally:
        conn.close()


def test_events_queued_during_an_outage_survive_kill9(tmp_path: Path) -> None:
    data = tmp_path / "data"
    db = data / "tma1.db"
    srv = ServeProcess.start(data)
    marker = f"j{uuid.uuid4().hex[:8]}-"
    lock = sqlite3.connect(db, timeout=10, isolation_level=None)
    try:
        lock.execute("BEGIN EXCLUSIVE")  # the database is gone for every writer
        answered = []
        for i in range(N):
            r = httpx.post(
                f"{srv.url}/api/hooks",
                json={
                    "session_id": "outage",
                    "hook_event_name": "PostToolUse",
                    "tool_name": "Bash",
                    "tool_use_id": f"{marker}{i:03d}",
                    "tool_input": {"command": "ls"},
                    "tool_response": {"stdout": "a\nb", "stderr": "", "interrupted": False},
                    "cwd": "/tmp",
                },
                headers=hook_headers(srv.token),
                timeout=10,
                verify=LOOPBACK_TLS,
            )
            assert (r.status_code, r.content) == (200, b"")  # answered, not stored
            answered.append(i)
        ingest = srv.health()["ingest"]
        assert ingest["database_available"] is False
        journal = data / JOURNAL_FILE
        assert journal.stat().st_mode & 0o777 == 0o600
        lines = [json.loads(x) for x in journal.read_text().splitlines()]
        assert len([x for x in lines if "seq" in x]) == N
        srv.kill9()  # the in-memory queue dies with it
    finally:
        lock.execute("ROLLBACK")
        lock.close()
        srv.kill9()
    assert _count(db, marker) == 0  # nothing reached the database before the crash

    srv2 = ServeProcess.start(data)
    try:
        deadline = time.monotonic() + 60
        while _count(db, marker) < N and time.monotonic() < deadline:
            time.sleep(0.1)
        stored = _count(db, marker)
        health = srv2.health()
    finally:
        srv2.stop()
    lost = N - stored
    print(f"\nJOURNAL KILL9 answered={len(answered)} stored={stored} lost={lost}")
    assert lost == 0 and stored == N  # all of them, and none twice
    assert health["ingest"]["recovered_from_journal"] == N
    # Everything is written: the journal is empty again.
    assert (data / JOURNAL_FILE).read_text() == ""
