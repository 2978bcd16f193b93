"""The data dir is 0700 and the database files 0600, for a new install and (tightened on
start) an old one; a data dir tma1 cannot use is a one-line error, not a traceback."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from trustkit import clean_env, run, serving

from tma1.auth.hooktoken import hook_headers


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def _post(url: str, data: Path) -> None:
    token = (data / "hook-token").read_text().strip()
    r = httpx.post(
        f"{url}/api/hooks",
        json={
            "session_id": "s1",
            "hook_event_name": "UserPromptSubmit",
            "prompt": "secret",
            "cwd": "/tmp",
        },
        headers=hook_headers(token),
        timeout=10,
        trust_env=False,
    )
    assert r.status_code == 200


def test_new_data_dir_is_private(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = clean_env(tmp_path, data)
    old = os.umask(0o022)  # the usual umask: without tma1's care the files are 0644
    try:
        with serving(env) as srv:
            _post(srv.url, data)
            assert _mode(data) == 0o700
            for name in ("tma1.db", "tma1.db-wal", "tma1.db-shm", "hook-token"):
                assert (data / name).exists(), name
                assert _mode(data / name) == 0o600, (name, oct(_mode(data / name)))
    finally:
        os.umask(old)


def test_existing_install_is_tightened_on_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    os.chmod(data, 0o755)
    db = data / "tma1.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    for p in data.iterdir():
        os.chmod(p, 0o644)
    assert _mode(db) == 0o644
    env = clean_env(tmp_path, data)
    with serving(env) as srv:
        _post(srv.url, data)
        assert _mode(data) == 0o700
        for p in data.iterdir():
            if p.name.startswith("tma1.db"):
                assert _mode(p) == 0o600, (p.name, oct(_mode(p)))


def _one_line_error(res: subprocess.CompletedProcess[str], *words: str) -> str:
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("tma1:")]
    assert len(lines) == 1, res.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    assert "serving on" not in res.stderr
    return lines[0]


def test_data_dir_that_is_a_file(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    res = run(clean_env(tmp_path, f), "serve", "--no-watch", timeout=60)
    _one_line_error(res, str(f), "is a file", "TMA1_DATA_DIR")


def test_data_dir_under_proc(tmp_path: Path) -> None:
    res = run(clean_env(tmp_path, Path("/proc/tma1-test")), "serve", "--no-watch")
    _one_line_error(res, "/proc/tma1-test", "cannot create", "TMA1_DATA_DIR")


@contextlib.contextmanager
def _read_only_dir(tmp_path: Path) -> Iterator[Path]:
    ro = tmp_path / "ro"
    ro.mkdir()
    if os.geteuid() != 0:
        os.chmod(ro, 0o500)
        try:
            yield ro
        finally:
            os.chmod(ro, 0o700)
        return
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip("running as root without mount: cannot make a read-only directory")
    try:
        yield ro
    finally:
        subprocess.run(["umount", str(ro)], check=False)


def test_data_dir_on_a_read_only_mount(tmp_path: Path) -> None:
    with _read_only_dir(tmp_path) as ro:
        res = run(clean_env(tmp_path, ro / "data"), "serve", "--no-watch")
        _one_line_error(res, str(ro / "data"), "TMA1_DATA_DIR")
        res = run(clean_env(tmp_path, ro), "serve", "--no-watch")
        _one_line_error(res, str(ro), "not writable", "TMA1_DATA_DIR")
