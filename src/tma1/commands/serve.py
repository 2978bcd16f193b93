"""`tma1 serve`: run the daemon on 127.0.0.1:14318 with the embedded SQLite default."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from tma1.config import load_settings

log = logging.getLogger("tma1")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "serve",
        help="run the tma1 daemon",
        description="Run the tma1 daemon (hook ingest, engine, dashboard).",
    )
    p.add_argument("--host", help="bind address (TMA1_HOST, default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (TMA1_PORT, default 14318)")
    p.add_argument("--data-dir", type=Path, help="data directory (TMA1_DATA_DIR, ~/.tma1)")
    p.add_argument("--database-url", help="SQLAlchemy URL (TMA1_DATABASE_URL)")
    p.add_argument("--log-level", help="DEBUG|INFO|WARNING|ERROR (TMA1_LOG_LEVEL)")
    p.add_argument("--no-watch", action="store_true", help="do not watch project files")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tma1.commands._args import check_port, setup_logging
    from tma1.config import validate_database_url
    from tma1.privacy import check_loopback_host, prepare_data_dir
    from tma1.server.app import PortInUseError, check_port_free, run_server
    from tma1.service import build_service
    from tma1.token import ensure_token

    settings = load_settings()
    check_port(args.port)
    settings = settings.with_overrides(
        host=args.host,
        port=args.port,
        data_dir=args.data_dir,
        database_url=validate_database_url("--database-url", args.database_url)
        if args.database_url
        else None,
        log_level=args.log_level.upper() if args.log_level else None,
        watch_files=False if args.no_watch else None,
    )
    setup_logging(settings.log_level)
    check_loopback_host(settings.host, "--host" if args.host else "TMA1_HOST")
    try:
        check_port_free(settings.host, settings.port)  # before migrations: one line, no log
    except PortInUseError as exc:
        print(f"tma1: {exc}", file=sys.stderr)
        return 1
    prepare_data_dir(settings.data_dir)  # 0700, writable, or a ConfigError naming the fix
    token = ensure_token(settings.token_path)
    try:
        service = build_service(settings, journal=True)  # events of an outage survive kill -9
    except Exception as exc:
        print(
            f"tma1: cannot open the database {settings.effective_database_url}: {exc}",
            file=sys.stderr,
        )
        return 1

    def listening() -> None:  # said once the socket listens, never before
        from tma1.mcp.api import base_url
        from tma1.token import login_url

        log.info(
            "tma1 serving on http://%s:%d (database: %s)",
            settings.host,
            settings.port,
            service.store.dialect,
        )
        # The dashboard answers its data only to a session cookie, which this one-time
        # URL gets the browser (as Jupyter does); `tma1 doctor` prints a fresh one.
        print(
            f"tma1: dashboard: open {login_url(base_url(settings), token)} "
            "(one-time login URL, valid for 24 h; `tma1 doctor` prints a fresh one)",
            flush=True,
        )

    try:
        run_server(
            service,
            host=settings.host,
            port=settings.port,
            hook_token=token,
            log_level=settings.log_level,
            on_listening=listening,
        )
    except PortInUseError as exc:
        print(f"tma1: {exc}", file=sys.stderr)
        return 1
    return 0
