"""The dashboard in a real headless Chromium (Debian's), against a live tma1 server on a
real SQLite store seeded with hook events and emits. Screenshots of each tab go to
tests/screenshots/ (git-ignored)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import LiveServer, start_live_server

from tma1.clock import SystemClock
from tma1.config import Settings
from tma1.engine.anomaly import stable_key
from tma1.events import HookEvent, parse_payload
from tma1.store import Store

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = Path(__file__).resolve().parent.parent / "screenshots"
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
XSS = '<img src=x onerror="window.__xss=1">'

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is missing"),
]

sync_api = pytest.importorskip("playwright.sync_api")


# --- seeding ---------------------------------------------------------------------------------


class Seeder:
    def __init__(self, store: Store, session_id: str, ts: int, cwd: str) -> None:
        self.store, self.sid, self.ts, self.cwd = store, session_id, ts, cwd
        self.events: list[HookEvent] = []
        self.n = 0

    def _ev(self, name: str, **extra: Any) -> None:
        self.ts += 7_000
        payload = {"session_id": self.sid, "hook_event_name": name, "cwd": self.cwd, **extra}
        self.events.append(parse_payload(payload, ts=self.ts))

    def call(self, tool: str, fail: str | None = None, **tool_input: Any) -> Seeder:
        self.n += 1
        common = {"tool_name": tool, "tool_input": tool_input, "tool_use_id": f"{self.sid}{self.n}"}
        self._ev("PreToolUse", **common)
        if fail:
            self._ev("PostToolUseFailure", error=fail, **common)
        else:
            self._ev("PostToolUse", tool_response={"stdout": "ok"}, **common)
        return self

    def emit(self, kind: str, severity: str, subject: str, evidence: str, **kw: Any) -> Seeder:
        self.ts += 3_000
        self.store.insert_emits([emit(self.ts, self.sid, kind, severity, subject, evidence, **kw)])
        return self

    def flush(self) -> None:
        self.store.insert_events(self.events)
        self.events = []


def emit(
    ts: int,
    sid: str,
    kind: str,
    severity: str,
    subject: str,
    evidence: str,
    related: list[str] | None = None,
    suggestion: str | None = None,
    channel: str | None = None,
) -> dict[str, Any]:
    return {
        "ts": ts,
        "session_id": sid,
        "kind": kind,
        "severity": severity,
        "channel": channel or ("stop_block" if severity == "high" else "user_prompt_submit"),
        "evidence": evidence,
        "suggestion": suggestion or f"Re-read {subject or 'the session'} before continuing.",
        "related_files": related if related is not None else ([subject] if subject else []),
        "first_emitted_at": ts - 60_000,
        "stable_key": stable_key(kind, severity, subject),
    }


SEEDED: dict[str, Any] = {}


def seed(store: Store) -> None:
    now = SystemClock().now_ms()
    day = 86_400_000
    web = "/home/dev/webapp"
    a = Seeder(store, "9f1c2e7a-web-session", now - 40 * 60_000, web)
    a.call("Read", file_path=f"{web}/src/cart.ts").call("Edit", file_path=f"{web}/src/cart.ts")
    tsc = "Exit code 2\nsrc/cart.ts(41,7): error TS2322: Type 'string' is not assignable"
    a.call("Bash", fail=tsc, command="npm run build").call(
        "Bash", fail=tsc, command="npm run build"
    )
    a.emit(
        "build_broken_after_my_edit",
        "medium",
        "npm run build",
        "`npm run build` failed 2× after your edit of src/cart.ts: error TS2322 at cart.ts:41",
        related=[f"{web}/src/cart.ts"],
        suggestion="Read src/cart.ts around line 41 and fix the type before running the build.",
    )
    a.call("Read", file_path=f"{web}/src/cart.ts").call("Edit", file_path=f"{web}/src/cart.ts")
    vt = "Exit code 1\n FAIL src/cart.test.ts\n ✕ adds items (5 ms)\nTests: 1 failed"
    for _ in range(3):
        a.call("Bash", fail=vt, command="npx vitest run src/cart.test.ts")
    a.emit(
        "test_stuck",
        "medium",
        "src/cart.test.ts",
        "src/cart.test.ts failed 3 times in 30 min with the same assertion",
        suggestion="Stop re-running: read the test and the assertion it makes.",
    )
    a.call("Read", file_path=f"{web}/src/cart.test.ts")
    a.emit(
        "stale_file_view",
        "high",
        f"{web}/src/api.ts",
        "You edited src/api.ts, but it changed on disk after your last Read (12:03:41).",
        channel="user_prompt_submit",
    )
    a.emit(
        "external_modified_during_session",
        "medium",
        "",
        XSS,
        related=['"><svg onload=window.__xss3=1>', f"{web}/package.json"],
        suggestion="<script>window.__xss2=1</script>",
    )
    a.call("Edit", file_path=f"{web}/src/api.ts").call("Bash", command="git status")
    a.flush()

    api = "/home/dev/payments-api"
    b = Seeder(store, "c4d81b09-api-session", now - 25 * 60_000, api)
    mk = "Exit code 2\nmake: *** [Makefile:12: test] Error 1"
    for _ in range(3):
        b.call("Bash", fail=mk, command="make test")
    b.emit(
        "repeated_failed_build",
        "high",
        "make test",
        "`make test` failed 3 times in the last 30 min with the same error",
        related=[],
        suggestion="Read the first error of `make test` instead of re-running it.",
    )
    b.call("Read", file_path=f"{api}/Makefile")
    b.emit(
        "context_pressure",
        "medium",
        "",
        "Context is at 131,072 tokens (threshold 100,000).",
        related=[],
        suggestion="Commit your work and compact the conversation.",
    )
    b.call("Bash", command="git commit -am 'wip'")
    b.flush()

    # History for the Gates tab: test_stuck over budget two days ago.
    older = [
        emit(now - 2 * day - i * 60_000, "old-session", "test_stuck", "medium", f"t{i}", "old")
        for i in range(7)
    ]
    older += [
        emit(now - 1 * day - i * 60_000, "old-session", "stale_file_view", "high", "/x", "old")
        for i in range(3)
    ]
    store.insert_emits(older)
    SEEDED.update(total=6 + len(older), high=2 + 3, web=4, api=2)


# --- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("dash")
    settings = Settings(
        data_dir=root / "data",
        database_url=f"sqlite:///{root / 'tma1.db'}",
        watch_files=False,
    )
    srv = start_live_server(settings)
    seed(srv.store)
    # Labels for the precision gate: one human TP, one agent FP.
    with srv.client() as c:
        assert c.post("/api/anomalies/9/label", json={"label": "tp"}).status_code == 200
        assert (
            c.post("/api/anomalies/10/label", json={"label": "fp", "source": "agent"}).status_code
            == 200
        )
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1360, "height": 900}, color_scheme="light")
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    pg.on("dialog", lambda d: (errors.append(f"dialog: {d.message}"), d.dismiss()))
    pg.console_errors = errors  # type: ignore[attr-defined]
    yield pg
    ctx.close()
    assert errors == [], errors


def shot(pg: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    pg.wait_for_timeout(700)  # let colour transitions (fresh rows, dark mode) settle
    pg.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def api_count(server: LiveServer, **params: str) -> int:
    """What the emit log holds now (other tests in this module add emits)."""
    r = httpx.get(f"{server.url}/api/anomalies", params={"limit": "200", **params})
    return len(r.json()["emits"])


def rows(pg: Any) -> Any:
    return pg.locator("#emits-body tr.emit")


# --- tests -------------------------------------------------------------------------------------


def test_anomalies_tab_shows_seeded_emits_without_console_errors(
    server: LiveServer, page: Any
) -> None:
    page.goto(server.url + "/")
    page.wait_for_selector("#emits-body tr.emit")
    assert rows(page).count() == api_count(server)
    assert rows(page).count() >= SEEDED["total"]
    assert page.locator("#tab-anomalies").get_attribute("aria-selected") == "true"
    first = rows(page).first  # newest first
    assert "Context is at 131,072 tokens" in first.inner_text()
    row = page.locator('tr.emit[data-kind="build_broken_after_my_edit"]')
    assert "error TS2322" in row.inner_text()
    row.click()
    detail = page.locator("tr.emit-detail:visible")
    assert detail.count() == 1
    text = detail.inner_text()
    for piece in (
        "Read src/cart.ts around line 41",
        "/home/dev/webapp/src/cart.ts",
        "user_prompt_submit",
        "First emitted at",
        "build_broken_after_my_edit|medium|npm run build",
    ):
        assert piece in text
    assert page.locator("#status-dot.ok").count() == 1
    shot(page, "anomalies")
    page.emulate_media(color_scheme="dark")
    shot(page, "anomalies-dark")


def test_filters_narrow_the_list(server: LiveServer, page: Any) -> None:
    page.goto(server.url + "/#anomalies")
    page.wait_for_selector("#emits-body tr.emit")
    high = api_count(server, severity="high")
    assert high >= SEEDED["high"]
    page.select_option("#f-severity", "high")
    page.wait_for_function(
        "n => document.querySelectorAll('#emits-body tr.emit').length === n", arg=high
    )
    sev = rows(page).evaluate_all("rs => rs.map(r => r.dataset.severity)")
    assert set(sev) == {"high"}
    page.select_option("#f-kind", "stale_file_view")
    n = api_count(server, severity="high", kind="stale_file_view")
    assert 0 < n < high
    page.wait_for_function(
        "n => document.querySelectorAll('#emits-body tr.emit').length === n", arg=n
    )
    page.select_option("#f-severity", "")
    page.select_option("#f-kind", "")
    page.fill("#f-session", "c4d81b09-api-session")
    page.wait_for_function(
        "n => document.querySelectorAll('#emits-body tr.emit').length === n", arg=SEEDED["api"]
    )
    kinds = rows(page).evaluate_all("rs => rs.map(r => r.dataset.kind)")
    assert kinds == ["context_pressure", "repeated_failed_build"]
    page.fill("#f-session", "no-such-session")
    page.wait_for_selector("#anomalies-empty:not([hidden])")
    assert "No anomalies match" in page.inner_text("#anomalies-empty")


def test_new_emit_appears_within_12s_on_the_default_poll(server: LiveServer, page: Any) -> None:
    page.goto(server.url + "/")
    page.wait_for_selector("#emits-body tr.emit")
    assert page.evaluate("document.body.dataset.poll") == "10000"
    page.evaluate("window.__sameDocument = true")
    before = rows(page).count()
    now = SystemClock().now_ms()
    server.store.insert_emits(
        [
            emit(
                now,
                "live-session",
                "stale_file_view",
                "high",
                "/home/dev/webapp/src/live.ts",
                "Fresh finding written while the page is open",
            )
        ]
    )
    started = time.monotonic()
    page.wait_for_selector("tr.emit.fresh", timeout=12_000)
    waited = time.monotonic() - started
    assert rows(page).count() == before + 1
    assert "Fresh finding written while the page is open" in rows(page).first.inner_text()
    assert page.evaluate("window.__sameDocument") is True  # no reload happened
    print(f"new emit visible after {waited:.1f}s")


def test_tp_click_persists_across_reload(server: LiveServer, page: Any) -> None:
    page.goto(server.url + "/")
    row = page.locator('tr.emit[data-kind="repeated_failed_build"]')
    row.wait_for()
    emit_id = int(row.get_attribute("data-id"))
    tp = row.locator("button.lbl-tp")
    assert tp.get_attribute("aria-pressed") == "false"
    tp.click()
    page.wait_for_function(
        "id => document.querySelector(`tr.emit[data-id='${id}'] button.lbl-tp`)"
        ".getAttribute('aria-pressed') === 'true'",
        arg=emit_id,
    )
    # Clicking the button must not toggle the row open.
    assert row.get_attribute("aria-expanded") == "false"
    api = httpx.get(f"{server.url}/api/anomalies", params={"kind": "repeated_failed_build"}).json()
    assert (api["emits"][0]["label"], api["emits"][0]["label_source"]) == ("tp", "human")
    page.reload()
    row = page.locator(f'tr.emit[data-id="{emit_id}"]')
    row.wait_for()
    assert row.locator("button.lbl-tp").get_attribute("aria-pressed") == "true"
    assert row.locator("button.lbl-fp").get_attribute("aria-pressed") == "false"
    # FP replaces TP; a second click on FP clears it again.
    row.locator("button.lbl-fp").click()
    page.wait_for_function(
        "id => document.querySelector(`tr.emit[data-id='${id}']`).dataset.label === 'fp'",
        arg=emit_id,
    )
    row.locator("button.lbl-fp").click()
    page.wait_for_function(
        "id => document.querySelector(`tr.emit[data-id='${id}']`).dataset.label === ''",
        arg=emit_id,
    )
    api = httpx.get(f"{server.url}/api/anomalies", params={"kind": "repeated_failed_build"}).json()
    assert api["emits"][0]["label"] is None


def test_html_in_evidence_is_shown_as_text_and_runs_nothing(server: LiveServer, page: Any) -> None:
    page.goto(server.url + "/")
    row = page.locator('tr.emit[data-kind="external_modified_during_session"]')
    row.wait_for()
    assert row.locator(".evidence").text_content() == XSS
    row.click()
    detail = page.locator("tr.emit-detail:visible")
    assert detail.locator("pre.evidence-full").text_content() == XSS
    assert "<script>window.__xss2=1</script>" in detail.inner_text()
    assert '"><svg onload=window.__xss3=1>' in detail.inner_text()
    page.wait_for_timeout(500)  # give a would-be onerror handler time to fire
    assert page.locator("main img, main svg[onload], main script").count() == 0
    assert page.evaluate("[window.__xss, window.__xss2, window.__xss3]") == [None, None, None]
    shot(page, "anomalies-expanded")


def test_sessions_list_and_timeline_markers(server: LiveServer, page: Any) -> None:
    page.goto(server.url + "/?poll=1000#sessions")
    page.wait_for_selector("#sessions-body tr.session-row")
    projects = page.locator("#sessions-body .project").all_inner_texts()
    assert projects[:2] == ["/home/dev/payments-api", "/home/dev/webapp"]
    row = page.locator('tr.session-row[data-session="9f1c2e7a-web-session"]')
    cells = row.locator("td").all_inner_texts()
    assert cells[4:] == ["12", "5", "4"]  # tool calls, failures, anomalies
    shot(page, "sessions")
    row.click()
    page.wait_for_selector(".timeline .tl-tool")
    assert page.locator(".timeline .tl-marker.anomaly").count() == 4
    assert page.locator(".timeline .tl-tool.failed").count() == 5
    assert page.locator(".timeline .tl-tool").count() == 12
    assert page.locator("ol.events li.ev-anomaly").count() == 4
    # A marker leads to its finding in the list below.
    marker = page.locator(".timeline .tl-marker.anomaly").first
    emit_id = marker.get_attribute("data-id")
    marker.click()
    page.wait_for_selector(f'li.ev-anomaly.flash[data-id="{emit_id}"]')
    shot(page, "session-timeline")
    # A new failing call and a finding show up on the open timeline (10 s poll, 1 s here).
    s = Seeder(server.store, "9f1c2e7a-web-session", SystemClock().now_ms(), "/home/dev/webapp")
    s.call("Bash", fail="Exit code 1\nboom", command="npm test")
    s.emit("test_stuck", "medium", "src/x.test.ts", "x failed 3 times")
    s.flush()
    page.wait_for_function(
        "() => document.querySelectorAll('.timeline .tl-marker.anomaly').length === 5",
        timeout=12_000,
    )
    assert page.locator(".timeline .tl-tool.failed").count() == 6


def test_gates_tab_shows_pass_and_fail(server: LiveServer, page: Any) -> None:
    page.goto(server.url + "/#gates")
    page.wait_for_selector("#gate-cards article.card")
    assert page.locator("#gate-cards article.card").count() == 6
    stuck = page.locator('article.card[data-kind="test_stuck"]')
    assert stuck.locator('[data-gate="budget"] .chip').inner_text().lower() == "fail"
    assert stuck.locator("svg.budget-chart rect.bar.over").count() == 1
    assert stuck.locator("svg.budget-chart line.budget-line").count() == 1
    cp = page.locator('article.card[data-kind="context_pressure"]')
    assert cp.locator('[data-gate="budget"] .chip').inner_text().lower() == "pass"
    assert cp.locator('[data-gate="follow-rate"] .chip').inner_text().lower() == "pass"
    summary = page.locator("#gate-summary .summary-card").all_inner_texts()
    assert "FAIL" in summary[0].upper()
    shot(page, "gates")
    page.emulate_media(color_scheme="dark")
    shot(page, "gates-dark")
    # Raising the budget to 7 makes the budget gate pass.
    page.fill("#g-budget", "7")
    page.dispatch_event("#g-budget", "change")
    page.wait_for_function(
        "() => document.querySelector('#gate-summary .summary-card').classList.contains('pass')"
    )


def test_empty_state_explains_how_to_wire_an_agent(browser: Any, tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'empty.db'}",
        watch_files=False,
    )
    srv = start_live_server(settings)
    ctx = browser.new_context(viewport={"width": 1360, "height": 700})
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        for tab in ("anomalies", "sessions", "gates"):
            pg.goto(f"{srv.url}/#{tab}")
            box = pg.locator(f"#{tab}-empty")
            box.wait_for(state="visible")
            assert "tma1 install --adapter claude-code" in box.inner_text()
            if tab == "anomalies":
                shot(pg, "empty")
    finally:
        ctx.close()
        srv.stop()
    assert errors == []
