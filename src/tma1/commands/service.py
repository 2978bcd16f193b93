"""`tma1 service install|uninstall|status`: keep `tma1 serve` running as a user service.

docs/service.md says why a user service, and what each platform gets.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from tma1 import autostart as su
from tma1.commands._args import check_port
from tma1.config import ConfigError, load_settings


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "service",
        help="keep tma1 running: a systemd user unit (Linux) or a launchd agent (macOS)",
        description=(
            "Install, remove or inspect the user service that keeps `tma1 serve` running "
            "(restarted when it fails; started at login). Linux: "
            "~/.config/systemd/user/tma1.service, logs in the journal "
            "(journalctl --user -u tma1). macOS: ~/Library/LaunchAgents/tma1.serve.plist, "
            "logs in ~/Library/Logs/tma1/. The file is written atomically, never over a "
            "file tma1 did not write, and `uninstall` removes exactly it."
        ),
    )
    verbs = p.add_subparsers(dest="service_command", metavar="ACTION", required=True)
    for name, help_text in (
        ("install", "write the service file, then enable and start it"),
        ("uninstall", "stop and disable the service, then remove its file"),
        ("status", "is the service file there, and is it enabled and running"),
    ):
        v = verbs.add_parser(name, help=help_text, description=help_text)
        v.add_argument(
            "--platform",
            choices=su.PLATFORMS,
            help="which service manager (default: this machine's — systemd on Linux, "
            "launchd on macOS)",
        )
        if name != "status":
            v.add_argument(
                "--dry-run",
                action="store_true",
                help="print the change as a diff and the commands it would run; do nothing",
            )
        v.add_argument(
            "--data-dir",
            type=Path,
            help="data directory the service uses (TMA1_DATA_DIR, ~/.tma1)",
        )
        if name == "install":
            v.add_argument("--host", help="bind address for the service (TMA1_HOST)")
            v.add_argument("--port", type=int, help="port for the service (TMA1_PORT)")
        v.set_defaults(
            func={"install": run_install, "uninstall": run_uninstall}.get(name, run_status)
        )


def _platform(args: argparse.Namespace) -> su.Platform:
    platform: su.Platform | None = args.platform or su.default_platform()
    if platform is None:
        raise ConfigError(
            f"no user service manager tma1 knows on {sys.platform}; run `tma1 serve` yourself"
        )
    return platform


def _data_dir(given: str | Path | None) -> Path:
    return Path(given or load_settings(only=("TMA1_DATA_DIR",)).data_dir).expanduser().absolute()


def _run_steps(steps: list[su.Step], runner: su.Runner) -> bool:
    for argv, must_succeed in steps:
        proc = runner(argv)
        shown = " ".join(argv)
        if proc.returncode == 0:
            print(f"  ran        {shown}")
            continue
        if not must_succeed:
            continue
        print(f"tma1: `{shown}` failed (exit {proc.returncode}):", file=sys.stderr)
        for line in (proc.stderr or proc.stdout or "").strip().splitlines():
            print(f"  {line}", file=sys.stderr)
        return False
    return True


def _unavailable(manager: su.ManagerState, *, enabled: bool) -> None:
    """Say, on stderr, that the service is not running and what will (not) start it."""
    err = sys.stderr
    print(f"tma1: warning: {manager.detail}.", file=err)
    if enabled:
        print(
            "  The unit is written and enabled: a systemd user manager starts tma1 when one "
            "runs (a desktop login, or after `loginctl enable-linger $USER`).",
            file=err,
        )
    else:
        print(
            "  The service file is written, but nothing will start it until a user service "
            "manager loads it (then run `tma1 service install` again).",
            file=err,
        )
    print("  tma1 is NOT running as a service now: run `tma1 serve` yourself.", file=err)


def run_install(args: argparse.Namespace, runner: su.Runner = su.run_command) -> int:
    from tma1.adapters.files import InstallError
    from tma1.adapters.registration import InstallState

    platform = _platform(args)
    check_port(args.port)
    overrides = {
        "TMA1_DATA_DIR": str(args.data_dir) if args.data_dir else None,
        "TMA1_HOST": args.host,
        "TMA1_PORT": None if args.port is None else str(args.port),
    }
    env = os.environ
    try:
        environment = su.service_environment(env, overrides)
        argv = su.entry_point()
        path = su.unit_path(platform, env)
        change = su.plan_install(
            path,
            su.render(platform, argv, environment, env),
            private="TMA1_DATABASE_URL" in environment,
        )
    except InstallError as exc:
        print(f"tma1: {exc}", file=sys.stderr)
        return 1
    manager = su.manager_state(platform, runner)
    if manager.available:
        steps = su.install_steps(
            platform, path, updated=change.before is not None and change.changed
        )
    else:
        steps = su.offline_steps(platform, installing=True)
    if args.dry_run:
        print("dry run: nothing is written or run")
        print(change.report(dry_run=True))
        if not manager.available:
            print(f"  note       {manager.detail}")
        for step, _ in steps:
            print(f"  would run  {' '.join(step)}")
        return 0
    if (why := su.transient_location(argv)) is not None:
        print(
            f"tma1: warning: {why}; the service would stop working when it is cleaned up. "
            "Install tma1 for good first (pipx install / uv tool install, see README).",
            file=sys.stderr,
        )

    state = InstallState.load(_data_dir(args.data_dir))
    created = su.missing_dirs(path)
    log_dirs: list[str] = []
    try:
        if platform == "launchd":
            log_dir = su.launchd_log_path(env).parent
            log_dirs = su.missing_dirs(log_dir / "x")
            log_dir.mkdir(parents=True, exist_ok=True)
        change.apply()
    except OSError as exc:
        print(f"tma1: cannot write {path}: {exc}", file=sys.stderr)
        return 1
    if created or log_dirs:
        rec = state.files.setdefault(str(path), {})
        rec["created_dirs"] = sorted(
            {*rec.get("created_dirs", []), *created, *log_dirs},
            key=lambda d: (-len(Path(d).parts), d),
        )
        state.save()
    print(change.report(dry_run=False))
    if platform == "launchd":
        print(f"  logs       {su.launchd_log_path(env)}")
    else:
        print("  logs       journalctl --user -u tma1")
    if not _run_steps(steps, runner):
        return 1
    if not manager.available:
        _unavailable(manager, enabled=bool(steps))
        return 0
    print("\ntma1 runs as a service now; `tma1 service status` shows it.")
    return 0


def run_uninstall(args: argparse.Namespace, runner: su.Runner = su.run_command) -> int:
    from tma1.adapters.files import InstallError
    from tma1.adapters.registration import InstallState

    platform = _platform(args)
    path = su.unit_path(platform, os.environ)
    try:
        change = su.plan_uninstall(path)
    except InstallError as exc:
        print(f"tma1: {exc}", file=sys.stderr)
        return 1
    if change.before is None or not change.changed:
        print(change.report(dry_run=args.dry_run))
        print("\nno tma1 service file: nothing to remove.")
        return 0
    manager = su.manager_state(platform, runner)
    if manager.available:
        before, after = su.uninstall_steps(platform)
    else:
        before, after = su.offline_steps(platform, installing=False), []
    if args.dry_run:
        print("dry run: nothing is removed or run")
        if not manager.available:
            print(f"  note       {manager.detail}")
        for step, _ in before:
            print(f"  would run  {' '.join(step)}")
        print(change.report(dry_run=True))
        for step, _ in after:
            print(f"  would run  {' '.join(step)}")
        return 0
    if not manager.available:
        print(f"tma1: note: {manager.detail}; nothing to stop.", file=sys.stderr)
    if not _run_steps(before, runner):
        print("tma1: the service file is left in place.", file=sys.stderr)
        return 1
    try:
        change.apply()
    except OSError as exc:
        print(f"tma1: cannot remove {path}: {exc}", file=sys.stderr)
        return 1
    print(change.report(dry_run=False))
    # The data dir the file was installed for holds the record of the directories made.
    carried = su.carried_environment(platform, change.before or b"")
    state = InstallState.load(_data_dir(args.data_dir or carried.get("TMA1_DATA_DIR")))
    rec = state.files.pop(str(path), None)
    if rec is not None:
        for d in rec.get("created_dirs", []):
            with contextlib.suppress(OSError):
                Path(d).rmdir()  # only when empty: logs and other units stay
        state.save()
    if not _run_steps(after, runner):
        return 1
    print("\ntma1's service is removed (logs and the data dir are kept).")
    return 0


def run_status(args: argparse.Namespace, runner: su.Runner = su.run_command) -> int:
    env = dict(os.environ)
    if args.data_dir:
        env["TMA1_DATA_DIR"] = str(args.data_dir)
    st = su.status(env, platform=_platform(args), run=runner)
    for line in st.lines():
        print(line)
    return 0 if st.ok else 1
