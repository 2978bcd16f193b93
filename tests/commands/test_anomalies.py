"""`tma1 anomalies | gates | label` as real subprocesses against a real database."""

from __future__ import annotations

import json
import re
import subprocess

from conftest import LiveServer, tma1_cmd
from gateseed import Session, emit_row

from tma1.clock import SystemClock
from tma1.gates import DAY_MS
from tma1.store import Store


def _run(db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        tma1_cmd(*args, "--database-url", db_url),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _gate_rows(stdout: str) -> dict[tuple[str, str], str]:
    """(kind, gate) → RESULT column of the `tma1 gates` table (columns: 2+ spaces apart)."""
    out = {}
    for ln in stdout.split("\n\n")[0].splitlines()[2:]:
        cells = re.split(r"\s{2,}", ln.strip())
        if len(cells) == 5:
            out[(cells[0], cells[1])] = cells[4]
    return out


def test_gates_fail_only_with_a_sample_of_the_minimum_size(store: Store, db_url: str) -> None:
    """Ten FP labels on test_stuck (the minimum sample) are a FAIL; nine are not enough."""
    now = SystemClock().now_ms()
    store.insert_emits(
        [
            emit_row(
                ts=now - 60_000 - i,
                session_id="m",
                kind="test_stuck",
                subject=f"t{i}",
                related=["/r/t.py"],
            )
            for i in range(10)
        ]
    )
    Session(store, "m", ts=now - 50_000).read("/r/t.py").flush()  # every emit followed
    for i in range(1, 10):
        assert _run(db_url, "label", str(i), "fp").returncode == 0
    nine = _run(db_url, "gates", "--strict", "--budget", "10")
    assert nine.returncode == 0, nine.stdout
    assert _gate_rows(nine.stdout)[("test_stuck", "precision")] == "not enough data (n = 9)"
    assert _run(db_url, "label", "10", "fp").returncode == 0
    ten = _run(db_url, "gates", "--strict", "--budget", "10")
    assert ten.returncode == 1, ten.stdout
    assert _gate_rows(ten.stdout)[("test_stuck", "precision")] == "FAIL"


def test_anomalies_label_and_gates(store: Store, db_url: str) -> None:
    now = SystemClock().now_ms()
    store.insert_emits(
        [
            emit_row(
                ts=now - 60_000,
                session_id="cli-s1",
                kind="test_stuck",
                subject="tests/t.py::a",
                evidence="FAILED t::a three times",
            ),
            emit_row(ts=now - 30_000, session_id="cli-s2", kind="context_pressure"),
        ]
    )
    out = _run(db_url, "anomalies")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split()[:4] == ["ID", "TIME", "(UTC)", "KIND"]
    assert lines[2].split()[0] == "2" and "context_pressure" in lines[2]
    assert "FAILED t::a three times" in lines[3]

    js = json.loads(_run(db_url, "anomalies", "--session", "cli-s1", "--json").stdout)
    assert [e["id"] for e in js["emits"]] == [1]

    ok = _run(db_url, "label", "1", "fp", "--note", "flaky test, not stuck")
    assert ok.returncode == 0 and "emit 1: fp (human)" in ok.stdout
    missing = _run(db_url, "label", "77", "tp")
    assert missing.returncode == 1 and "no emit with id 77" in missing.stderr
    bad = _run(db_url, "label", "1", "maybe")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
    js = json.loads(_run(db_url, "anomalies", "--kind", "test_stuck", "--json").stdout)
    assert js["emits"][0]["label"] == "fp"
    assert js["emits"][0]["label_note"] == "flaky test, not stuck"

    # One FP label and one unfollowed emit are no sample: "not enough data (n = 1)", never
    # a FAIL, and --strict does not fail on it.
    table = _run(db_url, "gates")
    assert table.returncode == 0, table.stderr
    rows = _gate_rows(table.stdout)
    assert rows[("test_stuck", "precision")] == "not enough data (n = 1)"
    assert rows[("test_stuck", "budget")] == "pass"
    assert rows[("stale_file_view", "follow-rate")] == "n/a"
    assert rows[("context_pressure", "follow-rate")] == "not enough data (n = 1)"
    assert "FAIL" not in table.stdout.split("\n\n")[0]
    assert _run(db_url, "gates", "--strict").returncode == 0
    js = json.loads(_run(db_url, "gates", "--json").stdout)
    tsp = js["precision"]["human"]["kinds"]["test_stuck"]
    assert (tsp["status"], tsp["n"], tsp["pass"]) == ("not_enough_data", 1, None)

    assert _run(db_url, "label", "1", "clear").returncode == 0
    # Both emits followed: the session commits (context_pressure), the test file is read.
    Session(store, "cli-s2", ts=now - 20_000).bash("git commit -am done").flush()
    Session(store, "cli-s1", ts=now - 50_000).read("/repo/tests/t.py").flush()
    strict = _run(db_url, "gates", "--strict", "--json")
    assert strict.returncode == 0, strict.stdout
    data = json.loads(strict.stdout)
    assert data["follow_rate"]["kinds"]["context_pressure"]["followed"] == 1
    assert set(data) == {"budget", "follow_rate", "precision"}


def test_gates_strict_fails_on_budget_and_validates_options(store: Store, db_url: str) -> None:
    now = SystemClock().now_ms()
    today = (now // DAY_MS) * DAY_MS
    store.insert_emits(
        [
            emit_row(ts=today + i, session_id="b", kind="stale_file_view", related=["/r/a.py"])
            for i in range(3)
        ]
    )
    Session(store, "b", ts=today + 10).read("/r/a.py").flush()  # so only the budget can fail
    assert _run(db_url, "gates", "--budget", "3", "--strict").returncode == 0
    r = _run(db_url, "gates", "--budget", "2", "--strict")
    assert r.returncode == 1
    assert "max 3/day" in r.stdout
    bad = _run(db_url, "gates", "--days", "0")
    assert bad.returncode == 2 and "out of range" in bad.stderr


def test_cli_labels_while_the_server_runs(live: LiveServer) -> None:
    """The CLI writes the same database the running daemon reads (SQLite WAL or PG)."""
    now = live.service.clock.now_ms()
    live.store.insert_emits([emit_row(ts=now, session_id="both", kind="test_stuck")])
    url = live.settings.effective_database_url
    out = _run(url, "label", "1", "tp", "--note", "from the terminal")
    assert out.returncode == 0, out.stderr
    emit = live.client().get("/api/anomalies").json()["emits"][0]
    assert (emit["label"], emit["label_note"]) == ("tp", "from the terminal")
    # …and a label from the dashboard's API shows in the CLI.
    r = live.client().post("/api/anomalies/1/label", json={"label": "fp"})
    assert r.status_code == 200
    js = json.loads(_run(url, "anomalies", "--json").stdout)
    assert js["emits"][0]["label"] == "fp"


def test_anomalies_filters_by_channel_and_the_budget_counts_bundle_emits(
    store: Store, db_url: str
) -> None:
    now = SystemClock().now_ms()
    # Both today (UTC), as the one-day budget counts them, even just after midnight.
    today = (now // DAY_MS) * DAY_MS
    told_ts, retold_ts = max(now - 60_000, today), max(now - 30_000, today)
    told = emit_row(ts=told_ts, session_id="cli-b", kind="repeated_failed_build")
    retold = {**told, "ts": retold_ts, "channel": "session_start"}
    store.insert_emits([told, retold])
    js = json.loads(_run(db_url, "anomalies", "--channel", "session_start", "--json").stdout)
    assert [(e["channel"], e["ts"]) for e in js["emits"]] == [("session_start", retold_ts)]
    # The dashboard's name for the channel selects the same (issue 28.9).
    named = json.loads(_run(db_url, "anomalies", "--channel", "session-bundle", "--json").stdout)
    assert named == js
    bad = _run(db_url, "anomalies", "--channel", "nope")
    assert bad.returncode == 2 and "session_start" in bad.stderr  # the choices are listed
    gates = json.loads(_run(db_url, "gates", "--json", "--days", "1").stdout)
    assert gates["budget"]["kinds"]["repeated_failed_build"]["total"] == 2
