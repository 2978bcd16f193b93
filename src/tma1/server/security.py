"""Default-on request hygiene: loopback Host names only, no foreign web origins.

A page on another origin (or a DNS-rebinding name that resolves to 127.0.0.1) must not be
able to post events, label findings or read the emit log.
"""

from __future__ import annotations

import ipaddress
import logging
from urllib.parse import urlsplit

from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

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
