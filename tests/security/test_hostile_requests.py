"""Hostile requests on a live server, on both backends.

- A foreign web origin, a non-loopback Host (DNS rebinding) or a missing/wrong token (the
  hook script's keyed proof of it) is refused, and nothing is stored.
- SQL meta characters and path traversal strings in every field are stored verbatim,
  read back equal (from the database and through the API), and do nothing else.
"""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from conftest import LOOPBACK_TLS, LiveServer
from sqlalchemy import select

from tma1.auth.hooktoken import hook_headers
from tma1.store.schema import ALL_TABLES, hook_events

VALID = {"session_id": "sec", "hook_event_name": "SessionStart", "cwd": "/tmp"}


def assert_nothing_stored(live: LiveServer) -> None:
    assert all(n == 0 for n in live.store.counts().values()), live.store.counts()


def raw_post(live: LiveServer, headers: dict[str, str], body: object = VALID) -> httpx.Response:
    return httpx.post(
        f"{live.url}/api/hooks",
        content=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **headers},
        timeout=10,
        verify=LOOPBACK_TLS,
    )


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.example",
        "https://evil.example",
        "http://127.0.0.1:1",  # another local port is another origin
        "null",  # sandboxed iframes, file:// pages
        "chrome-extension://abcdef",
    ],
)
def test_foreign_origin_is_refused_and_nothing_stored(live: LiveServer, origin: str) -> None:
    r = raw_post(live, {**hook_headers(live.token), "Origin": origin})
    assert r.status_code == 403
    # Reads are refused too: a foreign page must not read the emit log or sessions.
    for path in ("/api/anomalies", "/api/sessions", "/api/health"):
        assert live.client().get(path, headers={"Origin": origin}).status_code == 403
    assert_nothing_stored(live)


def test_cross_site_fetch_metadata_is_refused(live: LiveServer) -> None:
    r = raw_post(live, {**hook_headers(live.token), "Sec-Fetch-Site": "cross-site"})
    assert r.status_code == 403
    assert_nothing_stored(live)


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:{port}",
        "127.0.0.1.nip.io:{port}",  # resolves to loopback: the DNS-rebinding shape
        "localhost.evil.example:{port}",
        "10.0.0.1:{port}",
        "0.0.0.0:{port}",
        "",
    ],
)
def test_non_loopback_host_is_refused_even_with_the_token(live: LiveServer, host: str) -> None:
    host = host.format(port=live.port)
    r = raw_post(live, {**hook_headers(live.token), "Host": host})
    assert r.status_code == 403, (host, r.text)
    assert live.client().get("/api/anomalies", headers={"Host": host}).status_code == 403
    assert_nothing_stored(live)


@pytest.mark.parametrize(
    "token",
    [None, "", "wrong", "0" * 64, "TOKEN_UPPER", "TOKEN_PREFIX", "TOKEN_SPACE"],
)
def test_missing_or_wrong_token_is_refused(live: LiveServer, token: str | None) -> None:
    headers: dict[str, str] = {}
    if token == "TOKEN_UPPER":
        token = live.token.upper() if live.token.upper() != live.token else live.token + "x"
    elif token == "TOKEN_PREFIX":
        token = live.token[:-1]
    elif token == "TOKEN_SPACE":
        token = live.token + " x"
    if token is not None:
        headers.update(hook_headers(token))  # the hook script's proof, keyed with `token`
    r = raw_post(live, headers)
    assert r.status_code == 403
    # The token also cannot ride in the query string or a cookie.
    r = httpx.post(
        f"{live.url}/api/hooks",
        params={"token": live.token, "X-TMA1-Token": live.token},
        cookies={"X-TMA1-Token": live.token},
        content=json.dumps(VALID).encode(),
        timeout=10,
    )
    assert r.status_code == 403
    assert_nothing_stored(live)
    health = live.client().get("/api/health").json()
    assert health["rejected"].get("bad_token", 0) >= 2


def test_the_right_token_from_loopback_is_accepted(live: LiveServer) -> None:
    # The control for the refusals above: the same request with the right headers stores.
    for host in ("127.0.0.1", f"127.0.0.1:{live.port}", f"localhost:{live.port}"):
        r = raw_post(live, {**hook_headers(live.token), "Host": host})
        assert r.status_code == 200
    r = raw_post(live, {**hook_headers(live.token), "Origin": live.url})
    assert r.status_code == 200
    assert live.store.counts()["tma1_hook_events"] == 4


HOSTILE = [
    "'; DROP TABLE tma1_hook_events; --",
    '" OR "1"="1',
    "x' OR '1'='1' /*",
    "1; DELETE FROM tma1_anomaly_emits WHERE 1=1",
    "Robert'); DROP TABLE students;--",
    "%' OR 1=1 --",
    "_%_\\%",
    "$1 $$ $tag$ ::text",
    "../../../../etc/passwd",
    "..\\..\\..\\windows\\system32\\config\\sam",
    "/tmp/../../etc/shadow",
    "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "file:///etc/passwd",
    "$(touch /tmp/tma1-pwned) `id` ; rm -rf ~",
    "<script>alert(1)</script>",
    "{{7*7}} ${7*7} %s %n",
    "line1\nline2\r\n\ttab",
    "日本語 🙂 \u202e RTL",
]


def hostile_payload(s: str, i: int, *, tool: str | None = None) -> dict[str, Any]:
    return {
        "session_id": s,
        "hook_event_name": "PostToolUse",
        "tool_name": tool or s,
        "tool_use_id": f"{tool or ''}{i}:{s}",
        "tool_input": {"command": s, "file_path": s, "description": s},
        "tool_response": {"stdout": s, "stderr": s, "exitCode": 0},
        "cwd": s,
        "transcript_path": s,
        "permission_mode": s[:64],
        "prompt": s,
        s: s,  # an unknown field named with the string itself
    }


def test_sql_meta_and_path_traversal_are_stored_verbatim_and_harmless(
    live: LiveServer, tmp_path: Any
) -> None:
    before = set(os.listdir(live.settings.data_dir))
    for i, s in enumerate(HOSTILE):
        # Once as the tool name itself, once as a shell command (its own column).
        for tool in (None, "Bash"):
            r = live.hook(hostile_payload(s, i, tool=tool))
            assert r.status_code == 200, s
    with live.store.connect() as conn:
        rows = {r.tool_use_id: r for r in conn.execute(select(hook_events))}
    assert len(rows) == 2 * len(HOSTILE)
    for i, s in enumerate(HOSTILE):
        row, shell = rows[f"{i}:{s}"], rows[f"Bash{i}:{s}"]
        assert row.session_id == s.strip() and shell.session_id == s.strip()
        assert row.tool_name == s and row.cwd == s and row.transcript_path == s
        assert row.permission_mode == s[:64]
        assert row.tool_file_path == s and shell.tool_file_path == s
        assert shell.tool_command == s
        assert json.loads(row.tool_input) == {"command": s, "file_path": s, "description": s}
        meta = json.loads(row.metadata)
        assert meta["prompt"] == s and meta[s] == s
    # Harmless: every table is still there, nothing was deleted, nothing was created
    # outside the data dir, and no file appeared in it.
    names = set(live.store.table_names())
    assert {t.name for t in ALL_TABLES} <= names
    assert not os.path.exists("/tmp/tma1-pwned")
    assert set(os.listdir(live.settings.data_dir)) - before <= {"tma1.db-journal"}
    # Read back equal through the API as well (JSON, never HTML).
    c = live.client()
    listed = {s["session_id"] for s in c.get("/api/sessions", params={"limit": 1000}).json()}
    assert {s.strip() for s in HOSTILE} <= listed
    for s in HOSTILE:
        if "/" in s or "\\" in s or s.startswith("."):
            continue  # a path segment cannot carry these; covered by the list above
        r = c.get(f"/api/sessions/{quote(s.strip(), safe='')}")
        assert r.status_code == 200, (s, r.status_code, r.text[:200])
        assert r.headers["content-type"].startswith("application/json")
        detail = r.json()
        assert detail["session"]["session_id"] == s.strip()
        tools = {(e["tool_name"], e["file"], e["command"]) for e in detail["timeline"]}
        assert tools == {(s, s, None), ("Bash", s, s)}, tools
