"""The package as a Python user gets it: built as a wheel, installed into a fresh venv
(as pipx and `uv tool install` do), and run from there — `tma1 --version` and `tma1 demo`.

Builds from a copy of the tracked sources, so nothing in the checkout is touched and a file
that only exists in this checkout cannot make it pass. The fresh venv gets its
dependencies from pip's configured index (the machine's mirror here and in CI).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import zipfile
from pathlib import Path

import httpx
import pytest
from conftest import REPO, free_port

import tma1
from tma1.engine.anomaly import Kind

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def run(
    cmd: list[str], *, timeout: float, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run in its own process group and end the whole group afterwards, so a server the
    command started cannot outlive the test (even when the command hangs)."""
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out, err = "", f"timed out after {timeout} s"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def tracked_sources() -> list[str]:
    """The files a release is built from (git's list when this is a checkout)."""
    if (REPO / ".git").exists() and shutil.which("git"):
        r = subprocess.run(
            ["git", "ls-files", "-z", "src", "pyproject.toml", "README.md"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        )
        return [f for f in r.stdout.split("\0") if f]
    return [
        str(p.relative_to(REPO))
        for p in [REPO / "pyproject.toml", REPO / "README.md", *(REPO / "src").rglob("*")]
        if p.is_file() and "__pycache__" not in p.parts and ".egg-info" not in str(p)
    ]


def clean_env(home: Path) -> dict[str, str]:
    """The environment of a user who never saw this checkout or its venv."""
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "NO_COLOR")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMA1_") and k not in drop}
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != bin_dir)
    env["HOME"] = str(home)
    return env


def test_wheel_installs_into_a_fresh_venv_and_runs_the_demo(tmp_path: Path) -> None:
    src = tmp_path / "src"
    files = tracked_sources()
    for rel in files:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, src / rel)

    dist = tmp_path / "dist"
    r = run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(src)],
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    wheels = list(dist.glob("tma1-*.whl"))
    assert len(wheels) == 1, wheels

    # Every file of the package is inside: code, static files, migrations, alembic.ini,
    # the hook template.
    names = set(zipfile.ZipFile(wheels[0]).namelist())
    package_files = {f.removeprefix("src/") for f in files if f.startswith("src/tma1/")}
    assert package_files, files
    assert package_files <= names, sorted(package_files - names)
    for needed in (
        "tma1/adapters/hook.sh",
        "tma1/server/static/index.html",
        "tma1/store/alembic.ini",
        "tma1/store/migrations/env.py",
    ):
        assert needed in names
    assert any(n.startswith("tma1/store/migrations/versions/") for n in names)

    venv = tmp_path / "venv"
    r = run([sys.executable, "-m", "venv", str(venv)], timeout=300)
    assert r.returncode == 0, r.stderr
    home = tmp_path / "home"
    home.mkdir()
    env = clean_env(home)
    # --no-compile: as `uv tool install` does by default; byte-compiling the ~50 packages
    # proves nothing about the wheel and took about a fifth of this test.
    r = run(
        [str(venv / "bin" / "pip"), "install", "-q", "--no-compile", str(wheels[0])],
        timeout=900,
        env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr

    r = run(
        [str(venv / "bin" / "python"), "-c", "import tma1; print(tma1.__file__)"],
        timeout=60,
        cwd=tmp_path,
        env=env,
    )
    assert Path(r.stdout.strip()).is_relative_to(venv), r.stdout + r.stderr

    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    r = run([str(venv / "bin" / "tma1"), "--version"], timeout=60, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"tma1 {version}"
    assert version == tma1.__version__

    r = run([str(venv / "bin" / "tma1"), "demo"], timeout=300, cwd=tmp_path, env=env)
    out = r.stdout
    assert r.returncode == 0, out + r.stderr
    for kind in Kind:
        assert any(f" {kind.value} " in ln and "✓" in ln for ln in out.splitlines()), (
            f"{kind.value} not delivered:\n{out}"
        )
    assert "All six kinds reached the agent." in out
    url = re.search(r"Dashboard: (http://127\.0\.0\.1:\d+)/", out)
    assert url
    with pytest.raises(httpx.ConnectError):
        httpx.get(url.group(1) + "/api/health", timeout=2, trust_env=False)


def end_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    """Send `sig` to the process group, wait (bounded) until every member is gone, then
    kill what is left: the shell may exit before the server it started has shut down."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    proc.wait()
    for _ in range(300):
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    raise AssertionError("the server did not stop on SIGTERM within 30 s")


def first_command() -> str:
    """The README's first shell command, as written."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```sh\n(.*?)```", text, re.S)
    assert block, "README.md has no ```sh block"
    return block.group(1).strip()


def test_the_readmes_first_command_works_word_for_word(tmp_path: Path) -> None:
    command = first_command()
    assert command.endswith("tma1 serve"), command  # the test below waits for a server
    checkout = tmp_path / "tma1"
    for rel in tracked_sources():
        (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, checkout / rel)
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    # Only the port moves (other servers may hold 14318 on a shared machine); the command
    # is the README's, character for character, run by a shell in a fresh clone.
    env = {**clean_env(home), "TMA1_PORT": str(port)}
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command],
            cwd=checkout,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        answered = False
        deadline = time.monotonic() + 600  # the venv and its dependencies come first
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            with contextlib.suppress(httpx.HTTPError):
                r = httpx.get(f"http://127.0.0.1:{port}/api/ping", timeout=1, trust_env=False)
                if r.status_code == 200:
                    answered = True
                    break
            time.sleep(0.1)
        assert answered, f"exit {proc.poll()}:\n{log.read_text()[-4000:]}"
        assert (home / ".tma1" / "tma1.db").exists()  # SQLite in ~/.tma1, as the README says
        assert (checkout / ".venv" / "bin" / "tma1").exists()
    finally:
        end_group(proc, signal.SIGTERM)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/api/ping", timeout=2, trust_env=False)
