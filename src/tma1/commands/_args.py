"""Argument types the subcommands share."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tma1.config import ConfigError, load_settings, validate_database_url

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


def add_database_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", type=Path, help="data directory (TMA1_DATA_DIR, ~/.tma1)")
    p.add_argument("--database-url", help="SQLAlchemy URL (TMA1_DATABASE_URL)")


def database_url(args: argparse.Namespace) -> str:
    """The database these options (or the environment, or the defaults) name."""
    settings = load_settings().with_overrides(
        data_dir=args.data_dir,
        database_url=validate_database_url("--database-url", args.database_url)
        if args.database_url
        else None,
    )
    return settings.effective_database_url


def open_store(url: str) -> Store:
    """The store at `url` (migrated), or a ConfigError that names it."""
    from tma1.store import Store

    try:
        return Store.open(url)
    except Exception as exc:
        raise ConfigError(f"cannot open the database {url}: {exc}") from None
