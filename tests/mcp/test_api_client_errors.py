"""The MCP tools against servers that are not (a working) tma1: real loopback sockets that
answer 404 pages, HTML, or nothing at all. Every tool must still answer, with an error
an agent can act on."""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import pytest
from mcpkit import TOOL_NAMES, text_of

from tma1.mcp import render
from tma1.mcp.api import Tma1Api, Tma1Error
from tma1.mcp.server import build_server

ARGS: dict[str, dict[str, Any]] = {
    "get_anomalies": {"session_id": "s1"},
    "get_session_state": {"session_id": "s1"},
    "get_external_changes": {"session_id": "s1"},
    "get_session_bundle": {"session_id": "s1"},
    "dismiss_anomaly": {"id": 3, "reason": "wrong"},
    "confirm_anomaly": {"id": 3},
}


def _serve(status: int, body: bytes, content_type: str) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def not_found_server() -> Iterator[str]:
    yield from _serve(404, b"<html><h1>404</h1></html>", "text/html")


@pytest.fixture
def html_server() -> Iterator[str]:
    yield from _serve(200, b"<html>hello</html>", "text/html")


@pytest.fixture
def silent_server() -> Iterator[str]:
    """Accepts connections and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


def _call_all(url: str, timeout: float = 5.0) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        api = Tma1Api(url, timeout=timeout)
        server = build_server(api, cwd="/nonexistent/project")
        try:
            assert {t.name for t in await server.list_tools()} == TOOL_NAMES
            return {name: await server.call_tool(name, args) for name, args in ARGS.items()}
        finally:
            await api.aclose()

    return anyio.run(main)


def test_a_server_without_our_routes_is_named_as_such(not_found_server: str) -> None:
    for name, res in _call_all(not_found_server).items():
        assert res.is_error, name
        text = text_of(res)
        assert f"the server at {not_found_server} has no" in text, (name, text)
        assert "restart `tma1 serve`" in text


def test_a_server_that_is_not_tma1_is_named_as_such(html_server: str) -> None:
    for name, res in _call_all(html_server).items():
        assert res.is_error, name
        assert "not JSON; is another program listening" in text_of(res), name


def test_a_server_that_never_answers_times_out_with_a_clear_error(silent_server: str) -> None:
    for name, res in _call_all(silent_server, timeout=0.3).items():
        assert res.is_error, name
        assert "did not answer" in text_of(res) and "in time" in text_of(res), name


def test_resolution_failure_says_how_to_pick_a_session(not_found_server: str) -> None:
    async def main() -> Any:
        api = Tma1Api(not_found_server)
        try:
            return await build_server(api, cwd="/p").call_tool("get_anomalies", {})
        finally:
            await api.aclose()

    res = anyio.run(main)
    assert res.is_error and "/api/agent/resolve" in text_of(res)


def test_unreachable_api_raises_a_tma1_error_not_an_httpx_one() -> None:
    async def main() -> None:
        api = Tma1Api("http://127.0.0.1:1", timeout=1)
        try:
            await api.get("/api/health")
        finally:
            await api.aclose()

    with pytest.raises(Tma1Error, match=re.escape("tma1 is not running at http://127.0.0.1:1.")):
        anyio.run(main)


# --- the pure rendering -------------------------------------------------------------------


def test_emit_ids_attach_to_the_newest_emit_of_the_same_key_in_this_session() -> None:
    findings = [{"stable_key": "k|high|x"}, {"stable_key": "k|medium|"}]
    emits = [
        {"id": 1, "ts": 10, "session_id": "s1", "stable_key": "k|high|x"},
        {"id": 4, "ts": 40, "session_id": "s1", "stable_key": "k|high|x"},
        {"id": 9, "ts": 90, "session_id": "s2", "stable_key": "k|medium|"},
    ]
    out = render.attach_emit_ids(findings, emits, "s1")
    assert [f["emit_id"] for f in out] == [4, None]
    assert "emit_id" not in findings[0]  # the input is not modified


@pytest.mark.parametrize(
    "payload",
    [[{"id": 1}], {"emits": [{"id": 1}]}, {"items": [{"id": 1}, "junk"]}],
)
def test_emit_rows_accepts_the_list_shapes(payload: Any) -> None:
    assert render.emit_rows(payload) == [{"id": 1}]


def test_times_render_absolute_and_relative() -> None:
    now = 1_700_000_000_000
    assert render.when(now - 7 * 60_000, now) == "2023-11-14 22:06:20Z (7 min ago)"
    assert render.when("2023-11-14T22:13:15Z", now) == "2023-11-14 22:13:15Z (5 s ago)"
    assert render.when(None, now) == "unknown"


def test_anomaly_text_names_what_the_agent_can_do() -> None:
    now = 1_700_000_000_000
    finding = {
        "kind": "stale_file_view",
        "severity": "high",
        "channel": "user_prompt_submit",
        "evidence": "you edited a.py after it changed on disk",
        "suggestion": "Re-read a.py",
        "related_files": [f"/p/f{i}.py" for i in range(10)],
        "outstanding_since": now - 120_000,
        "last_evidence_ts": now - 60_000,
        "would_deliver": False,
        "emit_id": 12,
    }
    text = render.render_anomalies("s1", "/p", now, [finding], [], "emit log down")
    assert "1. [HIGH] stale_file_view: you edited a.py" in text
    assert "Suggestion: Re-read a.py" in text
    assert "/p/f7.py (+2 more)" in text and "/p/f8.py" not in text
    assert "Outstanding since: 2023-11-14 22:11:20Z (2 min ago)" in text
    assert "Already told" in text
    assert 'dismiss_anomaly(12, "why")' in text
    assert "(Emit ids unavailable: emit log down)" in text
    assert "No findings right now" in render.render_anomalies("s1", None, now, [], [])


def test_a_fresh_finding_is_not_announced_as_a_repeat() -> None:
    fresh = {
        "kind": "test_stuck",
        "severity": "medium",
        "channel": "user_prompt_submit",
        "evidence": "e",
        "suggestion": "s",
        "outstanding_since": None,
        "would_deliver": True,
    }
    text = render.render_anomalies("s1", None, 1_700_000_000_000, [fresh], [])
    assert "Not told yet" in text
    assert "tma1 will tell you in the digest before your next prompt." in text
    told = {**fresh, "outstanding_since": 1_699_999_000_000}
    text = render.render_anomalies("s1", None, 1_700_000_000_000, [told], [])
    assert "tma1 will tell you again in the digest" in text
