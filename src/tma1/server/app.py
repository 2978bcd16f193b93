"""The FastAPI application factory and the `serve` runner."""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.responses import Response
from starlette.routing import Route

from tma1 import __version__
from tma1.live.service import Service
from tma1.server import (
    routes_agent,
    routes_anomalies,
    routes_gates,
    routes_hooks,
    routes_sessions,
)
from tma1.server.security import COOKIE, LocalOnlyMiddleware, TokenMiddleware

log = logging.getLogger("tma1.server")

STATIC_DIR = Path(__file__).parent / "static"


def create_app(service: Service, *, hook_token: str | None) -> FastAPI:
    """`hook_token` None disables the token checks (only for in-process tests)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service.start()
        try:
            yield
        finally:
            service.stop()

    app = FastAPI(
        title="tma1",
        version=__version__,
        lifespan=lifespan,
        description="Watches AI coding agents through their hooks.",
        # Nothing leaves this machine: no OpenTelemetry traces, metrics or logs, even
        # where the environment configures an exporter (FASTAPI_OTEL_AUTO_CONFIGURE).
        # Off, FastAPI also skips its per-request check for one (~0.02 ms a hook).
        telemetry={"tracing": False, "metrics": False, "logs": False, "auto_configure": False},
    )
    app.state.service = service
    app.state.hook_token = hook_token
    # Outermost last: the Host/Origin check runs first, then the token check.
    app.add_middleware(TokenMiddleware, token=hook_token)
    app.add_middleware(LocalOnlyMiddleware)
    # The agent's path: a plain ASGI endpoint, first in the routing table (it answers
    # with ASGI messages; FastAPI's request and response classes cost more than storing
    # the event, bench/bench_hooks.py). Its OpenAPI entry is added by `_openapi` below.
    hooks = routes_hooks.HookEndpoint(service, hook_token)
    app.router.routes.insert(0, Route("/api/hooks", hooks, methods=["POST"]))
    app.openapi = functools.partial(_openapi, app)  # type: ignore[method-assign]

    @app.exception_handler(Exception)
    async def _unhandled(request: Request, exc: Exception) -> PlainTextResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        if request.url.path == "/api/hooks":  # the hook path answers 200, whatever happens
            return PlainTextResponse("", status_code=200)
        return PlainTextResponse("internal error\n", status_code=500)

    @app.get("/api/health", summary="Version, database, uptime, row counts, counters")
    def health() -> JSONResponse:
        return JSONResponse(service.health())

    from tma1.auth.hooktoken import data_dir_tag

    ping_headers = {"X-TMA1-Data-Dir": data_dir_tag(service.settings.data_dir)}

    @app.get("/api/ping", summary="A trivial endpoint (benchmarks compare against it)")
    async def ping() -> PlainTextResponse:
        return PlainTextResponse("", headers=ping_headers)

    for module in (routes_hooks, routes_anomalies, routes_gates, routes_sessions, routes_agent):
        app.include_router(module.router)

    used_codes: dict[str, float] = {}

    @app.get("/", include_in_schema=False)
    def index(request: Request) -> Response:
        """The dashboard's shell (no data in it). `?login=CODE` (the one-time URL `tma1
        serve` and `tma1 doctor` print) trades the code for a session cookie and sends
        the browser on to the clean URL, so the code leaves the address bar."""
        code = request.query_params.get("login")
        if code is None or hook_token is None:
            return FileResponse(STATIC_DIR / "index.html")
        from tma1.auth.hooktoken import LOGIN_TTL_S, login_code_ok, session_value

        now = time.time()
        for old in [c for c, t in used_codes.items() if t < now - LOGIN_TTL_S]:
            del used_codes[old]
        if code in used_codes or not login_code_ok(hook_token, code, now):
            log.warning("dashboard login refused: a used, expired or foreign login code")
            # The page itself says what to do when its API calls come back 401.
            return FileResponse(STATIC_DIR / "index.html", status_code=401)
        used_codes[code] = now
        resp = RedirectResponse("/", status_code=303)
        resp.set_cookie(
            COOKIE,
            session_value(hook_token, now),
            max_age=30 * 24 * 3600,
            path="/",
            httponly=True,
            samesite="strict",
        )
        return resp

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema, plus `POST /api/hooks` (a Starlette route: FastAPI skips it)."""
    schema = app.openapi_schema or FastAPI.openapi(app)  # built once, kept in openapi_schema
    schema["paths"]["/api/hooks"] = routes_hooks.OPENAPI_PATH
    return schema


class PortInUseError(RuntimeError):
    pass


def check_port_free(host: str, port: int) -> None:
    """Fail with a clear message before uvicorn would print a stack trace."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                raise PortInUseError(
                    f"cannot listen on {host}:{port}: the address is in use "
                    f"(is another tma1 running? set TMA1_PORT or --port)"
                ) from None
            why = exc.strerror or str(exc)
            raise PortInUseError(
                f"cannot listen on {host}:{port}: {why} (set TMA1_HOST or --host to a "
                "loopback address of this machine: 127.0.0.1, the default, or ::1)"
            ) from None


class _Server(uvicorn.Server):
    """uvicorn's server, calling `on_listening` once its socket is bound and listening."""

    def __init__(self, config: uvicorn.Config, on_listening: Callable[[], None] | None) -> None:
        super().__init__(config)
        self.on_listening = on_listening

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and not self.should_exit and self.on_listening is not None:
            self.on_listening()


def run_server(
    service: Service,
    *,
    host: str,
    port: int,
    hook_token: str | None,
    log_level: str = "info",
    on_listening: Callable[[], None] | None = None,
) -> None:
    from tma1.server.connections import protocol_class, raise_nofile

    check_port_free(host, port)
    raise_nofile()
    app = create_app(service, hook_token=hook_token)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level.lower(),
        access_log=False,
        lifespan="on",
        # Loopback only: no proxy in front whose X-Forwarded-* headers could be trusted,
        # and no `server`/`date` headers the hook script would read for nothing.
        proxy_headers=False,
        server_header=False,
        date_header=False,
        timeout_graceful_shutdown=5,
        # A connection idle after an answer closes in 5 s; one that never sends a request
        # head (or drips it) in connections.HEAD_TIMEOUT_S, and is the first to go when
        # descriptors run short (server/connections.py).
        timeout_keep_alive=5,
        http=protocol_class(),
    )
    server = _Server(config, on_listening)
    # uvicorn logs why it could not start (a bind that lost a race with another process),
    # and may exit doing so: say it plainly.
    with contextlib.suppress(SystemExit):
        server.run()
    if not server.started:
        raise PortInUseError(f"cannot listen on {host}:{port}: see the log above")
