"""The dashboard's "team" box (issue 30): off, the Sessions tab lists this machine's
sessions only; on, every machine's of the shared database. A real headless Chromium
against a live server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from browserkit import CHROMIUM, chromium, login
from conftest import start_live_server

from tma1.clock import SystemClock
from tma1.config import Settings
from tma1.events import parse_payload
from tma1.store import Store

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is missing"),
]

sync_api = pytest.importorskip("playwright.sync_api")


def test_the_team_box_shows_every_machines_sessions(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tma1.db'}"
    settings = Settings(
        data_dir=tmp_path / "data", database_url=url, watch_files=False, machine_id="here"
    )
    srv = start_live_server(settings, clock=SystemClock())
    now = SystemClock().now_ms()
    other = Store.open(url, migrate=False, machine_id="elsewhere")
    errors: list[str] = []
    try:
        for store, sid in ((srv.store, "session-here"), (other, "session-elsewhere")):
            store.insert_events(
                [
                    parse_payload(
                        {"session_id": sid, "hook_event_name": "UserPromptSubmit", "cwd": "/w"},
                        ts=now,
                    )
                ]
            )
        with chromium() as browser:
            ctx = browser.new_context(viewport={"width": 1360, "height": 900})
            login(ctx, srv)  # reads need the session cookie (issue 31)
            pg: Any = ctx.new_page()
            pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            pg.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
            pg.goto(f"{srv.url}/?poll=1000#sessions")
            pg.wait_for_selector('tr.session-row[data-session="session-here"]')
            assert pg.locator('tr.session-row[data-session="session-elsewhere"]').count() == 0
            pg.locator("#team-scope").check()
            pg.wait_for_selector('tr.session-row[data-session="session-elsewhere"]')
            assert pg.locator('tr.session-row[data-session="session-here"]').count() == 1
    finally:
        other.close()
        srv.stop()
    assert errors == [], errors
