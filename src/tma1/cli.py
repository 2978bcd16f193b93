"""`tma1` command line. Each subcommand lives in its own module with `register()`."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from tma1 import __version__
from tma1.config import ConfigError

# Modules that each add one or more subcommands: `register(subparsers) -> None`, and
# set `func=callable(args) -> int` on their parser.
COMMAND_MODULES = (
    "tma1.commands.serve",
    "tma1.commands.anomalies",  # anomalies, gates, label
    "tma1.commands.install",  # install, uninstall
    "tma1.commands.demo",
    "tma1.commands.replay",  # replay, export
    "tma1.commands.mcp",
    "tma1.commands.service",  # service install|uninstall|status
)


def installed_version() -> str:
    """The version pip/pipx/uv installed (package metadata); the source's when not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tma1")
    except PackageNotFoundError:
        return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tma1", description="Watch AI coding agents through their hooks and talk back."
    )
    parser.add_argument("--version", action="version", version=f"tma1 {installed_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue  # not built yet
            raise
        module.register(sub)
    return parser


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"tma1: configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
