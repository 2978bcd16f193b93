"""`GET /api/anomalies/{id}/delivered`: the text the agent was given, rebuilt from the emit
log, is byte for byte the hook's answer — checked against real hook answers."""

from __future__ import annotations

import json
from typing import Any

from conftest import LiveServer
from enginekit import bash_fail, prompt, stop

from tma1.clock import ManualClock

PYTEST = "pytest -q tests/test_calc.py"
PYTEST_OUT = (
    "Exit code 1\nF.\n=== FAILURES ===\nE       assert 3 == 4\n"
    "FAILED tests/test_calc.py::test_add - assert 3 == 4\n1 failed, 1 passed in 0.02s"
)


def _post(live: LiveServer, clock: ManualClock, data: dict[str, Any]) -> str:
    clock.advance(1_000)
    r = live.hook(data)
    assert r.status_code == 200
    return r.text


def test_delivered_text_is_the_answer_the_agent_got(live: LiveServer, clock: ManualClock) -> None:
    sid = "delivered-1"
    for _ in range(3):
        _post(live, clock, bash_fail(sid, PYTEST, PYTEST_OUT))
    digest = _post(live, clock, prompt(sid))
    # Claude Code's Stop answer carries the reason as additionalContext (docs/hooks.md).
    answer = json.loads(_post(live, clock, stop(sid)))
    reason = answer["hookSpecificOutput"]["additionalContext"]
    assert live.service.delivery.flush()
    rows = {r["kind"]: r for r in live.store.emits_since(0) if r["session_id"] == sid}
    assert set(rows) == {"test_stuck", "repeated_failed_build"}
    with live.client() as c:
        d = c.get(f"/api/anomalies/{rows['test_stuck']['id']}/delivered").json()
        s = c.get(f"/api/anomalies/{rows['repeated_failed_build']['id']}/delivered").json()
        missing = c.get("/api/anomalies/999999/delivered")
        bad = c.get("/api/anomalies/0/delivered")
    assert (d["as"], d["channel"], d["text"]) == ("digest", "user_prompt_submit", digest)
    assert d["delivered_with"] == [rows["test_stuck"]["id"]]
    assert (s["as"], s["channel"], s["text"]) == ("stop_reason", "stop_block", reason)
    assert missing.status_code == 404 and bad.status_code == 422


def test_findings_of_one_answer_are_rebuilt_together(live: LiveServer, clock: ManualClock) -> None:
    """Two findings delivered in one digest: each emit shows the whole digest."""
    from tma1.engine.anomaly import stable_key

    now = clock.now_ms()
    rows = [
        {
            "ts": now,
            "session_id": "together",
            "kind": kind,
            "severity": "medium",
            "channel": "user_prompt_submit",
            "evidence": f"{kind} evidence",
            "suggestion": f"do something about {kind}",
            "related_files": ["/r/a.py"],
            "first_emitted_at": now,
            "stable_key": stable_key(kind, "medium", ""),
        }
        for kind in ("test_stuck", "context_pressure")
    ]
    live.store.insert_emits(rows)
    with live.client() as c:
        ids = [
            e["id"]
            for e in c.get("/api/anomalies", params={"session_id": "together"}).json()["emits"]
        ]
        got = [c.get(f"/api/anomalies/{i}/delivered").json() for i in sorted(ids)]
    assert got[0]["text"] == got[1]["text"]
    assert got[0]["delivered_with"] == sorted(ids)
    text = got[0]["text"]
    assert text.startswith("<tma1-context>") and "has 2 findings" in text
    assert text.index("1. [medium] test_stuck") < text.index("2. [medium] context_pressure")
