"""`tma1 serve`: run the daemon on 127.0.0.1:14318 with the embedded SQLite default."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from tma1.config import Settings, load_settings

log = logging.getLogger("tma1")

# One server per data dir (its file watcher, outage journal and suppression state are the
# data dir's, whichever database it uses): an flock on this file, which holds the pid and
# port of the server that has it. The kernel drops the lock when the process dies, so a
# file left by a crash never blocks a restart.
LOCK_FILE = "serve.lock"


class DataDirInUse(RuntimeError):
    pass


@contextlib.contextmanager
def data_dir_lock(data_dir: Path, port: int) -> Iterator[None]:
    """Hold the data dir's lock while the block runs, or raise DataDirInUse naming the
    server that holds it."""
    path = data_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = dict(
                part.split("=", 1)
                for part in os.pread(fd, 256, 0).decode("ascii", "replace").split()
                if "=" in part
            )
            raise DataDirInUse(
                f"another tma1 serve (pid {holder.get('pid', '?')}, port "
                f"{holder.get('port', '?')}) is using the data dir {data_dir}; stop it, or "
                "give this one another --data-dir (TMA1_DATA_DIR)"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid={os.getpid()} port={port}\n".encode("ascii"), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)  # said nothing stale; the lock goes with the descriptor
    finally:
        os.close(fd)


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
    from tma1.server.app import PortInUseError, check_port_free

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
    try:
        with data_dir_lock(settings.data_dir, settings.port):
            return _serve(settings)
    except DataDirInUse as exc:
        print(f"tma1: {exc}", file=sys.stderr)
        return 1


def _serve(settings: Settings) -> int:
    from tma1.auth.hooktoken import ensure_token
    from tma1.live.service import build_service
    from tma1.server.app import PortInUseError, run_server

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
        from tma1.auth.hooktoken import login_url
        from tma1.mcp.api import base_url

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
