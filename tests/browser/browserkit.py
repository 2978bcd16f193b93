"""What the browser tests share: the Chromium they drive (Debian's, headless, nothing
reaching outside loopback) and the dashboard login a user makes with the one-time URL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tma1.auth.hooktoken import login_code

CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium, closed on the way out."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            yield b
        finally:
            b.close()


def login(ctx: Any, srv: Any) -> Any:
    """Open the one-time login URL in this browser context, as the user opens the one
    `tma1 serve` prints (its session cookie then rides on every page and API call)."""
    r = ctx.request.get(f"{srv.url}/?login={login_code(srv.token)}")
    assert r.ok
    return r
