"""Keep `tma1 serve` running: a systemd user unit (Linux) or a launchd agent (macOS).

The file is planned like an agent adapter's (tma1.adapters.files): the wanted bytes are
computed first (pure), shown as a diff on `--dry-run`, written atomically, and removed
byte for byte. A file at the path that tma1 did not write is never overwritten or removed.

The service manager (`systemctl --user`, `launchctl`) is only asked when it is reachable;
when it is not (a container, an SSH session without a user manager), the caller is told
so in words: `ManagerState.available` is False and `detail` says why.

`status()` is what `tma1 doctor` and `tma1 service status` call. It reads the file and asks
the manager, and never raises.
"""

from __future__ import annotations

import os
import plistlib
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tma1.adapters.files import FilePlan, InstallError, read_bytes

Platform = Literal["systemd", "launchd"]
PLATFORMS: tuple[Platform, ...] = ("systemd", "launchd")

UNIT_NAME = "tma1.service"
LAUNCHD_LABEL = "tma1.serve"
# The first line of every file tma1 writes; a file without it is someone else's.
MARKER = "Written by `tma1 service install`"

# Every TMA1_* setting `tma1 serve` reads (tma1.config.ENV_SETTINGS) is carried into the
# service when set at install time. The user's shell is not there when the service
# manager starts tma1, so anything not written into the file is lost.
# A runner: argv in, completed process out (tests pass a fake one).
Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]
COMMAND_TIMEOUT_S = 20.0


def default_platform() -> Platform | None:
    if sys.platform == "darwin":
        return "launchd"
    if sys.platform.startswith("linux"):
        return "systemd"
    return None


def _home(env: Mapping[str, str]) -> Path:
    return Path(env["HOME"]) if env.get("HOME") else Path.home()


def unit_path(platform: Platform, env: Mapping[str, str] | None = None) -> Path:
    """`~/.config/systemd/user/tma1.service` (honouring XDG_CONFIG_HOME, as systemd does)
    or `~/Library/LaunchAgents/tma1.serve.plist`."""
    env = os.environ if env is None else env
    if platform == "systemd":
        xdg = env.get("XDG_CONFIG_HOME")
        base = Path(xdg) if xdg and Path(xdg).is_absolute() else _home(env) / ".config"
        return base / "systemd" / "user" / UNIT_NAME
    return _home(env) / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"


def launchd_log_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return _home(env) / "Library" / "Logs" / "tma1" / "tma1.log"


def entry_point() -> list[str]:
    """The absolute command that runs this very tma1: the `tma1` script installed beside
    this interpreter (a venv's, pipx's or uv tool's bin directory), else `python -m`."""
    # Not resolved: a venv's python is a symlink, and its bin directory is the one we want.
    exe = Path(sys.executable).absolute()
    script = exe.parent / "tma1"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [str(exe), "-m", "tma1.cli"]


def transient_location(argv: Sequence[str]) -> str | None:
    """Why the entry point may not outlive the service (uvx's cache, a temp dir), or None."""
    first = Path(argv[0])
    tmp = Path(tempfile.gettempdir()).resolve()
    try:
        resolved = first.resolve()
    except OSError:
        return None
    if resolved.is_relative_to(tmp):
        return f"{first} is under the temporary directory {tmp}"
    if ".cache" in first.parts or ".cache" in resolved.parts:
        return f"{first} is in a cache directory (uvx?)"
    return None


def service_environment(
    env: Mapping[str, str] | None = None, overrides: Mapping[str, str | None] | None = None
) -> dict[str, str]:
    """The TMA1_* settings to write into the service: those set now, then `overrides`.

    Validated as `tma1 serve` would, so a bad value fails here and not at every restart.
    TMA1_DATA_DIR is made absolute (the service runs from `/` or `$HOME`).
    """
    from tma1.config import ENV_SETTINGS, load_settings

    env = os.environ if env is None else env
    out = {k: env[k] for k in ENV_SETTINGS if env.get(k)}
    for k, v in (overrides or {}).items():
        if v is not None:
            out[k] = v
    if "TMA1_DATA_DIR" in out:
        out["TMA1_DATA_DIR"] = str(Path(out["TMA1_DATA_DIR"]).expanduser().absolute())
    load_settings(out)  # raises ConfigError naming the variable
    for k, v in out.items():
        if "\n" in v or "\r" in v or "\0" in v:
            raise InstallError(f"{k} holds a line break; it cannot go into a service file")
    return out


# -- rendering (pure) -------------------------------------------------------------------


def _systemd_quote(value: str, *, exec_line: bool) -> str:
    """One word for a unit file: double-quoted, with `%` (specifiers) escaped, and `$`
    (variable expansion) too on an Exec line."""
    value = value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    if exec_line:
        value = value.replace("$", "$$")
    return f'"{value}"'


def render_systemd(argv: Sequence[str], environment: Mapping[str, str]) -> str:
    exec_start = " ".join(_systemd_quote(a, exec_line=True) for a in [*argv, "serve"])
    lines = [
        f"# {MARKER}; `tma1 service uninstall` removes it.",
        "# Logs: journalctl --user -u tma1",
        "[Unit]",
        "Description=tma1: watches AI coding agents through their hooks",
        # Restarted on failure, but a failure that persists (the port taken by a
        # `tma1 serve` run by hand) gives up after 10 tries in 2 minutes and shows as failed.
        "StartLimitIntervalSec=120",
        "StartLimitBurst=10",
        "",
        "[Service]",
        "Type=simple",
        f"ExecStart={exec_start}",
        *(
            f"Environment={_systemd_quote(f'{k}={v}', exec_line=False)}"
            for k, v in sorted(environment.items())
        ),
        "Restart=on-failure",
        "RestartSec=5",
        # Every hook and dashboard request is a connection: systemd's default soft limit
        # (1,024 open files) was used up by 1,100 idle connections from another local user
        # (issue 31). systemd lowers this to the user manager's hard limit where that is
        # smaller; `tma1 serve` raises its soft limit to its hard one itself, too.
        "LimitNOFILE=65536",
        "",
        "[Install]",
        "WantedBy=default.target",
        "",
    ]
    return "\n".join(lines)


def render_launchd(argv: Sequence[str], environment: Mapping[str, str], log_path: Path) -> str:
    doc: dict[str, object] = {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": [*argv, "serve"],
        "RunAtLoad": True,
        # Started again when it exits with an error; a clean exit (launchctl bootout,
        # Ctrl-C) stays down.
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": 5,
        "ProcessType": "Background",
        # launchd's default soft limit is 256 open files; each hook is a connection
        # (issue 31; `tma1 serve` also raises its soft limit to the hard one).
        "SoftResourceLimits": {"NumberOfFiles": 8192},
        "StandardOutPath": str(log_path),
        "StandardErrorPath": str(log_path),
    }
    if environment:
        doc["EnvironmentVariables"] = dict(sorted(environment.items()))
    text = plistlib.dumps(doc, fmt=plistlib.FMT_XML, sort_keys=True).decode("utf-8")
    # plistlib writes no comments; the marker goes after the DOCTYPE (XML allows it there).
    head, sep, rest = text.partition("<plist ")
    return f"{head}<!-- {MARKER}; `tma1 service uninstall` removes it. -->\n{sep}{rest}"


def render(
    platform: Platform, argv: Sequence[str], environment: Mapping[str, str], env: Mapping[str, str]
) -> str:
    if platform == "systemd":
        return render_systemd(argv, environment)
    return render_launchd(argv, environment, launchd_log_path(env))


def carried_environment(platform: Platform, data: bytes) -> dict[str, str]:
    """The environment a file tma1 wrote carries (to find the data dir it was made for)."""
    if platform == "launchd":
        try:
            doc = plistlib.loads(data)
        except Exception:
            return {}
        env = doc.get("EnvironmentVariables") if isinstance(doc, dict) else None
        return {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {}
    out = {}
    for line in data.decode("utf-8", "replace").splitlines():
        if line.startswith('Environment="') and line.endswith('"'):
            raw = line[len('Environment="') : -1]
            value = re.sub(r"\\(.)", r"\1", raw).replace("%%", "%")
            k, _, v = value.partition("=")
            out[k] = v
    return out


def is_ours(data: bytes | None) -> bool:
    return data is not None and MARKER.encode() in data.split(b"\n<plist", 1)[0][:400]


# -- planning ---------------------------------------------------------------------------


def missing_dirs(path: Path) -> list[str]:
    """The parents of `path` that do not exist yet, deepest first."""
    out = []
    for parent in path.parents:
        if parent.exists():
            break
        out.append(str(parent))
    return out


def install_hint(env: Mapping[str, str] | None = None) -> str | None:
    """The line `tma1 install` ends with when no service keeps tma1 running (cheap: reads
    one file, runs nothing)."""
    platform = default_platform()
    if platform is None:
        return None
    try:
        if is_ours(read_bytes(unit_path(platform, env))):
            return None
    except InstallError:
        pass
    return "to keep tma1 running: tma1 service install"


def plan_install(path: Path, wanted: str, *, private: bool = False) -> FilePlan:
    """`private`: the file carries a secret (a database URL may hold a password): 0600."""
    before = read_bytes(path)
    if before is not None and not is_ours(before):
        raise InstallError(
            f"{path} exists and was not written by tma1; nothing was changed "
            "(move it away, or keep it and do not use `tma1 service install`)"
        )
    mode = 0o600 if private else 0o644
    return FilePlan(path, before, wanted.encode("utf-8"), "service file", mode=mode)


def plan_uninstall(path: Path) -> FilePlan:
    before = read_bytes(path)
    if before is not None and not is_ours(before):
        # Someone else's file: leave it (the caller says so).
        return FilePlan(path, before, before, "service file (not tma1's: left alone)")
    return FilePlan(path, before, None, "service file")


# -- the service manager ----------------------------------------------------------------


def run_command(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """Run a manager command; a missing binary or a hang comes back as a failed process."""
    try:
        return subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except FileNotFoundError:
        return subprocess.CompletedProcess(list(argv), 127, "", f"{argv[0]}: not found")
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(
            list(argv), 124, "", f"{' '.join(argv)}: no answer in {COMMAND_TIMEOUT_S:g} s"
        )
    except OSError as exc:
        return subprocess.CompletedProcess(list(argv), 126, "", f"{argv[0]}: {exc}")


@dataclass(frozen=True)
class ManagerState:
    """Whether the platform's service manager can be asked, and why not when not."""

    available: bool
    detail: str


def _first_line(proc: subprocess.CompletedProcess[str]) -> str:
    text = (proc.stderr or proc.stdout or "").strip()
    return text.splitlines()[0] if text else f"exit status {proc.returncode}"


def manager_state(platform: Platform, run: Runner = run_command) -> ManagerState:
    if platform == "systemd":
        if shutil.which("systemctl") is None:
            return ManagerState(False, "systemctl is not installed")
        proc = run(["systemctl", "--user", "is-system-running"])
        state = proc.stdout.strip()
        if state in ("running", "degraded", "starting", "initializing", "maintenance"):
            return ManagerState(True, f"systemd user manager {state}")
        return ManagerState(
            False,
            "no systemd user manager is reachable (`systemctl --user is-system-running`: "
            f"{state or _first_line(proc)}); usual in containers and in SSH sessions "
            "without lingering (loginctl enable-linger)",
        )
    if shutil.which("launchctl") is None:
        return ManagerState(False, "launchctl is not installed (launchd agents need macOS)")
    return ManagerState(True, "launchd")


def _launchd_domain() -> str:
    return f"gui/{os.getuid()}"


# A manager command, and whether a failure of it is an error (False: it may fail, e.g.
# unloading an agent that is not loaded).
Step = tuple[list[str], bool]


def install_steps(platform: Platform, path: Path, *, updated: bool) -> list[Step]:
    """What install runs after writing (or finding unchanged) the file, in order: load it,
    enable it at login, and (re)start it now."""
    if platform == "systemd":
        start = ["restart"] if updated else ["start"]
        return [
            (["systemctl", "--user", "daemon-reload"], True),
            (["systemctl", "--user", "enable", UNIT_NAME], True),
            (["systemctl", "--user", *start, UNIT_NAME], True),
        ]
    return [
        (["launchctl", "bootout", f"{_launchd_domain()}/{LAUNCHD_LABEL}"], False),
        (["launchctl", "bootstrap", _launchd_domain(), str(path)], True),
    ]


def uninstall_steps(platform: Platform) -> tuple[list[Step], list[Step]]:
    """What uninstall runs before removing the file (stop it and take it out of login),
    and after (forget it)."""
    if platform == "systemd":
        return (
            [(["systemctl", "--user", "disable", "--now", UNIT_NAME], True)],
            [(["systemctl", "--user", "daemon-reload"], True)],
        )
    return [(["launchctl", "bootout", f"{_launchd_domain()}/{LAUNCHD_LABEL}"], False)], []


def offline_steps(platform: Platform, *, installing: bool) -> list[Step]:
    """With no user manager to ask: `systemctl --user enable` still works on the files
    alone (it makes the default.target.wants link), so the unit starts at the next login
    that brings a user manager; uninstall's `disable` drops the link (and one the user
    made). launchd has no offline equivalent."""
    if platform == "systemd" and shutil.which("systemctl"):
        return [(["systemctl", "--user", "enable" if installing else "disable", UNIT_NAME], True)]
    return []


# -- status -----------------------------------------------------------------------------

FileState = Literal["absent", "installed", "outdated", "foreign"]


@dataclass(frozen=True)
class ServiceStatus:
    """What `tma1 doctor` reports about keeping tma1 running.

    file:     absent | installed (ours, as install would write it now) | outdated (ours,
              but install would write other bytes now: another tma1, other settings) |
              foreign (a file tma1 did not write is at the path)
    enabled:  the manager starts it at login (systemd: read from the files, so known even
              with no manager running); None when it could not be asked
    active:   the manager reports it running now; None when the manager could not be asked
    """

    platform: Platform | None
    path: Path | None
    file: FileState
    manager: ManagerState
    enabled: bool | None
    active: bool | None

    @property
    def installed(self) -> bool:
        return self.file in ("installed", "outdated")

    @property
    def ok(self) -> bool:
        """Set up and running."""
        return self.installed and bool(self.active)

    def lines(self) -> list[str]:
        if self.platform is None or self.path is None:
            return [f"service: not supported here ({self.manager.detail})"]
        what = {
            "absent": "not installed (tma1 service install)",
            "installed": "installed",
            "outdated": "installed, but differs from what `tma1 service install` writes "
            "now (run it again to update)",
            "foreign": "a file tma1 did not write is there",
        }[self.file]
        out = [f"service file  {self.path}: {what}"]
        if not self.manager.available:
            out.append(f"manager       unavailable: {self.manager.detail}")
            if self.installed and self.enabled is not None:
                enabled = "enabled: starts with the next user manager (at login)"
                out.append(f"{'':14}{enabled if self.enabled else 'not enabled'}; running: unknown")
        elif self.installed:
            out.append(
                f"manager       {self.manager.detail}; "
                f"{'enabled' if self.enabled else 'not enabled'}, "
                f"{'running' if self.active else 'not running'}"
            )
        else:
            out.append(f"manager       {self.manager.detail}")
        return out


def _systemd_enabled(run: Runner) -> bool:
    enabled = run(["systemctl", "--user", "is-enabled", UNIT_NAME]).stdout.strip()
    return enabled in ("enabled", "enabled-runtime", "linked")


def _systemd_flags(run: Runner) -> tuple[bool, bool]:
    active = run(["systemctl", "--user", "is-active", UNIT_NAME]).stdout.strip()
    return _systemd_enabled(run), active in ("active", "reloading")


def _launchd_flags(run: Runner) -> tuple[bool, bool]:
    proc = run(["launchctl", "print", f"{_launchd_domain()}/{LAUNCHD_LABEL}"])
    if proc.returncode != 0:
        return False, False
    return True, "state = running" in proc.stdout


def status(
    env: Mapping[str, str] | None = None,
    *,
    platform: Platform | None = None,
    run: Runner = run_command,
    wanted: str | None = None,
) -> ServiceStatus:
    """The state of tma1's user service on this machine; never raises.

    `wanted` is the text install would write now (to tell `installed` from `outdated`);
    by default it is rendered from this tma1's entry point and the environment.
    """
    env = os.environ if env is None else env
    platform = platform or default_platform()
    if platform is None:
        manager = ManagerState(False, f"no user services on {sys.platform}")
        return ServiceStatus(None, None, "absent", manager, None, None)
    path = unit_path(platform, env)
    try:
        data = read_bytes(path)
    except InstallError:
        data = b""  # unreadable or a directory: not ours
    if data is None:
        file: FileState = "absent"
    elif not is_ours(data):
        file = "foreign"
    else:
        if wanted is None:
            try:
                wanted = render(platform, entry_point(), service_environment(env), env)
            except (ValueError, InstallError):
                wanted = ""
        file = "installed" if data == wanted.encode("utf-8") else "outdated"
    manager = manager_state(platform, run)
    enabled: bool | None = None
    active: bool | None = None
    if manager.available and file != "foreign":
        enabled, active = (_systemd_flags if platform == "systemd" else _launchd_flags)(run)
    elif platform == "systemd" and file != "foreign" and shutil.which("systemctl"):
        # is-enabled reads the files, no manager needed; running cannot be known.
        enabled = _systemd_enabled(run)
    return ServiceStatus(platform, path, file, manager, enabled, active)
