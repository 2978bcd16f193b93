"""`POST /api/hooks`: the agent's path in. Always 200 (403 only for a wrong token)."""

from __future__ import annotations

import hmac
import logging

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from tma1.service import MAX_BODY_BYTES, Service

log = logging.getLogger("tma1.hooks")

router = APIRouter()

_HOOK_BODY_DOC = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "description": "A Claude Code or Codex hook payload, passed through as sent.",
                    "properties": {
                        "session_id": {"type": "string"},
                        "hook_event_name": {"type": "string"},
                    },
                    "additionalProperties": True,
                }
            }
        },
    },
    "parameters": [
        {"name": "X-TMA1-Token", "in": "header", "required": False, "schema": {"type": "string"}},
    ],
}


async def _read_capped(request: Request, limit: int) -> tuple[bytes, int]:
    """The body up to `limit`+1 bytes, and the total size (the rest is drained, not kept)."""
    chunks: list[bytes] = []
    kept = total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if kept <= limit:
            chunks.append(chunk)
            kept += len(chunk)
    return b"".join(chunks), total


@router.post(
    "/api/hooks",
    openapi_extra=_HOOK_BODY_DOC,
    responses={
        200: {
            "description": "What the agent should hear (may be empty)",
            "content": {"text/plain": {}},
        },
        403: {"description": "Missing or wrong X-TMA1-Token"},
    },
)
async def post_hook(
    request: Request, source: str | None = None, envelope: str | None = None
) -> Response:
    # Normally HookFastPath answers before routing; this route documents the endpoint in
    # the OpenAPI schema and answers identically if the fast path is not installed.
    return await answer_hook(request)


async def answer_hook(request: Request) -> Response:
    service: Service = request.app.state.service
    expected: str | None = request.app.state.hook_token
    if expected is not None:
        given = request.headers.get("x-tma1-token", "")
        if not hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode()):
            service.counters.inc("rejected.bad_token")
            log.warning("hook refused: missing or wrong X-TMA1-Token")
            return Response(
                "forbidden: missing or wrong X-TMA1-Token\n",
                status_code=403,
                media_type="text/plain",
            )
    body, total = await _read_capped(request, MAX_BODY_BYTES)
    if total > MAX_BODY_BYTES:
        service.reject("body_too_large", f"{total} bytes > {MAX_BODY_BYTES}")
        service.counters.inc("requests")
        return Response(b"", media_type="text/plain")
    query = request.query_params
    answer = await run_in_threadpool(
        service.handle_hook, body, source=query.get("source"), envelope=query.get("envelope")
    )
    media = "application/json" if answer.startswith("{") else "text/plain"
    return Response(answer.encode("utf-8"), media_type=media)


class HookFastPath:
    """ASGI middleware that answers `POST /api/hooks` before FastAPI's routing.

    On the agent's path FastAPI's per-request routing and dependency solving cost more CPU
    than storing the event (bench/bench_hooks.py); everything else still goes through the
    app. Installed inside LocalOnlyMiddleware, so the Host/Origin checks still apply.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/api/hooks" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        try:
            response = await answer_hook(Request(scope, receive))
        except Exception:  # the hook path answers 200, whatever happens
            log.exception("hook fast path failed; answering empty")
            response = Response(b"", media_type="text/plain")
        await response(scope, receive, send)
