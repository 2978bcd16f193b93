"""`tma1 doctor` names the projects the file watcher leaves out, and why (issue 31): a real
`tma1 serve` with the watcher on, real hooks, `tma1 doctor` as a subprocess."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx
from conftest import free_port, tma1_cmd
from trustkit import Served, clean_env, run, wait_up

from tma1.auth.hooktoken import hook_headers


def _post(url: str, token: str, cwd: Path | str) -> None:
    r = httpx.post(
        f"{url}/api/hooks",
        json={"session_id": f"s-{cwd}", "hook_event_name": "UserPromptSubmit", "cwd": str(cwd)},
        headers=hook_headers(token),
        timeout=10,
        trust_env=False,
    )
    assert r.status_code == 200


def test_doctor_lists_unwatched_projects_with_their_reason(tmp_path: Path) -> None:
    home, data = tmp_path / "home", tmp_path / "data"
    home.mkdir()
    tree = tmp_path / "generated"
    for i in range(30):
        (tree / "out" / f"d{i}").mkdir(parents=True)
    small = tmp_path / "small"
    small.mkdir()
    (small / "a.txt").write_text("a\n")
    port = free_port()
    env = clean_env(home, data, TMA1_PORT=str(port), TMA1_WATCH_MAX_DIRS="20")
    log = (tmp_path / "serve.log").open("ab")
    proc = subprocess.Popen(tma1_cmd("serve", "--port", str(port)), env=env, stdout=log, stderr=log)
    served = Served(proc, f"http://127.0.0.1:{port}", port)
    try:
        wait_up(served.url, proc)
        token = (data / "hook-token").read_text().strip()
        for cwd in ("/proc", home, tree, small):
            _post(served.url, token, cwd)
        deadline = time.monotonic() + 30
        while True:
            files = httpx.get(
                f"{served.url}/api/health", headers={"X-TMA1-Token": token}, trust_env=False
            ).json()["sensors"]
            files = files["files"]
            if str(tree) in files["unwatched"] and files["projects"].get(str(small), {}).get(
                "ready"
            ):
                break
            assert time.monotonic() < deadline, files
            time.sleep(0.05)
        res = run(env, "doctor")
    finally:
        served.stop()
        log.close()
    assert "Traceback" not in res.stderr
    lines = res.stdout.splitlines()
    watcher = [ln for ln in lines if ln[6:24].rstrip() == "file watcher"]
    assert len(watcher) == 1 and watcher[0].startswith("warn"), res.stdout
    assert "watching 1 project(s); not watching 3" in watcher[0]
    unwatched = {
        ln.split()[3].rstrip(":"): ln for ln in lines if ln[6:24].rstrip() == "not watched"
    }
    assert set(unwatched) == {"/proc", str(home), str(tree)}, res.stdout
    assert "pseudo-filesystem" in unwatched["/proc"]
    assert "home directory" in unwatched[str(home)]
    over = unwatched[str(tree)]
    assert "over budget: more than 20 directories" in over and "TMA1_WATCH_MAX_DIRS" in over
    assert "fix: add its generated directories to .gitignore" in over
    assert all(ln.startswith("warn") for ln in unwatched.values())
