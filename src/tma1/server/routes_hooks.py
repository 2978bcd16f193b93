"""`POST /api/hooks`: the agent's path in. Always 200 (403 only for a request that is not
authentic: see HookAuth)."""

from __future__ import annotations

import asyncio
import hmac
import logging
from typing import Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.types import Receive, Scope, Send

from tma1.auth.hooktoken import http_hook_key, response_sig
from tma1.live.service import LARGE_BODY_BYTES, MAX_BODY_BYTES, Service
from tma1.server.security import NonceGuard

log = logging.getLogger("tma1.hooks")

router = APIRouter()
# Big events being stored after their answer (a reference keeps each task alive).
_BACKGROUND: set[asyncio.Task[str]] = set()

# `POST /api/hooks` in /openapi.json (`tma1.server.app` adds it: FastAPI documents only
# its own routes, and this one is a plain Starlette route).
OPENAPI_PATH: dict[str, Any] = {
    "post": {
        "summary": "Post Hook",
        "operationId": "post_hook_api_hooks_post",
        "parameters": [
            {"name": name, "in": where, "required": False, "schema": {"type": "string"}}
            for name, where in (
                ("source", "query"),
                ("envelope", "query"),
                ("transport", "query"),
                ("X-TMA1-Nonce", "header"),
                ("X-TMA1-Auth", "header"),
                ("X-TMA1-Token", "header"),
            )
        ],
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "description": (
                            "A Claude Code or Codex hook payload, passed through as sent."
                        ),
                        "properties": {
                            "session_id": {"type": "string"},
                            "hook_event_name": {"type": "string"},
                        },
                        "additionalProperties": True,
                    }
                }
            },
        },
        "responses": {
            "200": {
                "description": "What the agent should hear (may be empty)",
                "content": {"text/plain": {}},
            },
            "403": {
                "description": "Missing or wrong X-TMA1-Nonce/X-TMA1-Auth (or, with "
                "?transport=http, X-TMA1-Token)"
            },
        },
    }
}


async def _read_capped(receive: Receive, limit: int) -> tuple[bytes, int] | None:
    """The body up to `limit`+1 bytes, and the total size (the rest is drained, not kept);
    None when the client went away before the end of the body."""
    chunks: list[bytes] = []
    kept = total = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        total += len(chunk)
        if kept <= limit:
            chunks.append(chunk)
            kept += len(chunk)
        if not message.get("more_body", False):
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks), total


@router.get(
    "/api/hooks/token-check",
    summary="200 when X-TMA1-Token is the hook token, 401/403 otherwise (for `tma1 doctor`)",
    responses={401: {"description": "No X-TMA1-Token"}, 403: {"description": "Wrong token"}},
)
async def token_check(request: Request) -> Response:
    expected = request.app.state.hook_token
    given = request.headers.get("x-tma1-token", "").encode("latin-1")
    if expected is not None and not hmac.compare_digest(given, expected.encode()):
        return Response(
            b"forbidden: wrong X-TMA1-Token\n", status_code=403, media_type="text/plain"
        )
    return Response(b"ok\n", media_type="text/plain")


_FORBIDDEN = b"forbidden: not an authentic tma1 hook request (run `tma1 install`)\n"


_TEXT = b"text/plain; charset=utf-8"
_JSON = b"application/json"


def _silent(http: bool) -> tuple[int, bytes, bytes]:
    return (200, b"{}", _JSON) if http else (200, b"", _TEXT)


class HookAuth:
    """Who may post a hook: the hook script (a fresh nonce and its keyed hash, checked by
    the NonceGuard; its answers are signed back), and Claude Code's native http hooks
    (`?transport=http`, a static header derived from the token: docs/hooks.md says what
    that can and cannot prove). The token itself is never accepted here: the hook script
    of an older tma1 sent it to whatever listened on the port (`tma1 doctor` says to run
    `tma1 install` for it)."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.guard = NonceGuard(token)
        self.http_key = http_hook_key(token).encode()

    def refusal(self, headers: list[tuple[bytes, bytes]], http: bool) -> tuple[str, bytes | None]:
        """("", nonce) when the request may post (the nonce to sign the answer with, None
        for the http transport); (why, None) when it may not."""
        nonce = auth = given = None
        for name, value in headers:
            if name == b"x-tma1-nonce":
                nonce = value
            elif name == b"x-tma1-auth":
                auth = value
            elif name == b"x-tma1-token":
                given = value
        if nonce is not None and auth is not None:
            why = self.guard.check(nonce, auth)
            return (why, None) if why else ("", nonce)
        if http and given is not None and hmac.compare_digest(given, self.http_key):
            return "", None
        if given is not None:
            return (
                "X-TMA1-Token instead of X-TMA1-Nonce/X-TMA1-Auth (an outdated hook script?)",
                None,
            )
        return "no X-TMA1-Nonce/X-TMA1-Auth", None

    def sign(self, nonce: bytes, body: bytes) -> bytes:
        return response_sig(self.token, nonce.decode("latin-1"), body).encode()


async def answer_hook(
    service: Service, auth: HookAuth | None, scope: Scope, receive: Receive
) -> tuple[int, bytes, bytes, bytes | None]:
    """(status, body, content type, the nonce to sign with) of a hook request. 200 unless
    the request is not authentic.

    `?transport=http` (Claude Code's native http hooks): every 200 answer is JSON — the
    digest as `hookSpecificOutput.additionalContext`, nothing to say as `{}` — since
    Claude Code refuses any other body ("HTTP hook must return JSON")."""
    # As Starlette's QueryParams: blank values kept, the last of a repeated name wins.
    qs = scope.get("query_string", b"")
    query = dict(parse_qsl(qs.decode("latin-1"), keep_blank_values=True)) if qs else {}
    http = query.get("transport") == "http"
    nonce = None
    if auth is not None:
        why, nonce = auth.refusal(scope["headers"], http)
        if why:
            service.counters.inc("rejected.bad_token")
            log.warning("hook refused: %s", why)
            return 403, _FORBIDDEN, _TEXT, None
    read = await _read_capped(receive, MAX_BODY_BYTES)
    if read is None or read[1] > MAX_BODY_BYTES:
        if read is None:
            # Half a body is no event (e.g. the hook script's time cap cut the upload).
            service.reject("client_disconnected", "the client went away before the end of the body")
        else:
            service.reject("body_too_large", f"{read[1]} bytes > {MAX_BODY_BYTES}")
        service.counters.inc("requests")
        return (*_silent(http), nonce)
    body, total = read
    if total > LARGE_BODY_BYTES:
        # A big event (a huge tool output) is answered empty at once and stored in the
        # background: the hook script's time cap must cover its upload, not its decoding.
        # Its body is on disk first (tma1.ingest.journal.Spool): answered means kept.
        held = await service.hold_body(body, query.get("source"))
        task = asyncio.create_task(
            service.handle_hook_async(body, source=query.get("source"), envelope=None, held=held)
        )
        _BACKGROUND.add(task)
        task.add_done_callback(_BACKGROUND.discard)
        return (*_silent(http), nonce)
    envelope = "json" if http else query.get("envelope")
    answer = await service.handle_hook_async(body, source=query.get("source"), envelope=envelope)
    if not answer:
        return (*_silent(http), nonce)
    return 200, answer.encode("utf-8"), _JSON if answer.startswith("{") else _TEXT, nonce


class HookEndpoint:
    """The ASGI app that answers `POST /api/hooks` with plain ASGI messages: on the agent's
    path FastAPI's request and response classes cost more CPU than storing the event
    (bench/bench_hooks.py). An instance, not a function, so that Starlette's `Route` hands
    it the raw scope; the app's LocalOnlyMiddleware still applies its Host/Origin checks."""

    def __init__(self, service: Service, hook_token: str | None) -> None:
        self.service = service
        self.auth = HookAuth(hook_token) if hook_token is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        nonce = None
        try:
            status, body, content_type, nonce = await answer_hook(
                self.service, self.auth, scope, receive
            )
        except Exception:  # the hook path answers 200, whatever happens
            log.exception("hook endpoint failed; answering empty")
            status, body, content_type = 200, b"", _TEXT
        headers = [
            (b"content-length", str(len(body)).encode()),
            (b"content-type", content_type),
        ]
        if nonce is not None and self.auth is not None:
            headers.append((b"x-tma1-sig", self.auth.sign(nonce, body)))
        if status != 200:
            headers.append((b"connection", b"close"))  # a refused caller gets no keep-alive
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
