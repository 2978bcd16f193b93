"""A FIFO named as `transcript_path` (issue 31 item 2): an `open` of it blocks until a
writer comes, and 32 such hooks held every ingest worker for good — the engine never
answered again while `/api/health` said "ok". tma1 opens only regular files now."""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

import httpx
import pytest
from conftest import LOOPBACK_TLS
from loadkit import ServeProcess, fail_build_three_times, hook_headers, post_hook

pytestmark = pytest.mark.slow

FIFO_HOOKS = 40  # more than the 32 ingest workers


def test_fifo_transcripts_do_not_stop_the_engine(tmp_path: Path) -> None:
    fifos = [tmp_path / f"transcript-{i}.jsonl" for i in range(FIFO_HOOKS)]
    for fifo in fifos:
        os.mkfifo(fifo)  # one each: the tailer reads one path at a time
    srv = ServeProcess.start(tmp_path / "data")
    run = uuid.uuid4().hex[:6]
    answers: list[int | str] = []

    def fifo_hook(i: int) -> None:
        codex = i % 2 == 1
        payload = {
            "session_id": f"fifo-{run}-{i}",
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_use_id": f"fifo-{run}-{i}",
            "tool_input": {"command": "ls"},
            "tool_response": {"stdout": "a", "stderr": "", "exitCode": 0},
            "cwd": str(tmp_path),
            "transcript_path": str(fifos[i]),
        }
        try:
            r = httpx.post(
                f"{srv.url}/api/hooks" + ("?source=codex" if codex else ""),
                json=payload,
                headers=hook_headers(srv.token),
                timeout=5,
                verify=LOOPBACK_TLS,
            )
            answers.append(r.status_code)
        except httpx.HTTPError as exc:
            answers.append(type(exc).__name__)

    try:
        threads = [threading.Thread(target=fifo_hook, args=(i,)) for i in range(FIFO_HOOKS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        session = f"builds-{run}"
        fail_build_three_times(srv, session, str(tmp_path))
        stop = post_hook(
            srv,
            {
                "session_id": session,
                "hook_event_name": "Stop",
                "stop_hook_active": False,
                "cwd": str(tmp_path),
            },
        )
        health = srv.health()
    finally:
        srv.kill9()
    print(f"\nFIFO answers={answers.count(200)}/{FIFO_HOOKS} stop={stop.text[:80]!r}")
    assert answers == [200] * FIFO_HOOKS  # every FIFO hook answered, none hung
    assert '"hookEventName": "Stop"' in stop.text and "tma1: do not stop yet" in stop.text
    assert health["status"] == "ok"
    assert health["ingest"]["stuck_workers"] == 0
