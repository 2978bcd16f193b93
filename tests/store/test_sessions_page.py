"""The session list's page (store/sessions.list_sessions) is read from the newest events
first, widening the ts range until it holds the page: the same page, order and spans as a
grouping of every event, on SQLite and PostgreSQL."""

from __future__ import annotations

from tma1.events import parse_payload
from tma1.store import Store
from tma1.store.sessions import list_sessions

HOUR = 3_600_000
DAY = 24 * HOUR
NOW = 400 * DAY


def _at(store: Store, sid: str, *ts: int, cwd: str = "/w/app") -> None:
    store.insert_events(
        [
            parse_payload(
                {
                    "session_id": sid,
                    "hook_event_name": "UserPromptSubmit",
                    "cwd": cwd,
                    "prompt": "p",
                },
                ts=t,
            )
            for t in ts
        ]
    )


def test_pages_by_newest_event_with_whole_spans(db_url: str) -> None:
    st = Store.open(db_url, machine_id="m-a")
    try:
        # Each session's newest event lies in another step of the widening range; "long"
        # began 50 days ago and is active now, so its start is outside every narrow range.
        _at(st, "long", NOW - 50 * DAY, NOW - 10 * DAY, NOW - 10 * 60_000)
        _at(st, "today", NOW - 5 * HOUR, NOW - 3 * HOUR)
        _at(st, "week", NOW - 4 * DAY)
        _at(st, "month", NOW - 20 * DAY)
        _at(st, "old", NOW - 90 * DAY, NOW - 80 * DAY, cwd="/w/other")
        _at(st, "newest", NOW)

        def page(**kw: object) -> list[tuple[str, int, int]]:
            return [(s["session_id"], s["start_ts"], s["last_ts"]) for s in list_sessions(st, **kw)]  # type: ignore[arg-type]

        everything = [
            ("newest", NOW, NOW),
            ("long", NOW - 50 * DAY, NOW - 10 * 60_000),
            ("today", NOW - 5 * HOUR, NOW - 3 * HOUR),
            ("week", NOW - 4 * DAY, NOW - 4 * DAY),
            ("month", NOW - 20 * DAY, NOW - 20 * DAY),
            ("old", NOW - 90 * DAY, NOW - 80 * DAY),
        ]
        assert page() == everything
        assert page(limit=2) == everything[:2]
        assert page(limit=3) == everything[:3]
        assert page(limit=2, offset=3) == everything[3:5]
        assert page(limit=10, offset=5) == everything[5:]
        assert page(since_ts=NOW - 7 * DAY) == everything[:4]
        assert page(since_ts=NOW - 30 * DAY, limit=1, offset=4) == [everything[4]]
        assert page(since_ts=NOW - 30 * DAY, limit=1, offset=5) == []
        assert page(since_ts=NOW - 30 * DAY, limit=2, offset=3) == everything[3:5]
        assert page(search="other") == everything[5:]
        assert page(session_id="long") == [everything[1]]
    finally:
        st.close()
