"""Connection hygiene: no connection holds a file descriptor for nothing.

uvicorn closes a keep-alive connection that stays idle after a response, but not one that
never sends a request, nor one that drips its request head a byte at a time: 1,100 such
connections from another local user once used up the service's 1,024 file descriptors, and
the agents' hooks found the door shut (issue 31). Here a connection must have sent a whole
request head within HEAD_TIMEOUT_S of opening (or of its previous answer), and when
connections near the descriptor limit the ones still waiting for a request head are closed,
oldest first, so a hook that sends its request at once always finds room.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from typing import Any

log = logging.getLogger("tma1.server")

# A hook, the dashboard and `tma1 mcp` send their request head the moment they connect.
HEAD_TIMEOUT_S = 5.0
# Descriptors kept for everything but client connections (database, file watchers, logs).
RESERVED_FDS = 256


def raise_nofile() -> int:
    """Raise this process's soft limit on open files to its hard limit (a service manager
    often starts it at 1,024); the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:  # macOS caps it below an "unlimited" hard
            log.info("cannot raise the open-file limit from %d: %s", soft, exc)
    return int(soft)


def max_connections() -> int:
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return 1 << 20
    return max(64, int(soft) - RESERVED_FDS)


def guarded(base: type[asyncio.Protocol]) -> type[asyncio.Protocol]:
    """`base` (uvicorn's httptools or h11 protocol) with a request-head timeout and
    eviction of connections still waiting for a request when descriptors run short."""

    class Guarded(base):  # type: ignore[valid-type,misc]
        limit = max_connections()

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._head_timer: asyncio.TimerHandle | None = None
            self._arm()
            if len(self.connections) > self.limit:
                _evict(self.connections, keep=self, excess=len(self.connections) - self.limit)

        def _arm(self) -> None:
            # The cycle in place now: until another one starts, no request has begun.
            self._armed_cycle = self.cycle
            self._waiting_since = self.loop.time()
            self._head_timer = self.loop.call_later(HEAD_TIMEOUT_S, self._head_timeout)

        def waiting(self) -> bool:
            return self.cycle is self._armed_cycle and not self.transport.is_closing()

        def _head_timeout(self) -> None:
            self._head_timer = None
            if self.waiting():
                self.transport.close()  # idle since it opened, or dripping its head

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self._head_timer is not None:
                self._head_timer.cancel()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            timer = getattr(self, "_head_timer", None)
            if timer is not None:
                timer.cancel()
                self._head_timer = None
            super().connection_lost(exc)

    Guarded.__name__ = Guarded.__qualname__ = f"Guarded{base.__name__}"
    return Guarded


def _evict(connections: set[Any], *, keep: Any, excess: int) -> None:
    """Close the connections that have waited longest for a request head (a batch, so
    that a flood does not pay a scan per connection)."""
    idle = sorted(
        (c for c in connections if c is not keep and hasattr(c, "waiting") and c.waiting()),
        key=lambda c: c._waiting_since,
    )
    batch = idle[: excess + 64]
    for c in batch:
        c.transport.close()
    log.warning(
        "%d connections open, near the open-file limit: closed the %d that sent no request",
        len(connections),
        len(batch),
    )


def protocol_class() -> type[asyncio.Protocol]:
    """What uvicorn's `http="auto"` would pick, guarded."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        return guarded(HttpToolsProtocol)
    except ImportError:  # httptools is optional
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return guarded(H11Protocol)
