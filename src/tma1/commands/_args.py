"""What the subcommands share: argument types, and the logging set-up."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tma1.config import (
    DATA_VARS,
    ConfigError,
    Settings,
    load_settings,
    validate_database_url,
)

if TYPE_CHECKING:
    from tma1.store import Store


def whole_number(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse type: a whole number in [lo, hi], or a message naming what is wrong."""

    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{raw!r} is not a whole number") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is out of range ({lo}..{hi})")
        return value

    return parse


def check_port(port: int | None) -> None:
    if port is not None and not 1 <= port <= 65_535:
        raise ConfigError(f"--port {port} is out of range (1..65535)")


def cli_settings(args: argparse.Namespace) -> Settings:
    """The settings with the command's --host, --port and --data-dir applied; the data dir
    absolute: the script, the token and the state file must not depend on the cwd."""
    settings = load_settings()
    port = getattr(args, "port", None)
    check_port(port)
    data_dir = getattr(args, "data_dir", None) or settings.data_dir
    return settings.with_overrides(
        data_dir=data_dir.expanduser().absolute(), host=getattr(args, "host", None), port=port
    )


def read_token(path: Path) -> str | None:
    """The hook token at `path`; None when there is none or it cannot be read."""
    try:
        return path.read_text(encoding="ascii").strip() or None
    except (OSError, ValueError):
        return None


def check_new_file(flag: str, path: Path | None, *, force: bool) -> None:
    """One rule for every file a command writes (`export --out`, `replay --db`): an
    existing file is refused, unless `--force` says to overwrite it."""
    if path is not None and path.exists() and not force:
        raise ConfigError(f"{flag} {path} exists; give a new file, or add --force to overwrite it")


def add_database_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", type=Path, help="data directory (TMA1_DATA_DIR, ~/.tma1)")
    p.add_argument("--database-url", help="SQLAlchemy URL (TMA1_DATABASE_URL)")


def database_url(args: argparse.Namespace) -> str:
    """The database these options (or the environment, or the defaults) name."""
    settings = load_settings(only=DATA_VARS).with_overrides(
        data_dir=args.data_dir,
        database_url=validate_database_url("--database-url", args.database_url)
        if args.database_url
        else None,
    )
    return settings.effective_database_url


def add_scope_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scope",
        choices=("machine", "team"),
        default="machine",
        help="this machine's rows (default) or every machine's on a shared database",
    )


def machine_of(args: argparse.Namespace) -> str | None:
    """This machine's id as the daemon of these options stores it (TMA1_MACHINE_ID, or
    the data dir's file: read, never made); None: no daemon ever ran here."""
    from tma1.origin.machine import read_machine_id

    settings = load_settings(only=(*DATA_VARS, "TMA1_MACHINE_ID")).with_overrides(
        data_dir=getattr(args, "data_dir", None)
    )
    return settings.machine_id or read_machine_id(settings.data_dir.expanduser())


def open_store(url: str, *, write: bool = False, machine_id: str | None = None) -> Store:
    """The existing store at `url`, or a ConfigError that names it and the fix.

    Commands that only read (`anomalies`, `gates`, `export`) open a SQLite file read-only
    (no migration, no lock file: a read-only copy works); `write` (`label`) opens it as
    the daemon does. Neither creates a database: a mistyped --data-dir or --database-url
    is an error, not a new empty database."""
    from tma1.privacy import sqlite_path
    from tma1.store import Store

    fix = "check --data-dir / --database-url (TMA1_DATA_DIR, TMA1_DATABASE_URL)"
    path = sqlite_path(url)
    if path is not None and not path.is_file():
        raise ConfigError(
            f"no tma1 database at {path}: {fix}; `tma1 serve` creates it on first start"
        )
    try:
        if path is not None and not write:
            store = Store.open_readonly(path, machine_id=machine_id)
        else:
            store = Store.open(url, migrate=write, machine_id=machine_id)
    except Exception as exc:
        raise ConfigError(f"cannot open the database {url}: {_first(exc)}; {fix}") from None
    try:
        tables = store.table_names()
    except Exception as exc:
        store.close()
        raise ConfigError(f"cannot read the database {url}: {_first(exc)}; {fix}") from None
    if "tma1_hook_events" not in tables:
        store.close()
        raise ConfigError(f"{url} is not a tma1 database (no tma1 tables): {fix}")
    return store


def _first(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def setup_logging(level: str) -> None:
    """Log lines to stderr (stdout is the MCP channel for `tma1 mcp`)."""
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
