"""Helpers for the trust tests: `tma1` as a subprocess in a temporary $HOME, and a real
`tma1 serve` process that every test ends by its PID."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
from conftest import free_port, tma1_cmd

from tma1.adapters.agents import codex


def clean_env(home: Path, data_dir: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TMA1_") and k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME")
    }
    env["HOME"] = str(home)
    env["TMA1_DATA_DIR"] = str(data_dir)
    env.update(extra)
    return env


def run(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(tma1_cmd(*args), env=env, capture_output=True, text=True, timeout=timeout)


@dataclass
class Served:
    proc: subprocess.Popen[bytes]
    url: str
    port: int
    data_dir: Path | None = None

    def get(self, path: str, **kw: object) -> httpx.Response:
        """A read with the server's token (reads need it: issue 31)."""
        data_dir = self.data_dir or Path.home() / ".tma1"
        token = (data_dir / "hook-token").read_text(encoding="ascii").strip()
        return httpx.get(  # type: ignore[arg-type]
            f"{self.url}{path}", headers={"X-TMA1-Token": token}, trust_env=False, timeout=10, **kw
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def wait_up(url: str, proc: subprocess.Popen[bytes], timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited early ({proc.returncode})")
        try:
            r = httpx.get(f"{url}/api/ping", timeout=1, trust_env=False)
            r.raise_for_status()
            return {}
        except httpx.HTTPError:
            time.sleep(0.05)
    raise AssertionError("server did not come up")


@contextlib.contextmanager
def serving(env: dict[str, str], *extra: str, port: int | None = None) -> Iterator[Served]:
    port = port or free_port()
    log = open(Path(env["HOME"]) / f"serve-{port}.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen(
        tma1_cmd("serve", "--port", str(port), "--no-watch", *extra),
        env=env,
        stdout=log,
        stderr=log,
    )
    served = Served(
        proc,
        f"http://127.0.0.1:{port}",
        port,
        Path(env["TMA1_DATA_DIR"]) if "TMA1_DATA_DIR" in env else None,
    )
    try:
        wait_up(served.url, proc)
        yield served
    finally:
        served.stop()
        log.close()


def trust_all(home: Path) -> None:
    """What Codex's "Trust all and continue" records: each handler's key and hash."""
    hooks = json.loads((home / "hooks.json").read_text())["hooks"]
    where = (home / "hooks.json").resolve()
    lines = []
    for event, groups in hooks.items():
        for g, group in enumerate(groups):
            for h, handler in enumerate(group["hooks"]):
                key = f"{where}:{codex.event_label(event)}:{g}:{h}"
                lines += [
                    f'[hooks.state."{key}"]',
                    f'trusted_hash = "{codex.trust_hash(event, group, handler)}"',
                    "",
                ]
    (home / "config.toml").write_text('model = "gpt-5.5"\n\n[hooks.state]\n\n' + "\n".join(lines))
