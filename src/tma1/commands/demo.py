"""`tma1 demo`: the first-run experience — a scripted session that shows all six findings."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "demo",
        help="play a scripted agent session and show what tma1 tells the agent",
        description=(
            "Start a tma1 server on a temporary data dir and a temporary git project, play a "
            "scripted Claude Code session through the real hook script, and show what the "
            "agent was told for each of the six kinds, then the dashboard URL and the gates. "
            "Takes a few seconds (it says how long); touches nothing outside a temporary "
            "directory."
        ),
    )
    p.add_argument(
        "--keep",
        action="store_true",
        help="leave the server running (until Ctrl-C) to browse the dashboard",
    )
    p.add_argument("--port", type=int, help="port for the demo server (default: a free one)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tma1.commands._args import check_port
    from tma1.demo import run_demo

    check_port(args.port)
    return run_demo(keep=args.keep, port=args.port)
