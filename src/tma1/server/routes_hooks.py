"""`POST /api/hooks`: the agent's path in. Always 200 (403 only for a wrong token)."""

from __future__ import annotations

import asyncio
import hmac
import logging
from typing import Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.types import Receive, Scope, Send

from tma1.service import LARGE_BODY_BYTES, MAX_BODY_BYTES, Service

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
            "403": {"description": "Missing or wrong X-TMA1-Token"},
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
    summary="200 when X-TMA1-Token is the hook token, 403 otherwise (for `tma1 doctor`)",
    responses={403: {"description": "Missing or wrong X-TMA1-Token"}},
)
async def token_check(request: Request) -> Response:
    expected = request.app.state.hook_token
    given = request.headers.get("x-tma1-token", "").encode("latin-1")
    if expected is not None and not hmac.compare_digest(given, expected.encode()):
        return Response(_FORBIDDEN, status_code=403, media_type="text/plain")
    return Response(b"ok\n", media_type="text/plain")


_FORBIDDEN = b"forbidden: missing or wrong X-TMA1-Token\n"


_TEXT = b"text/plain; charset=utf-8"
_JSON = b"application/json"


def _silent(http: bool) -> tuple[int, bytes, bytes]:
    return (200, b"{}", _JSON) if http else (200, b"", _TEXT)


async def answer_hook(
    service: Service, expected: str | None, scope: Scope, receive: Receive
) -> tuple[int, bytes, bytes]:
    """(status, body, content type) of a hook request. 200 unless the token is wrong.

    `?transport=http` (Claude Code's native http hooks): every 200 answer is JSON — the
    digest as `hookSpecificOutput.additionalContext`, nothing to say as `{}` — since
    Claude Code refuses any other body ("HTTP hook must return JSON")."""
    # As Starlette's QueryParams: blank values kept, the last of a repeated name wins.
    qs = scope.get("query_string", b"")
    query = dict(parse_qsl(qs.decode("latin-1"), keep_blank_values=True)) if qs else {}
    http = query.get("transport") == "http"
    if expected is not None:
        given = next((value for name, value in scope["headers"] if name == b"x-tma1-token"), b"")
        if not hmac.compare_digest(given, expected.encode()):
            service.counters.inc("rejected.bad_token")
            log.warning("hook refused: missing or wrong X-TMA1-Token")
            return 403, _FORBIDDEN, _TEXT
    read = await _read_capped(receive, MAX_BODY_BYTES)
    if read is None or read[1] > MAX_BODY_BYTES:
        if read is None:
            # Half a body is no event (e.g. the hook script's time cap cut the upload).
            service.reject("client_disconnected", "the client went away before the end of the body")
        else:
            service.reject("body_too_large", f"{read[1]} bytes > {MAX_BODY_BYTES}")
        service.counters.inc("requests")
        return _silent(http)
    body, total = read
    if total > LARGE_BODY_BYTES:
        # A big event (a huge tool output) is answered empty at once and stored in the
        # background: the hook script's time cap must cover its upload, not its decoding.
        # Its body is on disk first (tma1.journal.Spool): answered means kept.
        held = await service.hold_body(body, query.get("source"))
        task = asyncio.create_task(
            service.handle_hook_async(body, source=query.get("source"), envelope=None, held=held)
        )
        _BACKGROUND.add(task)
        task.add_done_callback(_BACKGROUND.discard)
        return _silent(http)
    envelope = "json" if http else query.get("envelope")
    answer = await service.handle_hook_async(body, source=query.get("source"), envelope=envelope)
    if not answer:
        return _silent(http)
    return 200, answer.encode("utf-8"), _JSON if answer.startswith("{") else _TEXT


class HookEndpoint:
    """The ASGI app that answers `POST /api/hooks` with plain ASGI messages: on the agent's
    path FastAPI's request and response classes cost more CPU than storing the event
    (bench/bench_hooks.py). An instance, not a function, so that Starlette's `Route` hands
    it the raw scope; the app's LocalOnlyMiddleware still applies its Host/Origin checks."""

    def __init__(self, service: Service, hook_token: str | None) -> None:
        self.service = service
        self.hook_token = hook_token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            status, body, content_type = await answer_hook(
                self.service, self.hook_token, scope, receive
            )
        except Exception:  # the hook path answers 200, whatever happens
            log.exception("hook endpoint failed; answering empty")
            status, body, content_type = 200, b"", _TEXT
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-length", str(len(body)).encode()),
                    (b"content-type", content_type),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
