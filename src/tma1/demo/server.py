"""The demo's own `tma1 serve`: a child process on a free loopback port and a temporary
data dir, isolated from the user's settings."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tma1.demo.output import DemoError

# Lowered so the scripted session's transcript crosses it within seconds.
CONTEXT_THRESHOLD = 30_000


def wait_for(pred: Callable[[], bool], timeout: float, step: float = 0.1) -> bool:
    """Whether `pred` came true within `timeout` s (a failed HTTP request counts as false)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if pred():
                return True
        except httpx.HTTPError:
            pass
        time.sleep(step)
    return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class DemoServer:
    data_dir: Path
    port: int
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        env = {
            k: v
            for k, v in os.environ.items()
            # the user's own tma1 settings must not leak in (their database, above all)
            if not k.startswith("TMA1_")
        }
        env.update(
            TMA1_DATA_DIR=str(self.data_dir),
            TMA1_PORT=str(self.port),
            TMA1_HOST="127.0.0.1",
            TMA1_CONTEXT_PRESSURE_THRESHOLD=str(CONTEXT_THRESHOLD),
            TMA1_LOG_LEVEL="WARNING",
        )
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tma1.cli", "serve"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in the terminal reaches the demo, which stops us
        )
        log.close()
        proc = self.proc

        def healthy() -> bool:
            if proc.poll() is not None:
                raise DemoError(f"tma1 serve exited early:\n{self.log_tail()}")
            return httpx.get(f"{self.url}/api/ping", timeout=1, trust_env=False).is_success

        if not wait_for(healthy, timeout):
            raise DemoError(f"tma1 serve did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def token(self) -> str:
        return (self.data_dir / "hook-token").read_text(encoding="ascii").strip()

    def login_url(self) -> str:
        from tma1.auth.hooktoken import login_url

        return login_url(self.url, self.token())

    def get(self, path: str, **params: Any) -> Any:
        token = self.token()
        r = httpx.get(
            f"{self.url}{path}",
            params=params,
            headers={"X-TMA1-Token": token},
            timeout=10,
            trust_env=False,
        )
        r.raise_for_status()
        return r.json()

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
