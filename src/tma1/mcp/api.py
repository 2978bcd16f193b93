"""The MCP server's view of the running tma1: a small async HTTP client with clear errors.

Every failure becomes a `Tma1Error` whose message an agent can act on (the server is not
running and how to start it; the server is too old for an endpoint; a request was refused).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import httpx

from tma1.config import Settings

log = logging.getLogger("tma1.mcp")

DEFAULT_TIMEOUT_S = 5.0


class Tma1Error(Exception):
    """A tool cannot answer. The message is shown to the agent as the tool's error text."""


class Tma1NotFound(Tma1Error):
    """The server answered 404 for a thing (a session, an emit) that does not exist."""


def base_url(settings: Settings) -> str:
    host = settings.host
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 literal
    return f"http://{host}:{settings.port}"


def _detail(response: httpx.Response) -> str | None:
    """FastAPI's `detail` text; None when the body is not tma1's JSON error shape."""
    try:
        body = response.json()
    except ValueError:
        return None
    if not isinstance(body, dict) or "detail" not in body:
        return None
    detail = body["detail"]
    if isinstance(detail, list):  # FastAPI validation errors
        return "; ".join(
            f"{'.'.join(str(p) for p in d.get('loc', []))}: {d.get('msg')}"
            for d in detail
            if isinstance(d, dict)
        )
    return str(detail)


class Tma1Api:
    """One AsyncClient per MCP server process; loopback only, proxies from env ignored.
    `token`: the hook token (the server refuses every read without it)."""

    def __init__(
        self, url: str, *, token: str | None = None, timeout: float = DEFAULT_TIMEOUT_S
    ) -> None:
        self.url = url.rstrip("/")
        # trust_env=False: an HTTP(S)_PROXY in the agent's environment must not route
        # loopback calls through a proxy (which would also see the Host check fail).
        self._client = httpx.AsyncClient(
            base_url=self.url,
            timeout=timeout,
            trust_env=False,
            headers={"X-TMA1-Token": token} if token else None,
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def get(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        return await self.request("GET", path, params=params)

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Mapping[str, Any] | None = None,
    ) -> Any:
        clean = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = await self._client.request(method, path, params=clean, json=json)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            log.info("tma1 unreachable at %s: %s", self.url, exc)
            raise Tma1Error(
                f"tma1 is not running at {self.url}. Start it with `tma1 serve` (it listens on "
                "TMA1_HOST:TMA1_PORT, default 127.0.0.1:14318). If it runs on another address, "
                "set TMA1_HOST and TMA1_PORT in this MCP server's environment."
            ) from None
        except httpx.TimeoutException:
            raise Tma1Error(
                f"tma1 at {self.url} did not answer {method} {path} in time; it may be "
                "overloaded or stuck — check its log, or restart `tma1 serve`."
            ) from None
        except httpx.HTTPError as exc:
            raise Tma1Error(f"talking to tma1 at {self.url} failed: {exc}") from None
        status = response.status_code
        if status < 300:
            try:
                return response.json()
            except ValueError:
                raise Tma1Error(
                    f"tma1 at {self.url} answered {method} {path} with something that is not "
                    "JSON; is another program listening on that port?"
                ) from None
        detail = _detail(response)
        if status == 404 and detail in (None, "Not Found", ""):
            # The route itself is missing: an older server, or not tma1 at all.
            raise Tma1Error(
                f"the server at {self.url} has no {method} {path.split('?')[0]}; it may be an "
                "older tma1 — restart `tma1 serve` from the same installation as `tma1 mcp`."
            )
        if status == 404:
            raise Tma1NotFound(detail)
        if detail is None:
            detail = response.text.strip()[:300]
        if status in (401, 403):
            raise Tma1Error(
                f"tma1 at {self.url} refused {method} {path}: {detail}. `tma1 mcp` sends the "
                "token in $TMA1_DATA_DIR/hook-token: give this MCP server the data dir the "
                "server uses (TMA1_DATA_DIR, or --data-dir)"
            )
        if status in (409, 422):
            raise Tma1Error(f"tma1 rejected the request: {detail}")
        raise Tma1Error(f"tma1 at {self.url} failed on {method} {path} (HTTP {status}): {detail}")
