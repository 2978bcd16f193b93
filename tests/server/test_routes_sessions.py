"""`GET /api/sessions`: pages (offset) and a literal, case-insensitive search (q)."""

from __future__ import annotations

from conftest import LiveServer
from gateseed import Session

from tma1.clock import ManualClock
from tma1.store import Store


def test_sessions_page_and_search(live: LiveServer, clock: ManualClock) -> None:
    now = clock.now_ms()
    for i in range(7):
        Session(live.store, f"page-{i:02d}", ts=now - 100_000 + i * 1000, cwd=f"/w/Proj_{i}").bash(
            "ls"
        ).flush()
    with live.client() as c:

        def ids(**params: object) -> list[str]:
            r = c.get("/api/sessions", params=params)
            assert r.status_code == 200, r.text
            return [s["session_id"] for s in r.json()]

        assert ids(limit=3) == ["page-06", "page-05", "page-04"]
        assert ids(limit=3, offset=3) == ["page-03", "page-02", "page-01"]
        assert ids(limit=3, offset=6) == ["page-00"]
        assert ids(limit=3, offset=9) == []
        assert ids(q="PAGE-03") == ["page-03"]  # the id, any case
        assert ids(q="proj_5") == ["page-05"]  # the project path
        assert ids(q="%") == [] and ids(q="p_o") == []  # literal: "_" is no wildcard
        assert ids(q="  ") == ids()  # blank: no search
        assert c.get("/api/sessions", params={"offset": -1}).status_code == 422
        assert c.get("/api/sessions", params={"q": "x" * 201}).status_code == 422


def test_one_machines_session_of_a_shared_id(
    live: LiveServer, clock: ManualClock, db_url: str
) -> None:
    """`?machine=` opens that machine's session of an id two machines share (issue 30)."""
    other = Store.open(db_url, migrate=False, machine_id="m-other")
    try:
        Session(other, "same", ts=clock.now_ms() - 60_000).read("/w/a.py").bash("make").flush()
    finally:
        other.close()
    Session(live.store, "same", ts=clock.now_ms() - 30_000).read("/w/a.py").flush()
    with live.client() as c:
        own = c.get("/api/sessions/same").json()
        theirs = c.get("/api/sessions/same", params={"machine": "m-other"}).json()
        assert c.get("/api/sessions/same", params={"machine": "m-none"}).status_code == 404
    assert own["session"]["machine_id"] == live.service.store.machine_id
    assert own["session"]["tool_calls"] == 1
    assert theirs["session"]["machine_id"] == "m-other"
    assert theirs["session"]["tool_calls"] == 2
    assert {e["tool_name"] for e in theirs["timeline"]} >= {"Bash"}
