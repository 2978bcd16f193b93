"""`tma1 demo` end to end: a real server, the real hook script, all six kinds delivered."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from conftest import tma1_cmd

from tma1 import gates
from tma1.engine.anomaly import Kind

pytestmark = pytest.mark.slow


def demo_env() -> dict[str, str]:
    # A user's own TMA1_* settings must not change what the demo does.
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env["TMA1_DATABASE_URL"] = "sqlite:////nonexistent/should-not-be-used.db"
    env["TMA1_PORT"] = "1"
    return env


def test_demo_shows_all_six_kinds_then_cleans_up() -> None:
    r = subprocess.run(
        tma1_cmd("demo"), capture_output=True, text=True, timeout=240, env=demo_env()
    )
    out = r.stdout
    assert r.returncode == 0, out + r.stderr
    for kind in Kind:
        line = next((ln for ln in out.splitlines() if f" {kind.value} " in ln and "✓" in ln), None)
        assert line is not None, f"{kind.value} not delivered:\n{out}"
        assert re.search(r"(digest|Stop) at step \d+", line)
    # what the agent read is shown verbatim: a digest and a Stop block
    assert "<tma1-context>" in out and "</tma1-context>" in out
    assert "│ Stop blocked; the agent reads:" in out and "│ tma1: do not stop yet" in out
    assert "[high] repeated_failed_build:" in out
    # the gates were fetched and printed, one row per kind
    assert "Validation gates" in out
    gate_rows = [ln for ln in out.splitlines() if re.match(r"\s+\w+\s+\d+ (ok|OVER)\s", ln)]
    assert len(gate_rows) == len(gates.KINDS)  # every rule's kind, the seed's six first
    assert "All six kinds reached the agent." in out
    # the server is gone and the temporary directory removed
    url = re.search(r"Dashboard: (http://127\.0\.0\.1:\d+)/", out)
    assert url
    with pytest.raises(httpx.ConnectError):
        httpx.get(url.group(1) + "/api/health", timeout=2, trust_env=False)
    project = re.search(r"project\s+(\S+)", out)
    assert project and not Path(project.group(1)).exists()


@pytest.mark.parametrize("stop_with", [signal.SIGINT, signal.SIGTERM])
def test_demo_keep_leaves_the_dashboard_up_until_ctrl_c(stop_with: signal.Signals) -> None:
    proc = subprocess.Popen(
        tma1_cmd("demo", "--keep"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=demo_env(),
    )
    try:
        lines: list[str] = []
        deadline = time.monotonic() + 240
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "press Ctrl-C" in line:
                break
        out = "".join(lines)
        url = re.search(r"Dashboard: (http://127\.0\.0\.1:\d+)/(\?login=\S+)", out)
        assert url, out
        health = httpx.get(url.group(1) + "/api/health", timeout=5, trust_env=False)
        assert health.status_code == 401  # no data without logging in
        # the printed URL, opened as a browser does: it logs in, and lands on the dashboard
        with httpx.Client(timeout=5, trust_env=False, follow_redirects=True) as browser:
            page = browser.get(url.group(1) + "/" + url.group(2))
            assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
            assert str(page.url) == url.group(1) + "/"
            emits = browser.get(url.group(1) + "/api/anomalies").json()
        assert {e["kind"] for e in emits["emits"]} == {k.value for k in Kind}
        proc.send_signal(stop_with)
        assert proc.wait(timeout=30) == 0
        with pytest.raises(httpx.ConnectError):
            httpx.get(url.group(1) + "/api/health", timeout=2, trust_env=False)
        project = re.search(r"project\s+(\S+)", out)
        assert project and not Path(project.group(1)).exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
