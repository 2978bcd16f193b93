"""`tma1 install` / `tma1 uninstall`: wire the hook script into Claude Code and Codex."""

from __future__ import annotations

import argparse
import shutil
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from tma1.commands._args import cli_settings, read_token
from tma1.config import Settings

if TYPE_CHECKING:
    from tma1.adapters.files import FilePlan


def _registered() -> str:
    """What install writes for each agent, from its AgentSpec (paths under `~`)."""
    from tma1.adapters.agents import SPECS
    from tma1.adapters.registration import ScriptRegistration

    settings = Settings(data_dir=Path("~/.tma1"))
    return "; ".join(
        ", ".join(
            f"{r.label} in {r.path}"
            for r in spec.adapter(settings, {"HOME": "~"}).registrations
            if not isinstance(r, ScriptRegistration)
        )
        for spec in SPECS.values()
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from tma1.adapters.agents import NAMES  # the agents' modules (tma1.adapters.agents)

    for name, verb, desc in (
        (
            "install",
            "register",
            "Write the hook script under the data dir and register it with the agent: "
            f"{_registered()}. `all`: the agents found on this machine (their "
            "config directory, or their command on PATH), saying which it skipped. Only "
            "tma1's entries change (your own keep their bytes); "
            "a file's first change leaves a FILE.tma1-backup of it as it was. Running it "
            "again replaces tma1's entries in place. See --dry-run for the exact diff.",
        ),
        (
            "uninstall",
            "remove",
            "Remove exactly what `tma1 install` added (the script, tma1's hook entries and "
            "MCP server entries). A file that comes back byte for byte as it was before "
            "install has its .tma1-backup removed; otherwise the backup (your file from "
            "before install) is kept.",
        ),
    ):
        p = sub.add_parser(name, help=f"{verb} tma1's hooks with an agent", description=desc)
        p.add_argument(
            "--adapter",
            choices=(*NAMES, "all"),
            default="claude-code",
            help="which agent (default: claude-code)",
        )
        p.add_argument(
            "--dry-run", action="store_true", help="print the changes as a diff; write nothing"
        )
        p.add_argument("--data-dir", type=Path, help="data directory (TMA1_DATA_DIR, ~/.tma1)")
        if name == "install":
            p.add_argument("--host", help="server address baked into the script (TMA1_HOST)")
            p.add_argument("--port", type=int, help="server port baked into the script (TMA1_PORT)")
            p.add_argument(
                "--transport",
                choices=("command", "http"),
                default="command",
                help="Claude Code only. command (default): the hook script, silent when tma1 "
                "is down. http: Claude Code's native http hooks for every event but "
                "SessionStart (cheaper per event; Claude Code shows an error on every hook "
                "while tma1 is down)",
            )
        p.set_defaults(func=partial(_run, installing=name == "install"))


def _run(args: argparse.Namespace, *, installing: bool) -> int:
    from tma1.adapters import executable, get_adapters
    from tma1.adapters.files import InstallError
    from tma1.adapters.registration import InstallState, plan_all
    from tma1.auth.hooktoken import ensure_token

    settings = cli_settings(args)
    transport = getattr(args, "transport", "command")
    token: str | None = None
    if installing and transport == "http":
        # The http hook carries the token itself; a dry run shows where it would go.
        token = (
            read_token(settings.token_path) or "<the token install creates>"
            if args.dry_run
            else ensure_token(settings.token_path)
        )
    adapters = get_adapters(args.adapter, settings, transport=transport, token=token)
    if args.adapter == "all":
        skipped = [
            a for a in get_adapters("every", settings) if a.name not in {b.name for b in adapters}
        ]
        for a in skipped:
            print(
                f"skipped {a.title}: not found on this machine (no {a.hooks.path.parent}, no "
                f"`{executable(a.name)}` on PATH); `--adapter {a.name}` wires it anyway"
            )
        if not adapters:
            print("tma1: no agent found on this machine: nothing to do", file=sys.stderr)
            return 1
    state = InstallState.load(settings.data_dir)
    try:
        plans = [(a, plan_all(a.registrations, state, installing=installing)) for a in adapters]
    except InstallError as exc:
        print(f"tma1: {exc}", file=sys.stderr)
        return 1
    if installing and not args.dry_run:
        from tma1.privacy import prepare_data_dir

        prepare_data_dir(settings.data_dir)  # 0700 before the script and token go in

    if args.dry_run:
        print("dry run: nothing is written")
    failed = False
    for adapter, changes in plans:
        print(f"\n{adapter.title}")
        for reg, change in changes:
            if args.dry_run:
                print(change.report(dry_run=True))
                continue
            if failed:
                continue
            try:
                # Install backs up a file tma1 has no record of (the user's own); uninstall
                # never writes one, and drops it after a byte-identical restore.
                first = str(change.path) not in state.files
                backup = change.apply(write_backup=installing and first)
                reg.record(change, state, installing=installing)
                kept = _settle_backup(change) if not installing else None
            except OSError as exc:
                print(f"tma1: cannot change {change.path}: {exc}", file=sys.stderr)
                failed = True
                continue
            extra = f"; backup {backup.name}" if backup else ""
            if not installing and kept is not None:
                extra = f"; your file from before install is kept in {kept.name}"
            print(f"  {change.verb:<10} {change.path}  ({change.what}{extra})")
    if args.dry_run:
        return 0
    state.save()
    if failed:
        return 1

    if installing:
        ensure_token(settings.token_path)
        if shutil.which("curl") is None:
            print(
                "  warning: curl is not on PATH; the hook script posts with it and stays "
                "silent without it (install curl)"
            )
        for adapter, _ in plans:
            if adapter.status is not None:
                print(f"  {adapter.status()}")
            for note in adapter.notes:
                print(f"  note: {note}")
        print(f"\ntoken   {settings.token_path}")
        print(f"server  {_server_status(settings)}")
        from tma1.autostart import install_hint

        if hint := install_hint():
            print(f"\n{hint}")
    else:
        print("\ntma1's hooks are removed (the data dir and token are kept).")
    return 0


def _settle_backup(change: FilePlan) -> Path | None:
    """After uninstall: remove the backup when the file is back byte for byte as it was
    (or gone, as install found it); the backup's path when it is kept."""
    backup = change.backup_path
    if not backup.exists():
        return None
    try:
        same = change.after is None or backup.read_bytes() == change.after
    except OSError:
        return backup
    if same and change.changed:
        backup.unlink(missing_ok=True)
        return None
    return backup


def _server_status(settings: Settings) -> str:
    import httpx

    from tma1.mcp.api import base_url

    url = base_url(settings)
    try:
        httpx.get(f"{url}/api/ping", timeout=1.0, trust_env=False).raise_for_status()
    except httpx.HTTPError:
        return f"not running at {url}: start it with `tma1 serve` (hooks stay silent until then)"
    return f"running at {url}"
