"""`tma1 mute` / `tma1 unmute`: silence a kind that is wrong for a project (design §2.20).

A muted kind is still computed and shown as muted (the preview, the dashboard, MCP's
get_anomalies) but never delivered to the agent, so never emitted. Mutes live in
`mutes.json` in the data dir; a running `tma1 serve` picks a change up on its next hook.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from tma1.clock import SystemClock
from tma1.config import ConfigError, load_settings, parse_duration


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from tma1 import gates

    m = sub.add_parser(
        "mute",
        help="stop delivering a kind (still computed and shown as muted); no KIND: list",
        description=(
            "Mute KIND: its findings are still computed and shown as muted in the preview, "
            "the dashboard and MCP, but never delivered to the agent (so never emitted). "
            "Without KIND, list the mutes."
        ),
    )
    m.add_argument("kind", nargs="?", choices=gates.KINDS, metavar="KIND", help="the kind")
    m.add_argument(
        "--project",
        help="only this project (its directory; default: every project)",
    )
    m.add_argument(
        "--for",
        dest="duration",
        help="end the mute after this long (30m, 12h, 7d; default: until unmuted)",
    )
    m.add_argument("--data-dir", type=Path, help="data directory (TMA1_DATA_DIR, ~/.tma1)")
    m.set_defaults(func=run_mute)

    u = sub.add_parser(
        "unmute",
        help="deliver a muted kind again",
        description="Remove the mute of KIND (for --project P, or the all-projects mute).",
    )
    u.add_argument("kind", choices=gates.KINDS, metavar="KIND", help="the kind")
    u.add_argument("--project", help="the project the mute was for (default: every project)")
    u.add_argument("--data-dir", type=Path, help="data directory (TMA1_DATA_DIR, ~/.tma1)")
    u.set_defaults(func=run_unmute)


def _path(args: argparse.Namespace) -> Path:
    from tma1.live.mutes import MUTES_FILE

    settings = load_settings(only=("TMA1_DATA_DIR",)).with_overrides(data_dir=args.data_dir)
    data_dir = settings.data_dir.expanduser()
    if not data_dir.is_dir():
        # A mistyped --data-dir must not become a new directory no server reads.
        raise ConfigError(
            f"no tma1 data dir at {data_dir}: check --data-dir (TMA1_DATA_DIR); "
            "`tma1 serve` creates it on first start"
        )
    return data_dir / MUTES_FILE


def _project(raw: str | None) -> str | None:
    """The project as the engine names it: the git top-level of the directory."""
    if raw is None:
        return None
    from tma1.events import project_for

    path = os.path.abspath(os.path.expanduser(raw))
    if not os.path.isdir(path):
        raise ConfigError(f"--project {raw}: no such directory; give the project's directory")
    return project_for(path)


def _describe(kind: str, project: str | None, until: int | None) -> str:
    where = f"in {project}" if project else "in every project"
    when = None if until is None else datetime.fromtimestamp(until / 1000, tz=UTC)
    end = f"until {when:%Y-%m-%d %H:%M UTC}" if when else "until `tma1 unmute`"
    return f"{kind} {where}, {end}"


def run_mute(args: argparse.Namespace) -> int:
    from tma1.engine.mutes import Mute
    from tma1.live.mutes import add_mute, read_mutes

    path = _path(args)
    now = SystemClock().now_ms()
    if args.kind is None:
        if args.project or args.duration:
            raise ConfigError("--project and --for need a KIND: tma1 mute KIND --project P")
        live = [m for m in read_mutes(path) if m.until_ms is None or m.until_ms > now]
        if not live:
            print("no kind is muted")
            return 0
        for m in live:
            print(f"muted: {_describe(m.kind, m.project, m.until_ms)}")
        return 0
    until = now + parse_duration("--for", args.duration) * 1000 if args.duration else None
    project = _project(args.project)
    add_mute(path, Mute(kind=args.kind, project=project, until_ms=until, since_ms=now))
    print(
        f"muted {_describe(args.kind, project, until)}: still computed and shown as muted, "
        "never delivered"
    )
    return 0


def run_unmute(args: argparse.Namespace) -> int:
    from tma1.live.mutes import read_mutes, remove_mute

    path = _path(args)
    project = _project(args.project)
    gone = remove_mute(path, args.kind, project)
    where = f"in {project}" if project else "in every project"
    if gone is None:
        others = [m for m in read_mutes(path) if m.kind == args.kind]
        hint = (
            "; it is muted "
            + ", ".join(_describe(m.kind, m.project, m.until_ms) for m in others)
            + " (unmute with the same --project)"
            if others
            else ""
        )
        print(f"tma1: {args.kind} was not muted {where}{hint}", file=sys.stderr)
        return 1
    print(f"unmuted {args.kind} {where}: its findings are delivered again")
    return 0
