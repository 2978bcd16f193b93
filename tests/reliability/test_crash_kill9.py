"""`kill -9` of a real `tma1 serve` under load, then a restart on the same database.

1. Every hook that was answered 200 is in the store (counted by a unique tool_use_id).
2. A finding delivered before the crash (its emit row written) is not delivered again
   after the restart: suppression state is rebuilt from the emit log.
"""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from loadkit import (
    LoadResult,
    ServeProcess,
    fail_build_three_times,
    post_hook,
    run_agents,
    stored_markers,
)
from sqlalchemy import select

from tma1.store import Store
from tma1.store.schema import anomaly_emits

pytestmark = pytest.mark.slow


def post(srv: ServeProcess, payload: dict[str, Any]) -> httpx.Response:
    return post_hook(srv, payload)


def fail_three_times(srv: ServeProcess, session: str) -> None:
    fail_build_three_times(srv, session, "/tmp/tma1-crash")


def stop(srv: ServeProcess, session: str) -> str:
    r = post(
        srv,
        {
            "session_id": session,
            "hook_event_name": "Stop",
            "stop_hook_active": False,
            "cwd": "/tmp/tma1-crash",
        },
    )
    assert r.status_code == 200
    return r.text


def emit_rows(store: Store, session: str) -> int:
    with store.connect() as conn:
        q = select(anomaly_emits.c.id).where(anomaly_emits.c.session_id == session)
        return len(conn.execute(q).all())


def test_kill9_under_load_loses_no_answered_event(db_url: str, tmp_path: Path) -> None:
    srv = ServeProcess.start(tmp_path / "data", database_url=db_url)
    run_id = f"k9{uuid.uuid4().hex[:6]}"
    halt = threading.Event()
    box: dict[str, LoadResult] = {}
    load = threading.Thread(
        target=lambda: box.setdefault(
            "r",
            run_agents(srv.url, srv.token, agents=6, duration_s=60, run_id=run_id, stop_event=halt),
        )
    )
    try:
        load.start()
        time.sleep(3.0)
        srv.kill9()  # mid-flight: some requests are being handled right now
        time.sleep(0.5)  # the agents see refused connections for a moment, as after a crash
    finally:
        halt.set()
        load.join(60)
        srv.kill9()
    res = box["r"]
    stored = stored_markers(db_url, run_id)
    missing = [m for m in res.ok_markers if m not in stored]
    print(
        f"\nKILL9 FIGURES backend={db_url.split(':')[0]} answered_200={len(res.ok_markers)} "
        f"stored={len(stored)} missing={len(missing)} client_errors={res.errors}"
    )
    assert len(res.ok_markers) > 100, "the load never got going"
    assert missing == []
    # Stored-but-unanswered rows are fine (the crash ate the answer), never the reverse.
    assert len(stored) >= len(res.ok_markers)

    # The restart finds a consistent database and serves at once.
    srv2 = ServeProcess.start(tmp_path / "data", database_url=db_url)
    try:
        h = srv2.health()
        assert h["status"] == "ok"
        assert post(srv2, {"session_id": "after", "hook_event_name": "SessionStart"}).is_success
    finally:
        srv2.stop()
    assert stored_markers(db_url, run_id) == stored


def test_findings_delivered_before_kill9_are_not_delivered_again(
    db_url: str, tmp_path: Path
) -> None:
    srv = ServeProcess.start(tmp_path / "data", database_url=db_url)
    store = Store.open(db_url, migrate=False)
    sessions = [f"crash-{uuid.uuid4().hex[:6]}-{i}" for i in range(8)]
    control = f"crash-control-{uuid.uuid4().hex[:6]}"
    windows_ms: list[float] = []
    # Background agents keep the server (and the emit writer's database) busy, so the
    # window is measured under load, not on an idle server.
    halt = threading.Event()
    load = threading.Thread(
        target=run_agents,
        args=(srv.url, srv.token),
        kwargs={"agents": 3, "duration_s": 60, "stop_event": halt},
        daemon=True,
    )
    try:
        load.start()
        fail_three_times(srv, control)  # never told before the crash
        for s in sessions:
            fail_three_times(srv, s)
            body = stop(srv, s)
            answered = time.perf_counter()
            if '"hookEventName": "Stop"' not in body:
                pytest.skip(f"the engine does not block a Stop yet: {body!r}")
            # The emit log is written asynchronously: measure how long a finding is
            # delivered but not yet durable (the window kill -9 can re-open).
            deadline = time.monotonic() + 30
            while emit_rows(store, s) == 0:
                assert time.monotonic() < deadline, "emit row never written"
                time.sleep(0.002)
            windows_ms.append((time.perf_counter() - answered) * 1000)
        halt.set()
        load.join(30)
        srv.kill9()
        srv = ServeProcess.start(tmp_path / "data", database_url=db_url)
        again = {s: stop(srv, s) for s in sessions}
        control_body = stop(srv, control)
    finally:
        halt.set()
        srv.kill9()
        store.close()
    print(
        f"\nEMIT WINDOW backend={db_url.split(':')[0]} n={len(windows_ms)} "
        f"median={statistics.median(windows_ms):.1f}ms max={max(windows_ms):.1f}ms"
    )
    assert again == dict.fromkeys(sessions, ""), again
    # The engine itself works after the restart: an undelivered finding still blocks.
    assert '"hookEventName": "Stop"' in control_body and "tma1: do not stop yet" in control_body
