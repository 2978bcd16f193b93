"""`tma1 serve` as a real process: start, token, clean stop, port clash, bad config."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import free_port, tma1_cmd

from tma1.clock import ManualClock
from tma1.config import Settings
from tma1.events import parse_payload
from tma1.service import build_service
from tma1.token import hook_headers


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMA1_")}
    env.update({"TMA1_DATA_DIR": str(data_dir), **extra})
    return env


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float = 20) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited early: {proc.communicate()}")
        try:
            return httpx.get(f"{url}/api/ping", timeout=1).raise_for_status() and {}
        except httpx.HTTPError:
            time.sleep(0.1)
    raise AssertionError("server did not become healthy")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    port = free_port()
    data = tmp_path / "data"
    proc = subprocess.Popen(
        tma1_cmd("serve", "--port", str(port), "--no-watch"),
        env=_env(data),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    _wait_healthy(url, proc)
    yield proc, url, data
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_stores_events_and_stops_cleanly(served: tuple, sig: signal.Signals) -> None:
    proc, url, data = served
    token_file = data / "hook-token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    token = token_file.read_text().strip()
    assert len(token) == 64 and int(token, 16) >= 0
    r = httpx.post(
        f"{url}/api/hooks",
        headers=hook_headers(token),
        content=b'{"session_id": "s", "hook_event_name": "SessionStart"}',
    )
    assert r.status_code == 200
    health = httpx.get(f"{url}/api/health", headers={"X-TMA1-Token": token}).json()
    assert health["rows"]["tma1_hook_events"] == 1 and health["database"] == "sqlite"
    proc.send_signal(sig)
    # uvicorn re-raises the signal after its graceful shutdown, so the process may end
    # "killed by sig" — but only after the lifespan shutdown ran to completion.
    assert proc.wait(timeout=15) in (0, -sig, 128 + sig, 130)
    err = proc.stderr.read().decode() if proc.stderr else ""
    assert "Application shutdown complete" in err
    assert "Traceback" not in err
    assert (data / "tma1.db").exists()


def test_second_server_on_the_same_port_fails_clearly(served: tuple) -> None:
    _proc, url, data = served
    port = url.rsplit(":", 1)[1]
    second = subprocess.run(
        tma1_cmd("serve", "--port", port, "--no-watch"),
        env=_env(data),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert second.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in second.stderr
    assert "Traceback" not in second.stderr


def test_invalid_setting_fails_at_startup_naming_the_variable(tmp_path: Path) -> None:
    r = subprocess.run(
        tma1_cmd("serve"),
        env=_env(tmp_path, TMA1_PORT="nope"),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 2
    assert "TMA1_PORT" in r.stderr and "Traceback" not in r.stderr


def test_migrations_run_at_startup_and_purge_drops_old_rows(tmp_path: Path) -> None:
    clock = ManualClock(start_ms=10 * 86_400_000)
    settings = Settings(
        data_dir=tmp_path,
        database_url=f"sqlite:///{tmp_path / 'x.db'}",
        data_ttl_seconds=86_400,
        watch_files=False,
    )
    service = build_service(settings, clock=clock)  # a brand-new file: migrations create it
    store = service.store
    for ts in (clock.now_ms() - 2 * 86_400_000, clock.now_ms() - 3_600_000):
        store.insert_event(parse_payload({"session_id": "s", "hook_event_name": "Stop"}, ts=ts))
    removed = service.purge_once()
    assert removed["tma1_hook_events"] == 1
    assert store.counts()["tma1_hook_events"] == 1
