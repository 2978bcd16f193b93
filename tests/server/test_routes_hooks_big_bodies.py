"""Big hook bodies through the real hook script and a real `tma1 serve`: an event of any
size up to the hard limit (64 MiB, docs/hooks.md) is stored with its big fields cut and
marked `truncated` with its `original_bytes`; a larger one is refused, counted, and the
agent still hears nothing and exits 0."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from conftest import free_port
from trustkit import clean_env, run, serving

from tma1.adapters.hookscript import script_name
from tma1.live.service import MAX_BODY_BYTES


def _payload(sid: str, size: int) -> bytes:
    head = {
        "session_id": sid,
        "hook_event_name": "PostToolUse",
        "cwd": "/tmp",
        "tool_name": "Bash",
        "tool_input": {"command": "cat build.log"},
        "tool_response": {"stdout": "", "stderr": "", "interrupted": False},
    }
    base = len(json.dumps(head).encode())
    head["tool_response"]["stdout"] = "log line\n" * ((size - base) // 9 + 1)  # type: ignore[index]
    return json.dumps(head).encode()


def _rows(db: Path, sid: str) -> list[tuple[str | None, str | None]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(
            "SELECT tool_result, metadata FROM tma1_hook_events WHERE session_id = ?", (sid,)
        ).fetchall()
    finally:
        conn.close()


def _fire(script: Path, env: dict[str, str], body: bytes) -> subprocess.CompletedProcess[bytes]:
    # The agents' own hook timeout is 5 s; the script must be done well within it.
    return subprocess.run(["sh", str(script)], input=body, env=env, capture_output=True, timeout=30)


def _wait_rows(db: Path, sid: str, n: int) -> list[tuple[str | None, str | None]]:
    deadline = time.monotonic() + 30
    while True:
        rows = _rows(db, sid)
        if len(rows) >= n or time.monotonic() > deadline:
            return rows
        time.sleep(0.1)


@pytest.mark.slow
def test_5_and_60_megabyte_bodies_are_stored_cut_and_marked(tmp_path: Path) -> None:
    home, data = tmp_path / "home", tmp_path / "data"
    (home / ".claude").mkdir(parents=True)
    env = clean_env(home, data, TMA1_PORT=str(free_port()))
    assert run(env, "install", "--adapter", "claude-code").returncode == 0
    script = data / "hooks" / script_name("claude-code")
    with serving(env, port=int(env["TMA1_PORT"])) as srv:
        for sid, size in (("five", 5_000_000), ("sixty", 60_000_000)):
            body = _payload(sid, size)
            assert len(body) >= size
            res = _fire(script, env, body)
            assert (res.returncode, res.stderr) == (0, b"")
            rows = _wait_rows(data / "tma1.db", sid, 1)
            assert len(rows) == 1, (sid, srv.get("/api/health").json())
            result, meta = rows[0]
            assert result is not None and result.endswith("…[truncated]")
            assert len(result.encode()) <= 16 * 1024
            marks = json.loads(meta or "{}")
            assert marks["truncated"] is True and marks["original_bytes"] == len(body)
        health = srv.get("/api/health").json()
        assert health["rejected"] == {}


@pytest.mark.slow
def test_a_body_over_the_hard_limit_is_refused_and_counted(tmp_path: Path) -> None:
    home, data = tmp_path / "home", tmp_path / "data"
    (home / ".claude").mkdir(parents=True)
    env = clean_env(home, data, TMA1_PORT=str(free_port()))
    run(env, "install", "--adapter", "claude-code")
    script = data / "hooks" / script_name("claude-code")
    with serving(env, port=int(env["TMA1_PORT"])) as srv:
        res = _fire(script, env, _payload("huge", MAX_BODY_BYTES + 1024))
        assert (res.returncode, res.stdout, res.stderr) == (0, b"", b"")
        deadline = time.monotonic() + 30
        while True:
            health = srv.get("/api/health").json()
            if health["rejected"] or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert health["rejected"] == {"body_too_large": 1}
        assert _rows(data / "tma1.db", "huge") == []
