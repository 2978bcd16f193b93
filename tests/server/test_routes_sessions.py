"""`GET /api/sessions`: pages (offset) and a literal, case-insensitive search (q)."""

from __future__ import annotations

from conftest import LiveServer
from gateseed import Session

from tma1.clock import ManualClock


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
