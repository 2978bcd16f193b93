"""`tma1 anomalies` and `tma1 gates` read this machine's rows; `--scope team` every
machine's (issue 30). Real subprocesses against a real database."""

from __future__ import annotations

import json
import os
import subprocess

from conftest import tma1_cmd
from gateseed import emit_row

from tma1.clock import SystemClock
from tma1.store import Store


def _run(db_url: str, machine: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMA1_MACHINE_ID": machine}
    return subprocess.run(
        tma1_cmd(*args, "--database-url", db_url),
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_scope_machine_and_team(db_url: str) -> None:
    now = SystemClock().now_ms()
    for mid, sid in (("m-a", "sa"), ("m-b", "sb")):
        st = Store.open(db_url, machine_id=mid)
        try:
            st.insert_emits([emit_row(ts=now - 60_000, session_id=sid, kind="test_stuck")])
        finally:
            st.close()

    def sessions(*args: str) -> set[str]:
        out = _run(db_url, "m-a", "anomalies", "--json", *args)
        assert out.returncode == 0, out.stderr
        return {e["session_id"] for e in json.loads(out.stdout)["emits"]}

    def budget_total(*args: str) -> int:
        out = _run(db_url, "m-a", "gates", "--json", *args)
        assert out.returncode == 0, out.stderr
        return int(json.loads(out.stdout)["budget"]["kinds"]["test_stuck"]["total"])

    assert sessions() == {"sa"}
    assert sessions("--scope", "team") == {"sa", "sb"}
    assert budget_total() == 1
    assert budget_total("--scope", "team") == 2
    bad = _run(db_url, "m-a", "anomalies", "--scope", "everyone")
    assert bad.returncode == 2 and "--scope" in bad.stderr
