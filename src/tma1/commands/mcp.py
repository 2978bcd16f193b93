"""`tma1 mcp`: the Model Context Protocol server over stdio, for Claude Code and Codex.

stdout carries protocol frames only; every log line goes to stderr.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

log = logging.getLogger("tma1.mcp")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "mcp",
        help="run the MCP server over stdio (agents start this themselves)",
        description=(
            "Serve the tma1 MCP tools (get_anomalies, get_session_state, get_external_changes, "
            "get_session_bundle, dismiss_anomaly, confirm_anomaly) over stdio. It talks to the "
            "running tma1 at TMA1_HOST:TMA1_PORT; `tma1 install` registers it with Claude Code "
            "and Codex."
        ),
    )
    p.add_argument("--host", help="tma1 server address (TMA1_HOST, default 127.0.0.1)")
    p.add_argument("--port", type=int, help="tma1 server port (TMA1_PORT, default 14318)")
    p.add_argument(
        "--data-dir", type=Path, help="where the token is (TMA1_DATA_DIR, default ~/.tma1)"
    )
    p.add_argument(
        "--session-id",
        help="always answer about this session (default: the newest in the working directory)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import anyio

    from tma1.commands._args import cli_settings, read_token, setup_logging
    from tma1.mcp.api import Tma1Api, base_url
    from tma1.mcp.server import build_server

    settings = cli_settings(args)
    setup_logging(settings.log_level)  # stderr; never stdout
    # The SDK logs every request at INFO: noise in the agent's MCP log.
    quiet = max(logging.WARNING, logging.getLogger().level)
    logging.getLogger("mcp").setLevel(quiet)
    logging.getLogger("httpx").setLevel(quiet)  # a line per request to the server: the same
    url = base_url(settings)
    cwd = os.getcwd()
    log.info("tma1 mcp: asking %s; sessions resolve from %s", url, cwd)
    api = Tma1Api(url, token=read_token(settings.token_path))
    server = build_server(api, cwd=cwd, pinned_session=args.session_id)

    async def serve() -> None:
        try:
            await server.run_stdio_async()
        finally:
            await api.aclose()

    anyio.run(serve)
    return 0
