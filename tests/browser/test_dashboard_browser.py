"""The dashboard in a real headless Chromium (Debian's), against a live tma1 server on a
real SQLite store seeded with hook events and emits. Screenshots of each tab go to
tests/screenshots/ (git-ignored)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import browserkit
import pytest
from browserkit import CHROMIUM, chromium
from conftest import LiveServer, start_live_server

from tma1.auth.hooktoken import login_code
from tma1.clock import SystemClock
from tma1.config import Settings
from tma1.engine.anomaly import stable_key
from tma1.engine.rules import SPECS
from tma1.events import HookEvent, parse_payload
from tma1.store import Store

SHOTS = Path(__file__).resolve().parent.parent / "screenshots"
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

    # A session with a sub-agent lane and three findings delivered in one answer (one
    # instant): their markers must not stack into one unclickable spot.
    proj = "/home/dev/monorepo"
    c = Seeder(store, "b0a7c3d1-busy-session", now - 120 * 60_000, proj)
    c.call("Read", file_path=f"{proj}/README.md").call("Bash", command="make lint")
    c._ev("SubagentStart", agent_id="agent-7f3e", agent_type="Explore")
    for f in ("a.py", "b.py", "c.py"):
        c.n += 1
        common = {
            "tool_name": "Read",
            "tool_input": {"file_path": f"{proj}/{f}"},
            "tool_use_id": f"busy-sub-{c.n}",
            "agent_id": "agent-7f3e",
            "agent_type": "Explore",
        }
        c._ev("PreToolUse", **common)
        c._ev("PostToolUse", tool_response={"stdout": "ok"}, **common)
    c.call("Bash", fail="Exit code 1\nE   assert 1 == 2", command="pytest -q")
    c.ts += 3_000
    together = [
        emit(c.ts, c.sid, kind, "medium", subj, f"{kind}: seen three times", related=[])
        for kind, subj in (
            ("test_stuck", "tests/test_x.py::t"),
            ("test_stuck", "tests/test_y.py::t"),
            ("context_pressure", ""),
        )
    ]
    for row in together:
        row["channel"] = "user_prompt_submit"
    store.insert_emits(together)
    c.call("Read", file_path=f"{proj}/tests/test_x.py")
    c.flush()

    # Many older sessions: the list pages (50 a page) and searches.
    bulk = []
    for i in range(60):
        ts = now - 3 * day - i * 60_000
        bulk.append(
            parse_payload(
                {
                    "session_id": f"bulk-{i:03d}",
                    "hook_event_name": "UserPromptSubmit",
                    "cwd": f"/home/dev/bulk-{i:03d}",
                    "prompt": "hi",
                },
                ts=ts,
            )
        )
    store.insert_events(bulk)
    SEEDED.update(total=6 + len(older) + 3, high=2 + 3, web=4, api=2, busy=3, sessions=63)


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
    with chromium() as b:
        yield b


def login(ctx: Any, srv: LiveServer) -> None:
    r = browserkit.login(ctx, srv)
    assert r.url == srv.url + "/", r.url
    assert any(c["name"] == "tma1_session" and c["httpOnly"] for c in ctx.cookies())


@pytest.fixture
def page(browser: Any, server: LiveServer) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1360, "height": 900}, color_scheme="light")
    login(ctx, server)
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    pg.on("dialog", lambda d: (errors.append(f"dialog: {d.message}"), d.dismiss()))
    pg.console_errors = errors  # type: ignore[attr-defined]
    yield pg
    ctx.close()
    assert errors == [], errors


def shot(pg: Any, name: str, *, top: bool = False) -> None:
    """A full-page screenshot (and with `top`, one of the first screenful too)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    pg.wait_for_timeout(700)  # let colour transitions (fresh rows, dark mode) settle
    pg.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
    if top:
        pg.screenshot(path=str(SHOTS / f"{name}-top.png"))


def api_count(server: LiveServer, **params: str) -> int:
    """What the emit log holds now (other tests in this module add emits)."""
    r = server.client().get("/api/anomalies", params={"limit": "200", **params})
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
    # The kind filter offers every rule of the registry, as GET /api/anomalies/kinds says.
    options = page.eval_on_selector_all("#f-kind option", "os => os.map(o => o.value)")
    assert options == ["", *SPECS]
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
    api = server.client().get("/api/anomalies", params={"kind": "repeated_failed_build"}).json()
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
    api = server.client().get("/api/anomalies", params={"kind": "repeated_failed_build"}).json()
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
    # The delivered digest quotes the evidence: as text too.
    delivered = detail.locator("pre.delivered")
    page.wait_for_function(
        "el => el.textContent.includes('</tma1-context>')", arg=delivered.element_handle()
    )
    assert XSS in delivered.text_content()
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
    assert page.locator("#gate-cards article.card").count() == len(SPECS)  # one card a rule
    stuck = page.locator('article.card[data-kind="test_stuck"]')
    assert stuck.locator('[data-gate="budget"] .chip').inner_text().lower() == "fail"
    assert stuck.locator("svg.budget-chart rect.bar.over").count() == 1
    assert stuck.locator("svg.budget-chart line.budget-line").count() == 1
    cp = page.locator('article.card[data-kind="context_pressure"]')
    assert cp.locator('[data-gate="budget"] .chip').inner_text().lower() == "pass"
    # Two emits are no sample: the follow-rate says so instead of a red FAIL.
    assert cp.locator('[data-gate="follow-rate"] .chip').inner_text() == "not enough data (n = 2)"
    # One human TP and one agent FP: precision has no verdict anywhere.
    prec = page.locator('#gate-cards [data-gate="precision"] .chip').all_inner_texts()
    assert "fail" not in [t.lower() for t in prec], prec
    summary = page.locator("#gate-summary .summary-card").all_inner_texts()
    assert "FAIL" in summary[0].upper()
    assert "not enough data (n = 1)" in summary[2]
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
    login(ctx, srv)
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


# --- issue 17: reviewing, timeline, layout, URL state, outages ------------------------------

WIDTHS = [1400, 800, 420, 390]
NO_SIDEWAYS = "document.scrollingElement.scrollWidth <= window.innerWidth"


def overlaps(boxes: list[dict[str, float]]) -> list[tuple[int, int]]:
    """Index pairs of boxes that overlap by more than half a pixel both ways."""
    out = []
    for i, a in enumerate(boxes):
        for j in range(i + 1, len(boxes)):
            b = boxes[j]
            dx = min(a["x"] + a["width"], b["x"] + b["width"]) - max(a["x"], b["x"])
            dy = min(a["y"] + a["height"], b["y"] + b["height"]) - max(a["y"], b["y"])
            if dx > 0.5 and dy > 0.5:
                out.append((i, j))
    return out


def visible_boxes(pg: Any, selector: str) -> list[dict[str, float]]:
    loc = pg.locator(selector)
    boxes = []
    for i in range(loc.count()):
        box = loc.nth(i).bounding_box()
        if box and box["width"] > 0 and box["height"] > 0:
            boxes.append(box)
    return boxes


def assert_no_sideways_scroll(pg: Any) -> None:
    sizes = pg.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
    assert pg.evaluate(NO_SIDEWAYS), f"page scrolls sideways: scrollWidth, innerWidth = {sizes}"


@pytest.fixture
def sized(browser: Any, server: LiveServer, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A page at the width given by the test's `width` parameter (dark for 390 px)."""
    width = request.node.callspec.params["width"]
    scheme = "dark" if width == 390 else "light"
    ctx = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    login(ctx, server)
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    yield pg
    ctx.close()
    assert errors == [], errors


@pytest.mark.parametrize("width", WIDTHS)
def test_layout_has_no_overlap_and_no_sideways_scroll(
    server: LiveServer, sized: Any, width: int
) -> None:
    pg = sized
    pg.goto(server.url + "/#anomalies")
    pg.wait_for_selector("#emits-body tr.emit")
    headers = visible_boxes(pg, "#emits-table thead th")
    assert overlaps(headers) == [], headers
    if width <= 600:
        assert headers == []  # phones: rows are cards, no header row to collide
    else:
        assert len(headers) >= 5
    # Emit ids are in the table (the CLI labels by id).
    first = rows(pg).first
    assert first.locator("td.c-id").inner_text() == f"#{first.get_attribute('data-id')}"
    cells = visible_boxes(pg, "#emits-body tr.emit:first-child td")
    assert overlaps(cells) == [], cells
    assert_no_sideways_scroll(pg)
    rows(pg).first.click()
    pg.wait_for_selector("tr.emit-detail:visible pre.delivered:not(:text('loading…'))")
    assert_no_sideways_scroll(pg)
    if width > 600:
        # With a row open the header still spans the table (no empty columns eat the width).
        headers = visible_boxes(pg, "#emits-table thead th")
        table = pg.locator("#emits-table").bounding_box()
        right = max(h["x"] + h["width"] for h in headers)
        assert abs(table["x"] + table["width"] - right) <= 2, (table, headers)
    shot(pg, f"w{width}-anomalies", top=True)

    pg.goto(server.url + "/#gates")
    pg.wait_for_selector("#gate-cards article.card")
    assert overlaps(visible_boxes(pg, "#gate-summary .summary-card")) == []
    assert overlaps(visible_boxes(pg, "#gate-cards article.card")) == []
    assert_no_sideways_scroll(pg)
    shot(pg, f"w{width}-gates", top=True)

    pg.goto(server.url + "/#sessions")
    pg.wait_for_selector("#sessions-body tr.session-row")
    assert overlaps(visible_boxes(pg, "#sessions-table thead th")) == []
    assert overlaps(visible_boxes(pg, "#sessions-body tr.session-row:first-child td")) == []
    assert_no_sideways_scroll(pg)
    shot(pg, f"w{width}-sessions", top=True)

    pg.goto(server.url + "/#sessions/b0a7c3d1-busy-session")
    pg.wait_for_selector(".timeline .tl-marker.anomaly")
    markers = visible_boxes(pg, ".timeline .tl-marker.anomaly")
    assert len(markers) == SEEDED["busy"]
    assert overlaps(markers) == [], markers
    # … and they sit inside the timeline strip, in the anomaly lane, above the tool lanes.
    strip = pg.locator(".timeline").bounding_box()
    lane = pg.locator(".timeline .lane-anomalies").bounding_box()
    tools = pg.locator(".timeline .lane-tools").first.bounding_box()
    for m in markers:
        assert strip["x"] <= m["x"] and m["x"] + m["width"] <= strip["x"] + strip["width"]
        assert lane["y"] <= m["y"] and m["y"] + m["height"] <= lane["y"] + lane["height"], (
            m,
            lane,
        )
        assert m["y"] + m["height"] <= tools["y"] + 0.5
    # Each marker is clickable where it is drawn: the topmost element at its centre is it.
    for i in range(SEEDED["busy"]):
        m = pg.locator(".timeline .tl-marker.anomaly").nth(i)
        emit_id = m.get_attribute("data-id")
        b = m.bounding_box()
        hit = pg.evaluate(
            "([x, y]) => { const e = document.elementFromPoint(x, y);"
            " return e && e.closest('.tl-marker') ? e.closest('.tl-marker').dataset.id : null; }",
            [b["x"] + b["width"] / 2, b["y"] + b["height"] / 2],
        )
        assert hit == emit_id
    assert_no_sideways_scroll(pg)
    shot(pg, f"w{width}-timeline", top=True)


def test_timeline_shows_sub_agent_lane_and_a_page_long_event_list(
    server: LiveServer, page: Any
) -> None:
    page.goto(server.url + "/#sessions/b0a7c3d1-busy-session")
    page.wait_for_selector(".timeline .tl-marker.anomaly")
    lanes = page.locator(".timeline .lane-tools")
    assert lanes.count() == 2
    assert lanes.nth(0).locator(".lane-label").inner_text().lower() == "main agent"
    sub = page.locator('.timeline .lane-sub[data-agent="agent-7f3e"]')
    assert "explore" in sub.locator(".lane-label").inner_text().lower()
    assert sub.locator(".tl-tool").count() == 3
    assert lanes.nth(0).locator(".tl-tool").count() == 4
    listed = page.locator("ol.events li.ev-sub")
    assert listed.count() == 4  # three Reads and the SubagentStart
    assert "explore" in listed.first.locator(".ev-lane").inner_text().lower()
    # Three markers of one instant: stacked in rows, not on top of each other.
    rows_ = page.locator(".timeline .tl-marker.anomaly").evaluate_all(
        "ms => ms.map(m => m.dataset.row)"
    )
    assert sorted(rows_) == ["0", "1", "2"]
    # The event list is part of the page, not a fixed-height inner scroll box.
    ol = page.locator("ol.events")
    style = ol.evaluate("e => [getComputedStyle(e).maxHeight, getComputedStyle(e).overflowY]")
    assert style == ["none", "visible"]
    assert ol.evaluate("e => e.scrollHeight <= e.clientHeight + 1")
    shot(page, "session-lanes")


def _label_of(server: LiveServer, emit_id: int) -> dict[str, Any]:
    emits = server.client().get("/api/anomalies", params={"limit": "500"}).json()["emits"]
    [e] = [e for e in emits if e["id"] == emit_id]
    return e


def test_label_with_a_note_from_the_table(server: LiveServer, page: Any) -> None:
    page.goto(server.url + "/")
    row = page.locator('tr.emit[data-kind="build_broken_after_my_edit"]')
    row.wait_for()
    emit_id = int(row.get_attribute("data-id"))
    row.click()
    detail = page.locator("tr.emit-detail:visible")
    # The text the agent was given sits beside the finding.
    delivered = detail.locator("pre.delivered")
    page.wait_for_function(
        "el => el.textContent.startsWith('<tma1-context>')", arg=delivered.element_handle()
    )
    assert "build_broken_after_my_edit" in delivered.text_content()
    assert "Read src/cart.ts around line 41" in delivered.text_content()
    detail.locator("input.label-note").fill("real: the build broke on my edit")
    detail.locator("button.lbl-tp").click()
    page.wait_for_function(
        "id => document.querySelector(`tr.emit[data-id='${id}']`).dataset.label === 'tp'",
        arg=emit_id,
    )
    # The row's own TP button shows it too.
    assert row.locator("button.lbl-tp").get_attribute("aria-pressed") == "true"
    e = _label_of(server, emit_id)
    assert (e["label"], e["label_source"], e["label_note"]) == (
        "tp",
        "human",
        "real: the build broke on my edit",
    )
    # A new note is saved with the same label.
    detail.locator("input.label-note").fill("still real")
    detail.locator("button.lbl-note").click()
    page.wait_for_function(
        "id => [...document.querySelectorAll('dd.label-note-text')]"
        ".some(d => d.dataset.for === String(id) && d.textContent === 'still real')",
        arg=emit_id,
    )
    assert _label_of(server, emit_id)["label_note"] == "still real"
    shot(page, "label-note-table")


def test_label_with_a_note_from_the_timeline(server: LiveServer, page: Any) -> None:
    page.goto(server.url + "/#sessions/b0a7c3d1-busy-session")
    page.wait_for_selector("li.ev-anomaly")
    li = page.locator("li.ev-anomaly").nth(1)
    emit_id = int(li.get_attribute("data-id"))
    li.locator("input.label-note").fill("noise: the test was being rewritten")
    li.locator("button.lbl-fp").click()
    page.wait_for_function(
        "id => document.querySelector(`li.ev-anomaly[data-id='${id}']`).dataset.label === 'fp'",
        arg=emit_id,
    )
    e = _label_of(server, emit_id)
    assert (e["label"], e["label_note"]) == ("fp", "noise: the test was being rewritten")
    # Its marker leads to it, and the label survives a reload.
    page.reload()
    li = page.locator(f'li.ev-anomaly[data-id="{emit_id}"]')
    li.wait_for()
    assert li.locator("button.lbl-fp").get_attribute("aria-pressed") == "true"
    assert li.locator("input.label-note").input_value() == "noise: the test was being rewritten"
    shot(page, "label-note-timeline")


def test_next_unlabelled_queue(server: LiveServer, page: Any) -> None:
    page.goto(server.url + "/")
    page.wait_for_selector("#emits-body tr.emit")
    todo = server.client().get("/api/anomalies/sample", params={"n": "3"}).json()["emits"]
    assert len(todo) == 3
    page.click("#review-next")
    review = page.locator("#review")
    page.wait_for_function(
        "id => document.querySelector('#review').dataset.id === id", arg=str(todo[0]["id"])
    )
    assert f"Review #{todo[0]['id']}" in review.inner_text()
    page.wait_for_function(
        "() => document.querySelector('#review pre.delivered').textContent !== 'loading…'"
    )
    shot(page, "review-queue")
    # Skipping moves on without labelling.
    review.locator("#review-skip").click()
    page.wait_for_function(
        "id => document.querySelector('#review').dataset.id === id", arg=str(todo[1]["id"])
    )
    assert _label_of(server, todo[0]["id"])["labels"].get("human") is None
    # Labelling moves on to the next one, and the label (with its note) is stored.
    review.locator("input.label-note").fill("queue note")
    review.locator("button.lbl-tp").click()
    page.wait_for_function(
        "id => document.querySelector('#review').dataset.id === id", arg=str(todo[2]["id"])
    )
    e = _label_of(server, todo[1]["id"])
    assert (e["label"], e["label_source"], e["label_note"]) == ("tp", "human", "queue note")
    # The table row of the labelled emit shows it at once.
    assert (
        page.locator(f'tr.emit[data-id="{todo[1]["id"]}"] button.lbl-tp').get_attribute(
            "aria-pressed"
        )
        == "true"
    )


def test_filters_live_in_the_url(server: LiveServer, page: Any) -> None:
    page.goto(server.url + "/")
    page.wait_for_selector("#emits-body tr.emit")
    page.select_option("#f-severity", "high")
    page.wait_for_function("() => location.hash === '#anomalies?severity=high'")
    page.select_option("#f-kind", "stale_file_view")
    page.wait_for_function(
        "() => location.hash === '#anomalies?severity=high&kind=stale_file_view'"
    )
    n = api_count(server, severity="high", kind="stale_file_view")
    page.reload()
    page.wait_for_function(
        "n => document.querySelectorAll('#emits-body tr.emit').length === n", arg=n
    )
    assert page.input_value("#f-severity") == "high"
    assert page.input_value("#f-kind") == "stale_file_view"
    # Back: the kind filter goes, the severity stays.
    page.go_back()
    page.wait_for_function("() => document.querySelector('#f-kind').value === ''")
    high = api_count(server, severity="high")
    page.wait_for_function(
        "n => document.querySelectorAll('#emits-body tr.emit').length === n", arg=high
    )
    assert page.input_value("#f-severity") == "high"
    page.go_forward()
    page.wait_for_function("() => document.querySelector('#f-kind').value === 'stale_file_view'")
    # Gate parameters too.
    page.goto(server.url + "/#gates?budget=7")
    page.wait_for_selector("#gate-cards article.card")
    assert page.input_value("#g-budget") == "7"
    page.wait_for_function(
        "() => document.querySelector('#gate-summary .summary-card').classList.contains('pass')"
    )


def test_sessions_page_and_search(server: LiveServer, page: Any) -> None:
    page.goto(server.url + "/#sessions")
    page.wait_for_selector("#sessions-body tr.session-row")
    assert page.locator("#sessions-body tr.session-row").count() == 50
    assert page.is_disabled("#s-prev") and not page.is_disabled("#s-next")
    page.click("#s-next")
    page.wait_for_function("() => location.hash === '#sessions?page=2'")
    page.wait_for_function(
        "n => document.querySelectorAll('#sessions-body tr.session-row').length === n",
        arg=_all_sessions(server) - 50,
    )
    assert page.is_disabled("#s-next")
    page.reload()
    page.wait_for_selector("#sessions-body tr.session-row")
    assert page.inner_text("#s-page").startswith("51–")
    page.fill("#s-search", "PAYMENTS")
    page.wait_for_function("() => location.hash === '#sessions?q=PAYMENTS'")
    page.wait_for_function(
        "() => document.querySelectorAll('#sessions-body tr.session-row').length === 1"
    )
    assert page.locator("#sessions-body .project").inner_text() == "/home/dev/payments-api"
    page.fill("#s-search", "bulk-05")
    page.wait_for_function(
        "() => document.querySelectorAll('#sessions-body tr.session-row').length === 10"
    )
    page.fill("#s-search", "no-such-thing")
    page.wait_for_selector("#sessions-empty:not([hidden])")
    assert "No sessions match" in page.inner_text("#sessions-empty")
    shot(page, "sessions-search")


def _all_sessions(server: LiveServer) -> int:
    """Sessions the store holds now (other tests of this module may add some)."""
    got = server.client().get("/api/sessions", params={"limit": "1000"}).json()
    assert len(got) >= SEEDED["sessions"]
    return len(got)


def test_gates_tab_says_so_when_the_server_is_down(browser: Any, tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'down.db'}",
        watch_files=False,
    )
    srv = start_live_server(settings)
    ctx = browser.new_context(viewport={"width": 800, "height": 700})
    login(ctx, srv)
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    stopped = False
    try:
        pg.goto(f"{srv.url}/#anomalies")
        pg.wait_for_selector("#anomalies-empty:not([hidden])")
        srv.stop()
        stopped = True
        pg.click("#tab-gates")
        box = pg.locator("#gates-offline")
        box.wait_for(state="visible")
        assert "Cannot reach the tma1 server" in box.inner_text()
        assert "tma1 serve" in box.inner_text()
        assert pg.locator("#status-dot.bad").count() == 1
        shot(pg, "gates-server-down")
    finally:
        ctx.close()
        if not stopped:
            srv.stop()
    # Only the refused connections themselves may be logged, no script error.
    assert [e for e in errors if "ERR_CONNECTION_REFUSED" not in e] == [], errors


def test_channel_filter_shows_what_session_bundles_retold(server: LiveServer, page: Any) -> None:
    now = SystemClock().now_ms()
    server.store.insert_emits(
        [
            emit(
                now,
                "bundle-session",
                "repeated_failed_build",
                "high",
                "make",
                "retold",
                channel="session_start",
            )
        ]
    )
    page.goto(server.url + "/")
    page.wait_for_selector("#emits-body tr.emit")
    page.select_option("#f-channel", "session_start")
    page.wait_for_function("() => location.hash === '#anomalies?channel=session_start'")
    n = api_count(server, channel="session_start")
    assert n >= 1
    page.wait_for_function(
        "n => document.querySelectorAll('#emits-body tr.emit').length === n", arg=n
    )
    page.reload()
    assert page.input_value("#f-channel") == "session_start"


# --- design §2.20: muted kinds in the session preview and on the Gates tab --------------------


def _seed_loop(server: LiveServer, sid: str, cwd: str) -> None:
    """Three failures of the same build just now: `repeated_failed_build` is pending."""
    s = Seeder(server.store, sid, SystemClock().now_ms() - 60_000, cwd)
    mk = "Exit code 2\nmain.go:12:5: undefined: frobnicate\nmake: *** [build] Error 1"
    for _ in range(3):
        s.call("Bash", fail=mk, command="make build")
    s.flush()
    server.service.delivery.invalidate(sid)


def _open(browser: Any, width: int, srv: LiveServer) -> tuple[Any, Any, list[str]]:
    """A fresh page at `width` (dark at 390 px), logged in, and the console errors it
    collects."""
    scheme = "dark" if width == 390 else "light"
    ctx = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    login(ctx, srv)
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    return ctx, pg, errors


def _preview_item(pg: Any, kind: str) -> Any:
    item = pg.locator(f'#preview-panel li.preview-item[data-kind="{kind}"]')
    item.wait_for()
    return item


def test_session_preview_shows_a_muted_kind_as_muted(server: LiveServer, browser: Any) -> None:
    from tma1.engine.mutes import Mute
    from tma1.live.mutes import MUTES_FILE, add_mute, remove_mute

    kind, proj, sid = "repeated_failed_build", "/home/dev/muted-proj", "5e1d0c2b-muted-session"
    _seed_loop(server, sid, proj)
    mutes = server.settings.data_dir / MUTES_FILE
    api = server.client().get("/api/anomalies/preview", params={"session_id": sid}).json()
    assert [f["kind"] for f in api["findings"]] == [kind], api

    until = SystemClock().now_ms() + 3_600_000
    add_mute(mutes, Mute(kind=kind, project=proj, until_ms=until, since_ms=1))
    try:
        listed = server.client().get("/api/mutes").json()["mutes"]
        assert listed == [{"kind": kind, "project": proj, "until": until, "since": 1}]
        for width in (1360, 390):
            ctx, pg, errors = _open(browser, width, server)
            pg.goto(f"{server.url}/#sessions/{sid}")
            item = _preview_item(pg, kind)
            assert item.get_attribute("data-muted") == "1"
            badge = item.locator(".chip.muted-badge")
            assert badge.inner_text().lower() == "muted"
            text = item.inner_text()
            assert f"in {proj}, until" in text and "never told to the agent" in text
            assert "undefined: frobnicate" in text or "make build" in text
            assert "would deliver" not in text.lower()
            assert_no_sideways_scroll(pg)
            shot(pg, f"session-preview-muted-{width}")
            # The Gates tab lists the mute, read-only.
            pg.goto(f"{server.url}/#gates")
            mute = pg.locator(f'#gate-mutes li.mute-item[data-kind="{kind}"]')
            mute.wait_for()
            assert proj in mute.inner_text()
            assert_no_sideways_scroll(pg)
            ctx.close()
            assert errors == [], errors
    finally:
        remove_mute(mutes, kind, proj)

    assert server.client().get("/api/mutes").json()["mutes"] == []
    ctx, pg, errors = _open(browser, 1360, server)
    pg.goto(f"{server.url}/#sessions/{sid}")
    item = _preview_item(pg, kind)
    assert item.get_attribute("data-muted") == "0"
    assert item.locator(".chip.muted-badge").count() == 0
    assert "would deliver" in item.inner_text().lower()
    pg.goto(f"{server.url}/#gates")
    pg.wait_for_selector("#gate-mutes:not([hidden]) .pv-empty")
    assert "Nothing muted" in pg.inner_text("#gate-mutes")
    ctx.close()
    assert errors == [], errors


def test_session_preview_has_a_quiet_empty_state(server: LiveServer, page: Any) -> None:
    page.goto(f"{server.url}/#sessions/bulk-007")
    page.wait_for_selector("#preview-panel .pv-empty")
    assert "Nothing pending" in page.inner_text("#preview-panel")
    assert page.locator("#preview-panel li.preview-item").count() == 0


def test_without_logging_in_the_page_says_how_and_shows_no_data(
    browser: Any, server: LiveServer
) -> None:
    """Issue 31: the shell loads for anyone, its data only for the login URL's cookie; the
    URL itself leaves the address bar once used."""
    ctx = browser.new_context(viewport={"width": 1360, "height": 900})
    try:
        pg = ctx.new_page()
        pg.goto(server.url + "/#anomalies")
        banner = pg.locator("#login-needed")
        banner.wait_for(state="visible")
        assert "tma1 doctor" in banner.inner_text() and "login" in banner.inner_text()
        assert pg.locator("#emits-body tr.emit").count() == 0
        shot(pg, "login-needed")
        # the printed URL, opened in this browser: logged in, on the clean URL
        pg.goto(f"{server.url}/?login={login_code(server.token)}")
        assert pg.url == server.url + "/"
        pg.wait_for_selector("#emits-body tr.emit")
        assert pg.locator("#login-needed").is_hidden()
    finally:
        ctx.close()
