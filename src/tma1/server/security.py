"""Default-on request hygiene: loopback Host names only, no foreign web origins, and
nothing but the dashboard's shell and a liveness probe without the token.

A page on another origin (or a DNS-rebinding name that resolves to 127.0.0.1) must not be
able to post events, label findings or read the emit log; nor may another user of this
machine, who reaches 127.0.0.1 as easily as its owner does.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import time
from urllib.parse import urlsplit

from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from tma1.auth.hooktoken import NONCE_RE, request_auth, session_ok

log = logging.getLogger("tma1.security")

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "testserver"})


def is_loopback_name(host: str) -> bool:
    """Whether a Host header (`name`, `name:port`, `[v6]:port`) names this machine."""
    name = host.strip().lower()
    if name.startswith("["):
        name = name[1:].split("]", 1)[0]
    elif name.count(":") == 1:
        name = name.split(":", 1)[0]
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class LocalOnlyMiddleware:
    """Refuses (403) a non-loopback Host, and an Origin that is not this very server."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (reason := _refusal(scope)):
            log.warning("refused %s %s: %s", scope.get("method"), scope.get("path"), reason)
            await PlainTextResponse(f"forbidden: {reason}\n", status_code=403)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _refusal(scope: Scope) -> str | None:
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
    host = headers.get("host", "")
    if not is_loopback_name(host):  # an empty Host too
        return f"Host {host!r} is not a loopback name"
    origin = headers.get("origin")
    if origin == "null":
        return "Origin 'null' is refused"
    if origin is not None:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or parts.netloc.lower() != host.lower():
            return f"Origin {origin!r} is not this server"
    if headers.get("sec-fetch-site") == "cross-site":
        return "cross-site request"
    return None


# --- who may ask -------------------------------------------------------------------------
#
# Default-deny: every path needs the token (`X-TMA1-Token`) or the dashboard's session
# cookie, except the dashboard's static shell (it holds no data and says how to log in),
# the liveness probe, and the hook path, which authenticates itself (routes_hooks: a nonce
# and its keyed hash, never the token). A route added later is private without anyone
# remembering to say so; a middleware rather than a per-router dependency for that reason,
# and because /openapi.json and /docs are FastAPI's own routes.

COOKIE = "tma1_session"
LOGIN_FIX = (
    "open the login URL printed by `tma1 serve` or `tma1 doctor` "
    "(API clients: send X-TMA1-Token from $TMA1_DATA_DIR/hook-token)"
)
_PUBLIC = frozenset({"/", "/api/ping", "/favicon.ico"})


def is_public(method: str, path: str) -> bool:
    return (
        path in _PUBLIC
        or path.startswith("/static/")
        or (path == "/api/hooks" and method == "POST")
    )


def _cookie(headers: list[tuple[bytes, bytes]], name: str) -> str | None:
    prefix = name.encode() + b"="
    for key, value in headers:
        if key == b"cookie":
            for part in value.split(b";"):
                part = part.strip()
                if part.startswith(prefix):
                    return part[len(prefix) :].decode("latin-1")
    return None


def credential_refusal(token: str, headers: list[tuple[bytes, bytes]]) -> tuple[int, str] | None:
    """None when the request carries the token or a valid session cookie; else (status,
    reason): 401 when it carries nothing, 403 when what it carries is wrong."""
    given = next((v for k, v in headers if k == b"x-tma1-token"), None)
    if given is not None:
        if hmac.compare_digest(given, token.encode()):
            return None
        return 403, f"wrong X-TMA1-Token: {LOGIN_FIX}"
    cookie = _cookie(headers, COOKIE)
    if cookie is not None:
        if session_ok(token, cookie):
            return None
        return 401, f"the dashboard session has expired or is not this server's: {LOGIN_FIX}"
    return 401, f"not logged in: {LOGIN_FIX}"


class TokenMiddleware:
    """Refuses (401/403, one line of JSON naming the fix) any request that is not public
    and carries neither the token nor a valid session cookie. `token` None: no check
    (in-process tests only)."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and self.token is not None
            and not is_public(scope["method"], scope["path"])
            and (refusal := credential_refusal(self.token, scope["headers"]))
        ):
            status, reason = refusal
            log.info("refused %s %s: %s", scope["method"], scope["path"], reason.split(":")[0])
            body = json.dumps({"detail": reason}).encode() + b"\n"
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        # one refused request is enough: no idle keep-alive to hold open
                        (b"connection", b"close"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


class NonceGuard:
    """Checks a hook request's `X-TMA1-Nonce` / `X-TMA1-Auth` (tma1.auth.hooktoken): the keyed hash,
    the nonce's time (not before this server started, within WINDOW_S of now) and that no
    request used it before. A squatter that once held the port and recorded a request can
    therefore not replay it here: it is older than this server, or already seen."""

    WINDOW_S = 30.0
    FUTURE_S = 5.0
    MAX_SEEN = 200_000

    def __init__(self, token: str, *, started: float | None = None) -> None:
        self.token = token
        # The script's clock is this machine's, in whole seconds at worst (sh: `date +%s`).
        self.not_before = int(time.time() if started is None else started) - 1
        self.seen: dict[str, float] = {}

    def check(self, nonce: bytes, auth: bytes, now: float | None = None) -> str | None:
        """None when the request is authentic and fresh; else why not."""
        t = time.time() if now is None else now
        text = nonce.decode("latin-1")
        m = NONCE_RE.match(text)
        if m is None:
            return "malformed X-TMA1-Nonce"
        if not hmac.compare_digest(auth, request_auth(self.token, text).encode()):
            return "wrong X-TMA1-Auth"
        ts = float(text.split("-", 1)[0])
        if ts < self.not_before or not t - self.WINDOW_S <= ts <= t + self.FUTURE_S:
            return "stale X-TMA1-Nonce (older than the server or the window)"
        if text in self.seen:
            return "replayed X-TMA1-Nonce"
        if len(self.seen) >= self.MAX_SEEN:
            self._purge(t)
        self.seen[text] = ts
        return None

    def _purge(self, now: float) -> None:
        self.seen = {n: ts for n, ts in self.seen.items() if ts >= now - self.WINDOW_S}
        if len(self.seen) >= self.MAX_SEEN:
            # Still full (a flood of fresh nonces): forget the older half and refuse
            # anything as old, rather than accept a replay of them.
            cut = sorted(self.seen.values())[len(self.seen) // 2]
            self.not_before = max(self.not_before, int(cut) + 1)
            self.seen = {n: ts for n, ts in self.seen.items() if ts >= self.not_before}
