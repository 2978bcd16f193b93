"""Fields no database index or disk should have to take (issue 31): a `cwd` longer than
PostgreSQL's btree entry, and 10 MB in every field a hook names freely. Each is stored cut
and marked, never dropped, and the events after it flow."""

from __future__ import annotations

import secrets
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import LOOPBACK_TLS, LiveServer
from loadkit import ServeProcess, hook_headers
from sqlalchemy import create_engine, select

from tma1.store.schema import hook_events

pytestmark = pytest.mark.slow

# tma1.events.PATH_CAP and KEY_CAP, written out so that this file also runs (and fails)
# on a tma1 without them.
PATH_CAP = 4096
KEY_CAP = 1024


def _rows(store_url: str, prefix: str) -> dict[str, Any]:
    engine = create_engine(store_url)
    try:
        with engine.connect() as conn:
            c = hook_events.c
            cols = (c.cwd, c.project, c.metadata, c.transcript_path, c.tool_file_path)
            q = select(c.tool_use_id, *cols, c.tool_command).where(c.tool_use_id.like(prefix + "%"))
            return {r[0]: r for r in conn.execute(q)}
    finally:
        engine.dispose()


def _hook(marker: str, cwd: str, **extra: Any) -> dict[str, Any]:
    return {
        "session_id": "s-long",
        "hook_event_name": "PostToolUse",
        "tool_name": "Read",
        "tool_use_id": marker,
        "tool_input": {"file_path": "/etc/hosts"},
        "tool_response": "127.0.0.1 localhost",
        "cwd": cwd,
        **extra,
    }


def test_a_4kb_cwd_is_stored_and_the_next_events_flow(live: LiveServer) -> None:
    """On PostgreSQL the (project, ts) index refused a project over ~2.7 KB; tma1 took that
    for an outage, the breaker never closed, and nothing was stored after it."""
    prefix = f"cwd{uuid.uuid4().hex[:6]}-"
    # Random names: PostgreSQL compresses an index entry first, and a repetitive path fits.
    long_cwd = "/home/dev/" + "/".join(secrets.token_hex(20) for _ in range(95))
    assert 3_900 < len(long_cwd.encode()) < PATH_CAP
    r = live.hook(_hook(prefix + "long", long_cwd))
    assert r.status_code == 200
    for i in range(5):
        assert live.hook(_hook(f"{prefix}next{i}", "/repo")).status_code == 200
    rows = _rows(live.settings.effective_database_url, prefix)
    assert sorted(rows) == sorted([prefix + "long"] + [f"{prefix}next{i}" for i in range(5)])
    long_row = rows[prefix + "long"]
    assert long_row.cwd == long_cwd  # a path within PATH_MAX is kept whole
    assert len(long_row.project.encode()) <= KEY_CAP
    assert long_row.project.startswith(long_cwd[:200])  # cut and marked with a hash
    health = live.client().get("/api/health").json()
    assert health["status"] == "ok"
    assert health["ingest"]["database_available"] is True
    assert health["ingest"]["outages"] == 0
    assert health["ingest"]["rejected_by_db"] == 0
    assert health["ingest"]["fields_cut"] == 1


def test_two_long_projects_sharing_their_head_stay_two(live: LiveServer) -> None:
    prefix = f"two{uuid.uuid4().hex[:6]}-"
    head = "/w/" + "h" * 3000
    assert live.hook(_hook(prefix + "a", head + "/a")).status_code == 200
    assert live.hook(_hook(prefix + "b", head + "/b")).status_code == 200
    rows = _rows(live.settings.effective_database_url, prefix)
    assert rows[prefix + "a"].project != rows[prefix + "b"].project


TEN_MB = 10 * 1024 * 1024


def test_ten_mb_fields_are_stored_cut_and_marked_without_ballooning(tmp_path: Path) -> None:
    """15 hooks with a 10 MB cwd made a 1.25 GB database and RSS 80 -> 1,273 MiB."""
    srv = ServeProcess.start(tmp_path / "data")
    prefix = f"big{uuid.uuid4().hex[:6]}-"
    big = "/" + "d" * TEN_MB
    payloads = []
    for i in range(15):
        field = ("cwd", "transcript_path", "file_path", "command", "tool_use_id")[i % 5]
        p = _hook(f"{prefix}{i:02d}", "/repo")
        if field == "file_path":
            p["tool_input"] = {"file_path": big}
        elif field == "command":
            p.update(tool_name="Bash", tool_input={"command": "echo " + big},
                     tool_response={"stdout": "", "exitCode": 0})  # fmt: skip
        elif field == "tool_use_id":
            p["transcript_path"] = big
            p["cwd"] = big
        else:
            p[field] = big
        payloads.append(p)
    try:
        with httpx.Client(timeout=60, verify=LOOPBACK_TLS) as client:
            client.post(f"{srv.url}/api/hooks", json=_hook(prefix + "warm", "/repo"),
                        headers=hook_headers(srv.token))  # fmt: skip
            rss_before = srv.rss_kb() or 0
            for p in payloads:
                r = client.post(f"{srv.url}/api/hooks", json=p, headers=hook_headers(srv.token))
                assert r.status_code == 200
            ok = client.post(f"{srv.url}/api/hooks", json=_hook(prefix + "after", "/repo"),
                             headers=hook_headers(srv.token))  # fmt: skip
            assert ok.status_code == 200
        url = f"sqlite:///{srv.data_dir / 'tma1.db'}"
        deadline = 120
        import time

        t0 = time.monotonic()
        rows = _rows(url, prefix)
        while len(rows) < 17 and time.monotonic() - t0 < deadline:
            time.sleep(0.2)  # bodies over 1 MiB are stored in the background
            rows = _rows(url, prefix)
        rss_after = srv.rss_kb() or 0
        health = srv.health()
    finally:
        srv.stop()
    assert len(rows) == 17, sorted(rows)
    for i in range(15):
        row = rows[f"{prefix}{i:02d}"]
        for value in (row.cwd, row.project, row.transcript_path, row.tool_file_path,
                      row.tool_command):  # fmt: skip
            assert value is None or len(value.encode()) <= 16 * 1024 + 64
        assert '"truncated": true' in row.metadata, row.metadata
    db_bytes = (srv.data_dir / "tma1.db").stat().st_size + sum(
        p.stat().st_size for p in srv.data_dir.glob("tma1.db-*")
    )
    growth_mib = (rss_after - rss_before) / 1024
    print(f"\nBIG FIELDS db={db_bytes / 2**20:.1f} MiB rss {rss_before / 1024:.0f} -> "
          f"{rss_after / 1024:.0f} MiB (+{growth_mib:.0f})")  # fmt: skip
    assert health["ingest"]["fields_cut"] >= 15
    assert db_bytes < 64 * 2**20  # 15 × 10 MB would be 150 MB at least
    # Decoding a 10 MB body takes a few times its size while it lasts; nothing may stay.
    assert growth_mib < 300
