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
from tma1.store.emits import list_emits


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


def test_label_writes_only_this_machines_emits(db_url: str) -> None:
    now = SystemClock().now_ms()
    ids = {}
    for mid, sid in (("m-a", "sa"), ("m-b", "sb")):
        st = Store.open(db_url, machine_id=mid)
        try:
            st.insert_emits([emit_row(ts=now - 60_000, session_id=sid, kind="test_stuck")])
            ids[sid] = list_emits(st, limit=1)[0]["id"]
        finally:
            st.close()
    theirs = _run(db_url, "m-a", "label", str(ids["sb"]), "fp")
    assert theirs.returncode == 1
    assert theirs.stderr.strip().splitlines() == [
        f"tma1: emit {ids['sb']} was stored by machine m-b, not this one: label it on the "
        "machine whose agent it was told to (the team scope is read-only)"
    ]
    mine = _run(db_url, "m-a", "label", str(ids["sa"]), "tp")
    assert mine.returncode == 0 and mine.stdout.strip() == f"emit {ids['sa']}: tp (human)"
    st = Store.open(db_url, migrate=False)
    try:
        assert st.counts()["tma1_anomaly_labels"] == 1
    finally:
        st.close()
