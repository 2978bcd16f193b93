"""`tma1 install` / `tma1 uninstall`: wire the hook script into Claude Code and Codex."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from tma1.config import ConfigError, Settings, load_settings


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    for name, verb, desc in (
        (
            "install",
            "register",
            "Write the hook script under the data dir and register it with the agent "
            "(Claude Code: ~/.claude/settings.json; Codex: ~/.codex/hooks.json; Gemini CLI: "
            "~/.gemini/settings.json; Copilot CLI: ~/.copilot/settings.json; `all` takes "
            "Gemini and Copilot only where their directory exists). Running it "
            "again replaces tma1's entries in place; your own entries are kept.",
        ),
        (
            "uninstall",
            "remove",
            "Remove exactly what `tma1 install` added (the script and tma1's hook entries).",
        ),
    ):
        p = sub.add_parser(name, help=f"{verb} tma1's hooks with an agent", description=desc)
        p.add_argument(
            "--adapter",
            choices=("claude-code", "codex", "gemini", "copilot", "all"),
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
        p.set_defaults(func=run_install if name == "install" else run_uninstall)


def _settings(args: argparse.Namespace) -> Settings:
    settings = load_settings()
    port = getattr(args, "port", None)
    if port is not None and not 1 <= port <= 65_535:
        raise ConfigError(f"--port {port} is out of range (1..65535)")
    data_dir = args.data_dir or settings.data_dir
    return settings.with_overrides(
        # Absolute: the script, the token and the state file must not depend on the cwd.
        data_dir=data_dir.expanduser().absolute(),
        host=getattr(args, "host", None),
        port=port,
    )


def run_install(args: argparse.Namespace) -> int:
    return _run(args, installing=True)


def run_uninstall(args: argparse.Namespace) -> int:
    return _run(args, installing=False)


def _run(args: argparse.Namespace, *, installing: bool) -> int:
    from tma1.adapters import get_adapters
    from tma1.adapters.files import InstallError
    from tma1.adapters.registration import InstallState, plan_all
    from tma1.token import ensure_token

    settings = _settings(args)
    transport = getattr(args, "transport", "command")
    token: str | None = None
    if installing and transport == "http":
        # The http hook carries the token itself; a dry run shows where it would go.
        token = (
            _existing_token(settings.token_path) or "<the token install creates>"
            if args.dry_run
            else ensure_token(settings.token_path)
        )
    adapters = get_adapters(args.adapter, settings, transport=transport, token=token)
    state = InstallState.load(settings.data_dir)
    try:
        plans = [(a, plan_all(a.registrations, state, installing=installing)) for a in adapters]
    except InstallError as exc:
        print(f"tma1: {exc}", file=sys.stderr)
        return 1

    out = sys.stdout
    if args.dry_run:
        print("dry run: nothing is written", file=out)
    failed = False
    for adapter, changes in plans:
        print(f"\n{adapter.title}", file=out)
        for reg, change in changes:
            if args.dry_run:
                verb = f"would {change.verb}" if change.changed else change.verb
                print(f"  {verb:<15} {change.path}  ({change.what})", file=out)
                if change.changed and change.show_diff:
                    for line in change.diff().splitlines():
                        print(f"    {line}", file=out)
                continue
            if failed:
                continue
            try:
                backup = change.apply()
                reg.record(change, state, installing=installing)
            except OSError as exc:
                print(f"tma1: cannot change {change.path}: {exc}", file=sys.stderr)
                failed = True
                continue
            extra = f"; backup {backup.name}" if backup else ""
            print(f"  {change.verb:<10} {change.path}  ({change.what}{extra})", file=out)
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
                "silent without it (install curl)",
                file=out,
            )
        for adapter, _ in plans:
            if adapter.status is not None:
                print(f"  {adapter.status()}", file=out)
            for note in adapter.notes:
                print(f"  note: {note}", file=out)
        print(f"\ntoken   {settings.token_path}", file=out)
        print(f"server  {_server_status(settings)}", file=out)
        from tma1.service_unit import install_hint

        if hint := install_hint():
            print(f"\n{hint}", file=out)
    else:
        print("\ntma1's hooks are removed (the data dir and token are kept).", file=out)
    return 0


def _existing_token(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip() or None
    except (OSError, ValueError):
        return None


def _server_status(settings: Settings) -> str:
    import httpx

    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    url = f"http://{host}:{settings.port}"
    try:
        httpx.get(f"{url}/api/ping", timeout=1.0, trust_env=False).raise_for_status()
    except httpx.HTTPError:
        return f"not running at {url}: start it with `tma1 serve` (hooks stay silent until then)"
    return f"running at {url}"
