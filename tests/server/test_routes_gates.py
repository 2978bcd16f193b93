"""The emit log, labels, budget, precision, sample and sessions APIs on a live server over a
real SQLite and a real PostgreSQL, seeded with events and emits; figures checked by hand."""

from __future__ import annotations

import httpx
import pytest
from conftest import LiveServer
from gateseed import Session, emit_row

from tma1.clock import ManualClock
from tma1.engine.rules import SPECS
from tma1.gates import DAY_MS
from tma1.store import Store

HOUR = 3_600_000


def _get(live: LiveServer, path: str, **params: object) -> httpx.Response:
    with live.client() as c:
        return c.get(path, params=params)


def _label(live: LiveServer, emit_id: int, label: str, **extra: object) -> httpx.Response:
    with live.client() as c:
        return c.post(f"/api/anomalies/{emit_id}/label", json={"label": label, **extra})


def _ids(live: LiveServer, **params: object) -> list[int]:
    r = _get(live, "/api/anomalies", **params)
    assert r.status_code == 200, r.text
    return [e["id"] for e in r.json()["emits"]]


def test_emit_log_lists_newest_first_with_filters(live: LiveServer, clock: ManualClock) -> None:
    now = clock.now_ms()
    live.store.insert_emits(
        [
            emit_row(ts=now - 5000, session_id="a", kind="test_stuck", subject="t::x"),
            emit_row(
                ts=now - 4000,
                session_id="b",
                kind="stale_file_view",
                subject="/r/f.py",
                related=["/r/f.py", "/r/g.py"],
            ),
            emit_row(ts=now - 3000, session_id="a", kind="repeated_failed_build", subject="make"),
            emit_row(ts=now - 2000, session_id="b", kind="context_pressure"),
        ]
    )
    assert _ids(live) == [4, 3, 2, 1]
    assert _ids(live, limit=2) == [4, 3]
    assert _ids(live, session_id="a") == [3, 1]
    assert _ids(live, kind="stale_file_view") == [2]
    assert _ids(live, severity="medium") == [4, 1]
    assert _ids(live, severity="high", session_id="a") == [3]
    assert _ids(live, since_id=2) == [4, 3]
    e = _get(live, "/api/anomalies", kind="stale_file_view").json()["emits"][0]
    assert e["related_files"] == ["/r/f.py", "/r/g.py"]
    assert e["stable_key"] == "stale_file_view|high|/r/f.py"
    assert e["channel"] == "user_prompt_submit"
    assert e["first_emitted_at"] == now - 4000
    assert (e["label"], e["label_source"], e["label_note"]) == (None, None, None)
    # The list never runs rules: with no emits it is empty even when events would trigger.
    assert live.store.counts()["tma1_anomaly_emits"] == 4


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/api/anomalies", {"limit": 0}, "limit"),
        ("/api/anomalies", {"limit": "ten"}, "limit"),
        ("/api/anomalies", {"kind": "nope"}, "kind"),
        ("/api/anomalies", {"severity": "urgent"}, "severity"),
        ("/api/anomalies", {"since_id": -1}, "since_id"),
        ("/api/anomalies/budget", {"days": 0}, "days"),
        ("/api/anomalies/budget", {"budget": -1}, "budget"),
        ("/api/anomalies/budget", {"days": 1000}, "days"),
        ("/api/anomalies/follow-rate", {"window": 0}, "window"),
        ("/api/anomalies/follow-rate", {"days": "x"}, "days"),
        ("/api/anomalies/precision", {"days": -3}, "days"),
        ("/api/anomalies/sample", {"n": 0}, "n"),
        ("/api/sessions", {"limit": 100000}, "limit"),
    ],
)
def test_bad_parameters_get_422_naming_the_field(
    live: LiveServer, path: str, params: dict[str, object], field: str
) -> None:
    r = _get(live, path, **params)
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert [d["loc"][-1] for d in detail] == [field]
    assert detail[0]["msg"]  # says what is wrong, e.g. "Input should be greater than …"


def test_labels_upsert_clear_and_human_wins(live: LiveServer, clock: ManualClock) -> None:
    now = clock.now_ms()
    live.store.insert_emits([emit_row(ts=now - 1000, session_id="s", kind="test_stuck")])
    r = _label(live, 1, "fp", source="agent", note="the agent says no")
    assert r.status_code == 200 and r.json() == {"id": 1, "label": "fp", "source": "agent"}
    e = _get(live, "/api/anomalies").json()["emits"][0]
    assert (e["label"], e["label_source"], e["label_note"]) == ("fp", "agent", "the agent says no")
    assert _label(live, 1, "tp", note="real").json() == {"id": 1, "label": "tp", "source": "human"}
    e = _get(live, "/api/anomalies").json()["emits"][0]
    assert (e["label"], e["label_source"], e["label_note"]) == ("tp", "human", "real")
    # A second human label replaces the first (one per emit and source).
    assert _label(live, 1, "fp").status_code == 200
    assert live.store.counts()["tma1_anomaly_labels"] == 2
    assert _get(live, "/api/anomalies").json()["emits"][0]["label"] == "fp"
    # Clearing the human label lets the agent's show again.
    assert _label(live, 1, "clear").json() == {"id": 1, "label": None, "source": "human"}
    e = _get(live, "/api/anomalies").json()["emits"][0]
    assert (e["label"], e["label_source"]) == ("fp", "agent")
    assert live.store.counts()["tma1_anomaly_labels"] == 1


def test_label_errors(live: LiveServer, clock: ManualClock) -> None:
    live.store.insert_emits([emit_row(ts=clock.now_ms(), session_id="s", kind="test_stuck")])
    r = _label(live, 99, "tp")
    assert r.status_code == 404 and "99" in r.json()["detail"]
    for body in ({"label": "maybe"}, {"label": "tp", "source": "robot"}, {}):
        with live.client() as c:
            r = c.post("/api/anomalies/1/label", json=body)
        assert r.status_code == 422, body
    with live.client() as c:
        r = c.post("/api/anomalies/0/label", json={"label": "tp"})
        assert r.status_code == 422
        r = c.post("/api/anomalies/abc/label", json={"label": "tp"})
        assert r.status_code == 422
    assert live.store.counts()["tma1_anomaly_labels"] == 0


def test_label_post_from_another_origin_is_refused(live: LiveServer, clock: ManualClock) -> None:
    live.store.insert_emits([emit_row(ts=clock.now_ms(), session_id="s", kind="test_stuck")])
    with live.client() as c:
        for headers in (
            {"Origin": "https://evil.example"},
            {"Origin": "null"},
            {"Origin": f"http://localhost:{live.port + 1}"},
            {"Host": "evil.example"},
            {"Sec-Fetch-Site": "cross-site"},
        ):
            r = c.post("/api/anomalies/1/label", json={"label": "tp"}, headers=headers)
            assert r.status_code == 403, headers
        assert live.store.counts()["tma1_anomaly_labels"] == 0
        # The dashboard's own origin is fine.
        r = c.post(
            "/api/anomalies/1/label",
            json={"label": "tp"},
            headers={"Origin": f"http://127.0.0.1:{live.port}"},
        )
        assert r.status_code == 200
    assert live.store.counts()["tma1_anomaly_labels"] == 1


def test_kinds_lists_every_rule_of_the_registry_behind_the_token(live: LiveServer) -> None:
    r = _get(live, "/api/anomalies/kinds")
    assert r.status_code == 200, r.text
    kinds = r.json()["kinds"]
    assert [k["kind"] for k in kinds] == list(SPECS)
    by_kind = {k["kind"]: k for k in kinds}
    # What the specs say, as data: severities the rules emit, channels, follow actions.
    assert by_kind["stale_file_view"]["severities"] == ["high"]
    assert by_kind["build_broken_after_my_edit"]["severities"] == ["medium", "high"]
    assert by_kind["build_broken_after_my_edit"]["channels"] == ["stop_block", "user_prompt_submit"]
    assert by_kind["context_pressure"]["follow_action"] == SPECS["context_pressure"].follow_action
    assert by_kind["context_pressure"]["retold"] is False
    with live.client(token="") as c:
        assert c.get("/api/anomalies/kinds").status_code in (401, 403)


def test_budget_counts_per_kind_per_utc_day(live: LiveServer, clock: ManualClock) -> None:
    now = clock.now_ms()  # 2023-11-14 22:13:20 UTC
    today = (now // DAY_MS) * DAY_MS
    rows = []
    # stale_file_view: 6 today (over 5), 2 yesterday.
    rows += [
        emit_row(ts=today + i * HOUR, session_id="s", kind="stale_file_view") for i in range(6)
    ]
    rows += [emit_row(ts=today - 2 * HOUR, session_id="s", kind="stale_file_view")] * 2
    # test_stuck: exactly 5 three days ago (at the budget, not over).
    rows += [emit_row(ts=today - 3 * DAY_MS + 1, session_id="s", kind="test_stuck")] * 5
    # context_pressure: the first millisecond of the 7-day window counts...
    rows += [emit_row(ts=today - 6 * DAY_MS, session_id="s", kind="context_pressure")]
    # ...the last millisecond before it does not (10 of them would break the budget).
    rows += [emit_row(ts=today - 6 * DAY_MS - 1, session_id="s", kind="context_pressure")] * 10
    live.store.insert_emits(rows)
    r = _get(live, "/api/anomalies/budget", days=7, budget=5)
    assert r.status_code == 200, r.text
    b = r.json()
    assert b["budget"] == 5 and b["days"] == 7
    assert b["day_labels"] == [
        "2023-11-08",
        "2023-11-09",
        "2023-11-10",
        "2023-11-11",
        "2023-11-12",
        "2023-11-13",
        "2023-11-14",
    ]
    cell = {(d["day"], d["kind"]): (d["count"], d["over_budget"]) for d in b["per_day"]}
    assert len(cell) == 7 * len(SPECS)
    assert cell[("2023-11-14", "stale_file_view")] == (6, True)
    assert cell[("2023-11-13", "stale_file_view")] == (2, False)
    assert cell[("2023-11-11", "test_stuck")] == (5, False)
    assert cell[("2023-11-08", "context_pressure")] == (1, False)
    assert cell[("2023-11-14", "test_stuck")] == (0, False)
    k = b["kinds"]
    assert k["stale_file_view"] == {
        "total": 8,
        "max_per_day": 6,
        "days_over": 1,
        "pass": False,
        "status": "fail",
    }
    assert k["test_stuck"] == {
        "total": 5,
        "max_per_day": 5,
        "days_over": 0,
        "pass": True,
        "status": "pass",
    }
    assert k["context_pressure"]["total"] == 1
    assert k["repeated_failed_build"] == {
        "total": 0,
        "max_per_day": 0,
        "days_over": 0,
        "pass": True,
        "status": "pass",
    }
    assert b["pass"] is False
    # A budget of 6 lets stale_file_view pass; one day back only sees today.
    assert _get(live, "/api/anomalies/budget", budget=6).json()["pass"] is True
    one = _get(live, "/api/anomalies/budget", days=1).json()
    assert one["kinds"]["stale_file_view"]["total"] == 6
    assert one["kinds"]["test_stuck"]["total"] == 0


def test_precision_over_the_50_newest_labelled(live: LiveServer, clock: ManualClock) -> None:
    now = clock.now_ms()
    base = now - 2 * DAY_MS
    ts_rows = [
        emit_row(ts=base + i * 1000, session_id="p", kind="test_stuck", subject=f"t{i}")
        for i in range(60)
    ]
    ts_rows += [
        emit_row(ts=now - 2000, session_id="p", kind="stale_file_view", subject="/a"),
        emit_row(ts=now - 1000, session_id="p", kind="stale_file_view", subject="/b"),
        # Labelled, but older than the 7-day window: never counted.
        emit_row(ts=now - 8 * DAY_MS, session_id="p", kind="repeated_failed_build"),
        # Unlabelled: not in the sample.
        emit_row(ts=now - 500, session_id="p", kind="repeated_failed_build", subject="x"),
    ]
    live.store.insert_emits(ts_rows)
    # test_stuck ids 1..60 oldest → newest: 1-24 FP, 25-60 TP.
    for i in range(1, 61):
        assert _label(live, i, "fp" if i <= 24 else "tp").status_code == 200
    assert _label(live, 61, "tp").status_code == 200
    assert _label(live, 62, "fp").status_code == 200
    assert _label(live, 63, "fp").status_code == 200
    # Agent labels, side by side.
    for i, lab in ((61, "tp"), (62, "tp"), (60, "fp")):
        assert _label(live, i, lab, source="agent").status_code == 200

    p = _get(live, "/api/anomalies/precision", days=7).json()
    h = p["human"]
    # test_stuck: newest 50 = ids 11..60 → 14 FP (11-24) and 36 TP; all 60 would be 36/60.
    assert h["kinds"]["test_stuck"] == {
        "tp": 36,
        "fp": 14,
        "labelled": 50,
        "precision": 0.72,
        "pass": True,
        "status": "pass",
        "n": 50,
        "min_n": 10,
    }
    # Two labels are no sample: no verdict, "not enough data (n = 2)" — not a FAIL.
    assert h["kinds"]["stale_file_view"] == {
        "tp": 1,
        "fp": 1,
        "labelled": 2,
        "precision": 0.5,
        "pass": None,
        "status": "not_enough_data",
        "n": 2,
        "min_n": 10,
    }
    assert h["kinds"]["repeated_failed_build"]["labelled"] == 0
    assert h["kinds"]["repeated_failed_build"]["pass"] is None
    assert h["kinds"]["repeated_failed_build"]["status"] == "no_data"
    # Overall newest 50: ids 62, 61 and test_stuck 13..60 → FP 1 + 12, TP 1 + 36.
    assert h["overall"] == {
        "tp": 37,
        "fp": 13,
        "labelled": 50,
        "precision": 0.74,
        "pass": True,
        "status": "pass",
        "n": 50,
        "min_n": 10,
    }
    a = p["agent"]
    assert a["overall"] == {
        "tp": 2,
        "fp": 1,
        "labelled": 3,
        "precision": 0.6667,
        "pass": None,
        "status": "not_enough_data",
        "n": 3,
        "min_n": 10,
    }
    assert a["kinds"]["stale_file_view"]["precision"] == 1.0
    assert p["pass"] is True and p["target"] == 0.7
    assert (p["status"], p["min_labels"]) == ("pass", 10)

    # The sample to judge: newest emits without a human label.
    s = _get(live, "/api/anomalies/sample", n=5).json()["emits"]
    assert [e["id"] for e in s] == [64]
    assert _label(live, 64, "tp").status_code == 200
    assert _get(live, "/api/anomalies/sample").json()["emits"] == []
    agent_todo = _get(live, "/api/anomalies/sample", n=3, source="agent").json()["emits"]
    assert [e["id"] for e in agent_todo] == [64, 59, 58]


def test_sessions_list_and_timeline(live: LiveServer, clock: ManualClock) -> None:
    t0 = clock.now_ms() - HOUR
    a = Session(live.store, "sess-a", ts=t0, cwd="/work/proj")
    a.hook("SessionStart", source="startup").hook("UserPromptSubmit", prompt="fix it")
    a.read("/work/proj/a.py").bash("pytest -q", fail="Exit code 1\nFAILED t.py::x - no\n1 failed")
    a.emit("test_stuck", "t.py::x", ["/work/proj/t.py"]).edit("/work/proj/a.py").flush()
    b = Session(live.store, "sess-b", ts=t0 + 60_000, cwd="/work/other")
    b.read("/work/other/z.py").flush()

    r = _get(live, "/api/sessions")
    assert r.status_code == 200
    sessions = r.json()
    assert [s["session_id"] for s in sessions] == ["sess-b", "sess-a"]
    sa = sessions[1]
    assert sa["project"] == "/work/proj"
    assert sa["agent_source"] == "claude-code"
    assert sa["tool_calls"] == 3 and sa["failures"] == 1 and sa["anomalies"] == 1
    assert sa["start_ts"] == t0 + 1000
    # 2 hooks + 3 calls × 2 events = 8 events one second apart; the emit took a tick too.
    assert sa["duration_ms"] == 8000
    assert sessions[0]["anomalies"] == 0

    d = _get(live, "/api/sessions/sess-a").json()
    assert d["session"] == sa
    tl = d["timeline"]
    assert [i["type"] for i in tl] == ["event", "event", "tool", "tool", "tool"]
    assert [i.get("event") for i in tl[:2]] == ["SessionStart", "UserPromptSubmit"]
    read, bash, edit = tl[2:]
    assert (read["tool_name"], read["file"], read["failed"]) == ("Read", "/work/proj/a.py", False)
    assert (bash["command"], bash["failed"], bash["failure_kind"]) == ("pytest -q", True, "exit")
    assert bash["end_ts"] == bash["ts"] + 1000
    assert edit["failed"] is False
    assert [e["kind"] for e in d["emits"]] == ["test_stuck"]
    assert read["ts"] < d["emits"][0]["ts"] < edit["ts"]

    assert _get(live, "/api/sessions/nope").status_code == 404
    assert _get(live, "/api/sessions", limit=1).json()[0]["session_id"] == "sess-b"


def test_another_machines_emit_is_not_labelled_here(
    live: LiveServer, clock: ManualClock, db_url: str
) -> None:
    """On a team database labels are written where the emit was made (issue 30): the team
    scope shows another machine's emits, read-only."""
    other = Store.open(db_url, migrate=False, machine_id="m-other")
    try:
        other.insert_emits([emit_row(ts=clock.now_ms(), session_id="theirs", kind="test_stuck")])
    finally:
        other.close()
    live.store.insert_emits([emit_row(ts=clock.now_ms(), session_id="mine", kind="test_stuck")])
    team = {
        e["session_id"]: e["id"] for e in _get(live, "/api/anomalies", scope="team").json()["emits"]
    }
    r = _label(live, team["theirs"], "fp")
    assert r.status_code == 409
    detail = r.json()["detail"]
    assert f"emit {team['theirs']} was stored by machine m-other" in detail
    assert "label it on the machine" in detail
    assert _label(live, team["theirs"], "clear").status_code == 409
    assert _label(live, team["mine"], "tp").status_code == 200
    assert live.store.counts()["tma1_anomaly_labels"] == 1
