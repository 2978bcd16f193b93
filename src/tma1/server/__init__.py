"""The HTTP server: hook ingest, read-only APIs and the dashboard."""

from typing import Annotated

from fastapi import Depends, Request

from tma1.live.service import Service


async def _service(request: Request) -> Service:
    # async: FastAPI would run a plain function in its thread pool, for one attribute read.
    return request.app.state.service  # type: ignore[no-any-return]


# The running Service, as a route parameter (`create_app` puts it on the app).
ServiceDep = Annotated[Service, Depends(_service)]
