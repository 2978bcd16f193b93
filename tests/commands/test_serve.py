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

from tma1.auth.hooktoken import hook_headers
from tma1.clock import ManualClock
from tma1.config import Settings
from tma1.events import parse_payload
from tma1.live.service import build_service
from tma1.store import Store


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


def test_serving_an_old_database_keeps_everything(tmp_path: Path) -> None:
    """The TTL counts back from the newest event: a database last written 90 days ago
    (a backup, a laptop back from holiday) loses nothing when served again."""
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    day = 86_400_000
    now = int(time.time() * 1000)
    store = Store.open(f"sqlite:///{data / 'tma1.db'}")
    for ago in (150, 120, 90):
        store.insert_event(
            parse_payload({"session_id": f"s{ago}", "hook_event_name": "Stop"}, ts=now - ago * day)
        )
    store.close()
    port = free_port()
    proc = subprocess.Popen(
        tma1_cmd("serve", "--port", str(port), "--no-watch"),
        env=_env(data),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_healthy(url, proc)
        auth = {"X-TMA1-Token": (data / "hook-token").read_text().strip()}
        health: dict = {}
        deadline = time.monotonic() + 15  # the first purge runs a second after the start
        while health.get("retention", {}).get("purge_runs", 0) < 1:
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
            health = httpx.get(f"{url}/api/health", headers=auth, timeout=2).json()
        assert health["rows"]["tma1_hook_events"] == 3
        assert health["retention"]["purge_runs"] >= 1
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    err = proc.stderr.read().decode() if proc.stderr else ""
    assert "retention" not in err and "purged" not in err


def _start(data: Path, port: int, **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        tma1_cmd("serve", "--port", str(port), "--no-watch"),
        env=_env(data, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _end(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_a_second_server_on_the_same_data_dir_refuses_naming_the_first(
    tmp_path: Path, db_url: str
) -> None:
    """Issue 28.2: two servers on one data dir (two watchers, two journals) ran side by
    side. The data dir is locked whatever the database, PostgreSQL included."""
    data = tmp_path / "data"
    first_port, second_port = free_port(), free_port()
    first = _start(data, first_port, TMA1_DATABASE_URL=db_url)
    try:
        _wait_healthy(f"http://127.0.0.1:{first_port}", first)
        second = subprocess.run(
            tma1_cmd("serve", "--port", str(second_port), "--no-watch"),
            env=_env(data, TMA1_DATABASE_URL=db_url),
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert second.returncode == 1
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1, second.stderr
        assert f"pid {first.pid}, port {first_port}" in lines[0]
        assert str(data) in lines[0] and "--data-dir" in lines[0]
        assert first.poll() is None  # the first one is untouched
    finally:
        _end(first)
    # Stopped cleanly, the first leaves the data dir free for the next.
    again = _start(data, second_port, TMA1_DATABASE_URL=db_url)
    try:
        _wait_healthy(f"http://127.0.0.1:{second_port}", again)
    finally:
        _end(again)


def test_a_crashed_servers_lock_file_does_not_block_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    port = free_port()
    crashed = _start(data, port)
    try:
        _wait_healthy(f"http://127.0.0.1:{port}", crashed)
        assert f"pid={crashed.pid}" in (data / "serve.lock").read_text()
    finally:
        crashed.kill()  # SIGKILL: no clean-up ran, the file still names it
        crashed.wait()
    assert f"pid={crashed.pid}" in (data / "serve.lock").read_text()
    port = free_port()
    restarted = _start(data, port)
    try:
        _wait_healthy(f"http://127.0.0.1:{port}", restarted)
        assert f"pid={restarted.pid} port={port}" in (data / "serve.lock").read_text()
    finally:
        _end(restarted)


def test_an_existing_open_token_is_tightened_at_start(tmp_path: Path) -> None:
    """Issue 28.7: the README says an older install is tightened when serve starts."""
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    token = data / "hook-token"
    token.write_text("ab" * 32 + "\n")
    token.chmod(0o644)
    port = free_port()
    proc = _start(data, port)
    try:
        _wait_healthy(f"http://127.0.0.1:{port}", proc)
    finally:
        _end(proc)
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert token.read_text() == "ab" * 32 + "\n"  # the same token: the hooks still match


def test_a_start_logs_no_alembic_plugin_noise(tmp_path: Path) -> None:
    """Issue 28.12: seven `alembic.runtime.plugins` INFO lines at every start. The
    upgrades a first start runs are still said."""
    data = tmp_path / "data"
    for run_no in (1, 2):
        port = free_port()
        proc = _start(data, port)
        try:
            _wait_healthy(f"http://127.0.0.1:{port}", proc)
        finally:
            _end(proc)
        err = proc.stderr.read().decode() if proc.stderr else ""
        assert "alembic.runtime.plugins" not in err and "Context impl" not in err, err
        assert ("Running upgrade" in err) == (run_no == 1), err
        assert "tma1 serving on" in err
