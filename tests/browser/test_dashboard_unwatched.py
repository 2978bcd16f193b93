"""The dashboard lists the projects the file watcher leaves out, and why (issue 31), as text:
a real headless Chromium against a live server with the watcher on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from browserkit import CHROMIUM, chromium, login
from conftest import start_live_server

from tma1.clock import SystemClock
from tma1.config import Settings

XSS = "/proc/<img src=x onerror=window.__xss=1>"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is missing"),
]

sync_api = pytest.importorskip("playwright.sync_api")


def test_unwatched_projects_are_listed_with_their_reason(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'tma1.db'}",
        watch_files=True,
    )
    srv = start_live_server(settings, clock=SystemClock())
    errors: list[str] = []
    try:
        for i, cwd in enumerate(("/sys", XSS)):
            payload = {"session_id": f"s{i}", "hook_event_name": "UserPromptSubmit", "cwd": cwd}
            assert srv.hook(payload).status_code == 200
        with chromium() as browser:
            ctx = browser.new_context()
            login(ctx, srv)  # reads need the session cookie (issue 31)
            pg: Any = ctx.new_page()
            pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            pg.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
            pg.goto(f"{srv.url}/#anomalies")
            box = pg.locator("#unwatched")
            box.wait_for(state="visible")
            items = pg.locator("#unwatched-list li").all_inner_texts()
            assert any(t.startswith("/sys — pseudo-filesystem: /sys is a kernel") for t in items)
            assert any(t.startswith(XSS) for t in items), items  # shown as text
            assert pg.evaluate("window.__xss") is None
            assert pg.locator("#unwatched img").count() == 0
    finally:
        srv.stop()
    assert errors == [], errors
