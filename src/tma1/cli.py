"""`tma1` command line. Each subcommand lives in its own module with `register()`."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from tma1 import __version__
from tma1.commands import anomalies, demo, doctor, install, mcp, mute, replay, serve, service
from tma1.config import ConfigError

EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE

# Modules that each add one or more subcommands: `register(subparsers) -> None`, and
# set `func=callable(args) -> int` on their parser. In the order `tma1 --help` lists them.
COMMAND_MODULES = (
    serve,
    anomalies,  # anomalies, gates, label
    install,  # install, uninstall
    demo,
    replay,  # replay, export
    mcp,
    service,  # service install|uninstall|status
    doctor,
    mute,  # mute (list), unmute
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
    for module in COMMAND_MODULES:
        module.register(sub)
    _remember_parsers(parser)
    return parser


def _remember_parsers(parser: argparse.ArgumentParser) -> None:
    """Each subcommand's parser records itself in the namespace (the deepest one parsed
    last wins), so an unknown option is reported with that command's usage."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                child.set_defaults(_parser=child)
                _remember_parsers(child)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        getattr(args, "_parser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not as an "Exception ignored" at exit
        return code
    except ConfigError as exc:
        print(f"tma1: configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`tma1 anomalies --json | head`): stop quietly, with the
        # status of a program ended by SIGPIPE, as `git log | head` does.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
