"""Schemathesis over /openapi.json of a live `tma1 serve`: no request makes it answer 5xx.

The CLI runs as a subprocess against the real server (with the token, so the fuzzed
requests reach the read handlers rather than the 401; the hook path takes a fresh nonce
per request instead, so it answers these 403, and its bodies are fuzzed by
tests/server/test_routes_hooks_property.py), a bounded number of examples per operation
and a fixed seed (TMA1_FUZZ_SEED overrides it to explore further).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from loadkit import ServeProcess

pytestmark = pytest.mark.slow

MAX_EXAMPLES = int(os.environ.get("TMA1_FUZZ_EXAMPLES", "25"))
SEED = os.environ.get("TMA1_FUZZ_SEED", "8")


def schemathesis() -> str:
    exe = Path(sys.executable).with_name("schemathesis")
    if exe.exists():
        return str(exe)
    found = shutil.which("schemathesis")
    if not found:
        pytest.skip("schemathesis is not installed (pip install -e '.[dev]')")
    return found


def test_schemathesis_finds_no_server_error(db_url: str, tmp_path: Path) -> None:
    srv = ServeProcess.start(tmp_path / "data", database_url=db_url)
    try:
        run = subprocess.run(
            [
                schemathesis(),
                "run",
                f"{srv.url}/openapi.json",
                "--checks",
                "not_a_server_error",
                "--header",
                f"X-TMA1-Token: {srv.token}",
                "--max-examples",
                str(MAX_EXAMPLES),
                "--seed",
                SEED,
                "--workers",
                "1",
                "--generation-database",
                "none",
                "--request-timeout",
                "30",
                "--no-color",
            ],
            cwd=tmp_path,  # its report/cache directories land here, not in the checkout
            capture_output=True,
            text=True,
            timeout=900,
        )
        health = srv.health()
    finally:
        srv.stop()
    out = run.stdout + run.stderr
    summary = [ln for ln in out.splitlines() if "generated" in ln or "passed" in ln]
    print("\nSCHEMATHESIS", db_url.split(":")[0], " | ".join(summary[-3:]))
    assert "Operations:" in out, out[-3000:]
    assert run.returncode == 0, out[-6000:] + "\n--- server log ---\n" + srv.log_tail(60)
    # The server stayed up and its hook path swallowed every fuzzed body without a crash.
    assert health["status"] == "ok"
    assert health["errors"].get("internal", 0) == 0, health["errors"]
