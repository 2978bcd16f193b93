"""Issue 31: on a machine with more than one user, 127.0.0.1 is no boundary.

- Every route but the dashboard's shell, the liveness probe and the hook path (which has
  its own proof) refuses a request without the token or the session cookie: the routes
  are listed from the app itself, so a route added later is checked without anyone
  remembering to add it here.
- The one-time login URL trades its code for an HttpOnly, SameSite=Strict cookie, once.
- The hook path takes a fresh nonce and its keyed hash, never the token itself (an older
  hook script's form), refuses a replay, and signs its answer for that nonce.
- 1,100 idle connections to a real `tma1 serve` leave real hook-script runs answered.
"""

from __future__ import annotations

import json
import re
import resource
import shlex
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from conftest import LOOPBACK_TLS, LiveServer, free_port
from loadkit import ServeProcess
from starlette.routing import Route

from tma1.auth.hooktoken import (
    hook_headers,
    http_hook_key,
    login_code,
    new_nonce,
    request_auth,
    response_sig,
)
from tma1.server.app import create_app
from tma1.server.security import is_public

EVENT = {"session_id": "auth-1", "hook_event_name": "SessionStart", "cwd": "/tmp"}


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """The point is the HTTP layer: one backend is enough."""
    return f"sqlite:///{tmp_path / 'tma1.db'}"


def private_routes(live: LiveServer) -> list[tuple[str, str]]:
    """(method, concrete path) of every route of the app but the public ones, path
    parameters filled in: the app's OpenAPI schema (FastAPI builds it from every route it
    serves, included routers and the hook route too) plus the app's own routes outside it
    (/openapi.json, /docs, /redoc, /)."""
    app = create_app(live.service, hook_token=live.token)
    found = {
        (method.upper(), path)
        for path, ops in app.openapi()["paths"].items()
        for method in ops
        if method in ("get", "post", "put", "patch", "delete")
    }
    for route in app.routes:
        if isinstance(route, Route):
            found |= {(m, route.path) for m in route.methods or () if m != "HEAD"}
    out = []
    for method, path in sorted(found):
        path = re.sub(r"\{[^}]+\}", "1", path)
        if not is_public(method, path):
            out.append((method, path))
    return out


def test_every_private_route_refuses_without_the_token(live: LiveServer) -> None:
    routes = private_routes(live)
    methods = {m for m, _ in routes}
    paths = {p for _, p in routes}
    # the list is the app's, and holds what issue 31 found open
    assert {"GET", "POST"} <= methods
    assert {"/api/anomalies", "/api/sessions", "/api/health", "/openapi.json"} <= paths
    assert "/api/anomalies/1/label" in paths and "/api/agent/sessions/1/state" in paths
    live.hook(EVENT)  # something to read
    with (
        live.client(token="") as anon,
        live.client(token="0" * 64) as wrong,
        live.client(token="", cookies={"tma1_session": "1.abc"}) as stale,
    ):
        for method, path in routes:
            r = anon.request(method, path, json={"label": "fp"})
            assert r.status_code == 401, (method, path, r.status_code)
            detail = r.json()["detail"]
            assert "\n" not in detail and "tma1 doctor" in detail and "tma1 serve" in detail
            assert r.headers["connection"] == "close"
            assert wrong.request(method, path, json={"label": "fp"}).status_code == 403
            assert stale.request(method, path).status_code == 401
    # and with the token they answer (whatever their answer is: not a refusal)
    with live.client() as ok:
        for method, path in routes:
            if method == "GET":
                assert ok.get(path).status_code not in (401, 403), path
    assert live.store.counts()["tma1_anomaly_labels"] == 0  # no refused label got through


def test_the_public_routes_say_nothing_about_the_data(live: LiveServer) -> None:
    live.hook(EVENT)
    with live.client(token="") as anon:
        assert anon.get("/api/ping").text == ""
        page = anon.get("/")
        assert page.status_code == 200
        assert "auth-1" not in page.text and "tma1 doctor" in page.text  # how to log in
        assert anon.get("/static/app.js").status_code == 200


def test_the_login_url_gives_a_strict_httponly_cookie_once(live: LiveServer) -> None:
    code = login_code(live.token)
    with live.client(token="", follow_redirects=False) as browser:
        r = browser.get(f"/?login={code}")
        assert r.status_code == 303 and r.headers["location"] == "/"
        cookie = r.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
        assert live.token not in cookie
        assert browser.get("/api/sessions").status_code == 200  # the cookie is enough
        # once only, and never another server's or an old one
        again = httpx.get(f"{live.url}/?login={code}", verify=LOOPBACK_TLS)
        assert again.status_code == 401 and "set-cookie" not in again.headers
        for bad in (login_code("0" * 64), login_code(live.token, time.time() - 25 * 3600)):
            r = httpx.get(f"{live.url}/?login={bad}", verify=LOOPBACK_TLS)
            assert r.status_code == 401 and "set-cookie" not in r.headers


def post_hook(live: LiveServer, headers: dict[str, str], **params: str) -> httpx.Response:
    return httpx.post(
        f"{live.url}/api/hooks",
        params=params,
        content=json.dumps(EVENT).encode(),
        headers={"Content-Type": "application/json", **headers},
        timeout=10,
        verify=LOOPBACK_TLS,
    )


def test_the_hook_path_takes_a_fresh_nonce_never_the_token(live: LiveServer) -> None:
    # an older hook script's form, the token itself: refused (doctor says to reinstall)
    assert post_hook(live, {"X-TMA1-Token": live.token}).status_code == 403
    assert post_hook(live, {"X-TMA1-Token": live.token}, transport="http").status_code == 403
    # Claude Code's native http hooks: the derived key, with ?transport=http only
    assert post_hook(live, {"X-TMA1-Token": http_hook_key(live.token)}).status_code == 403
    r = post_hook(live, {"X-TMA1-Token": http_hook_key(live.token)}, transport="http")
    assert (r.status_code, r.text) == (200, "{}")
    # the script's form, signed back for its nonce and its body
    headers = hook_headers(live.token)
    r = post_hook(live, headers)
    assert r.status_code == 200
    nonce = headers["X-TMA1-Nonce"]
    assert r.headers["x-tma1-sig"] == response_sig(live.token, nonce, r.content)
    # replayed, stale, from before the server started, malformed, or keyed wrong: refused
    old = new_nonce(time.time() - 120)
    hook_route = next(
        r for r in live.server.config.app.routes if getattr(r, "path", "") == "/api/hooks"
    )
    before = new_nonce(hook_route.endpoint.auth.guard.not_before - 0.5)  # before the server
    for bad in (
        headers,
        {"X-TMA1-Nonce": old, "X-TMA1-Auth": request_auth(live.token, old)},
        {"X-TMA1-Nonce": before, "X-TMA1-Auth": request_auth(live.token, before)},
        {"X-TMA1-Nonce": "1-x", "X-TMA1-Auth": request_auth(live.token, "1-x")},
        hook_headers("0" * 64),
    ):
        assert post_hook(live, bad).status_code == 403, bad
    assert live.store.counts()["tma1_hook_events"] == 2


# --- 1,100 idle connections (issue 31 item 6) ----------------------------------------------


def run_hook(script: Path, session: str) -> subprocess.CompletedProcess[bytes]:
    payload = {"session_id": session, "hook_event_name": "UserPromptSubmit", "cwd": "/tmp"}
    return subprocess.run(
        ["/bin/sh", "-c", shlex.quote(str(script))],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=30,
    )


@pytest.mark.parametrize("hard", [None, 1024], ids=["soft-1024", "hard-1024"])
def test_idle_connections_leave_hooks_answered(tmp_path: Path, hard: int | None) -> None:
    """1,100 connections that never send a byte, to a real `tma1 serve` started with the
    1,024 open files a systemd service gets: the server raises its soft limit to the hard
    one (soft-1024), or, where it cannot (hard-1024), closes the connections that sent no
    request, oldest first; either way each real hook-script run that follows is stored."""
    from tma1.adapters.hookscript import write_script
    from tma1.config import Settings

    soft, hard_now = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard_now < 2400:
        pytest.skip(f"this process may open only {hard_now} files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2400), hard_now))
    data = tmp_path / "data"
    srv = ServeProcess.start(data, port=free_port(), nofile=(1024, hard or hard_now))
    idle: list[socket.socket] = []
    try:
        for _ in range(1100):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", srv.port))
            idle.append(s)
        time.sleep(1.0)  # let the server accept them all
        limits = Path(f"/proc/{srv.pid}/limits").read_text()
        line = next(ln for ln in limits.splitlines() if ln.startswith("Max open files"))
        assert line.split()[3] == str(hard or hard_now)  # soft raised to the hard limit
        settings = Settings(data_dir=data, port=srv.port)
        stored = 0
        for i in range(5):
            script = write_script(settings, "claude-code", flavor="sh", path=tmp_path / f"h{i}.sh")
            r = run_hook(script, f"idle-{i}")
            assert (r.returncode, r.stderr) == (0, b"")
        with httpx.Client(headers={"X-TMA1-Token": srv.token}, verify=LOOPBACK_TLS) as c:
            sessions = {row["session_id"] for row in c.get(f"{srv.url}/api/sessions").json()}
        stored = len({f"idle-{i}" for i in range(5)} & sessions)
        assert stored == 5, srv.log_tail()
    finally:
        for s in idle:
            s.close()
        srv.stop()
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard_now))
