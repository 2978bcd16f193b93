"""`tma1 doctor`: is everything wired up? One line per check, each problem with its fix.

Checks, in order: the server (up? which version?), each agent's hooks (installed and
current, judged by the adapters' own install plans: a hook is current when `tma1 install`
would change nothing), whether Codex trusts them, what an installed agent cannot be told
(its hooks have no channel for it), whether the hook token matches the server's, whether
a user service keeps tma1 running, where the data lives (size, private modes), and which
projects the file watcher leaves out, and why.

Exit 0 when nothing needs fixing, 1 otherwise. Lines are `ok`, `warn` (worth knowing,
not broken), `FAIL` (needs fixing; carries `fix: …`) or `?` (cannot tell; not a failure).
"""

from __future__ import annotations

import argparse
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tma1.commands._args import cli_settings, read_token
from tma1.config import Settings

OK, WARN, FAIL, UNKNOWN = "ok", "warn", "FAIL", "?"


@dataclass(frozen=True)
class Check:
    status: str
    name: str
    message: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.status:<4}  {self.name:<18} {self.message}"
        return f"{text} — fix: {self.fix}" if self.fix else text


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "doctor",
        help="check the server, the agents' hooks, the token and the data dir",
        description=(
            "Say whether the server is up (and its version), which agents have tma1's hooks "
            "installed and current, whether Codex trusts them, whether the hook token "
            "matches the server's, and where the data lives. Each problem names its fix; "
            "the exit code is 1 when something needs fixing."
        ),
    )
    p.add_argument("--host", help="server address (TMA1_HOST, default 127.0.0.1)")
    p.add_argument("--port", type=int, help="server port (TMA1_PORT, default 14318)")
    p.add_argument("--data-dir", type=Path, help="data directory (TMA1_DATA_DIR, ~/.tma1)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    checks = diagnose(cli_settings(args))
    for c in checks:
        print(c.line())
    bad = [c for c in checks if c.status == FAIL]
    print(f"\n{len(bad)} problem(s) to fix" if bad else "\neverything tma1 needs is in place")
    return 1 if bad else 0


def diagnose(settings: Settings, env: Mapping[str, str] | None = None) -> list[Check]:
    server, health = check_server(settings)
    checks = [server]
    checks += check_hooks(settings, env)
    checks.append(check_token(settings, up=health is not None))
    if health:
        checks.append(check_dashboard(settings))
    checks.append(check_service(env, up=health is not None))
    if health is not None:
        checks.append(check_ingest(health))
    checks += check_data(settings, health)
    checks += check_watcher(health)
    return checks


# Counters of `/api/health`'s ingest section that each stand for hook events lost.
_LOSSES = (
    ("dropped_disk_full", "the data dir's disk was full"),
    ("dropped_queue_full", "the outage queue was full"),
    ("rejected_by_db", "refused by the database"),
    ("lost_at_shutdown", "lost at shutdown"),
    ("journal_unreadable", "unreadable in the journal"),
)


def check_ingest(health: dict[str, Any]) -> Check:
    """One line: hook events lost since the server started (every drop is counted), or a
    hook worker that never came back."""
    ingest = health.get("ingest")
    if not isinstance(ingest, dict):
        return Check(WARN, "ingest", "the server reports no ingest counters")
    if ingest.get("stuck_workers"):
        return Check(
            FAIL,
            "ingest",
            f"{ingest['stuck_workers']} hook worker(s) stuck for "
            f"{ingest.get('longest_busy_s', '?')} s: the engine may not answer",
            "see the server's log; restart the server",
        )
    lost = {k: int(ingest.get(k) or 0) for k, _ in _LOSSES}
    total = sum(lost.values())
    if not total:
        return Check(OK, "ingest", "no hook event lost since the server started")
    parts = ", ".join(f"{lost[k]} {why}" for k, why in _LOSSES if lost[k])
    fix = "free space in the data dir" if lost["dropped_disk_full"] else "see the server's log"
    return Check(WARN, "ingest", f"{total} hook events lost since the server started: {parts}", fix)


# --- server ---------------------------------------------------------------------------


def check_server(settings: Settings) -> tuple[Check, dict[str, Any] | None]:
    import httpx

    from tma1 import __version__
    from tma1.mcp.api import base_url

    url = base_url(settings)
    token = read_token(settings.token_path)
    try:
        resp = httpx.get(
            f"{url}/api/health",
            headers={"X-TMA1-Token": token} if token else None,
            timeout=2.0,
            trust_env=False,
        )
        if resp.status_code in (401, 403):
            # Up, but this data dir's token is not its: the token check says what to do.
            return Check(FAIL, "server", f"running at {url} but refuses this data dir's token"), {}
        resp.raise_for_status()
        health = resp.json()
        if not isinstance(health, dict):
            raise ValueError("not a JSON object")
    except (httpx.HTTPError, ValueError) as exc:
        what = type(exc).__name__ if not str(exc) else str(exc).splitlines()[0][:80]
        return (
            Check(
                FAIL,
                "server",
                f"not running at {url} ({what}); hooks stay silent until it is",
                "start it with `tma1 serve` (or `tma1 service install` to keep it running)",
            ),
            None,
        )
    version = str(health.get("version", "?"))
    detail = f"running at {url} (tma1 {version}, database {health.get('database', '?')})"
    if health.get("status") != "ok":
        ingest = health.get("ingest")
        db_down = not isinstance(ingest, dict) or not ingest.get("database_available", False)
        why = "the database is unavailable" if db_down else "see the ingest line below"
        check = Check(
            FAIL,
            "server",
            f"{detail} but degraded: {why}",
            "see the server's log; events are kept and written when the database is back",
        )
    elif version != __version__:
        check = Check(
            WARN,
            "server",
            f"{detail}; this command is tma1 {__version__}",
            "restart the server so both run the same version",
        )
    else:
        check = Check(OK, "server", detail)
    return check, health


# --- hooks ----------------------------------------------------------------------------


def check_hooks(settings: Settings, env: Mapping[str, str] | None = None) -> list[Check]:
    """One line per agent: hooks installed and current, missing, or stale."""
    from tma1.adapters import get_adapters, jsonhooks
    from tma1.adapters.files import InstallError
    from tma1.adapters.registration import InstallState, ScriptRegistration

    state = InstallState.load(settings.data_dir)
    out: list[Check] = []
    installed_any = False
    for adapter in get_adapters("all", settings, env):
        name = f"hooks {adapter.name}"
        install = f"`tma1 install --adapter {adapter.name}`"
        hooks = adapter.hooks
        script = next(r for r in adapter.registrations if isinstance(r, ScriptRegistration))
        try:
            _before, doc = hooks._current()
            ours = jsonhooks.count_ours(doc, hooks.marker)
            stale = [
                change.path
                for change in (hooks.plan_install(state), script.plan_install(state))
                if change.changed
            ]
        except InstallError as exc:
            out.append(Check(FAIL, name, str(exc), f"repair the file, then run {install}"))
            continue
        if ours == 0:
            config_dir = hooks.path.parent  # the agent's own config directory
            if not config_dir.is_dir():
                out.append(
                    Check(OK, name, f"not installed ({adapter.title} not found: no {config_dir})")
                )
                continue
            out.append(
                Check(
                    FAIL,
                    name,
                    f"not installed in {hooks.path}: {adapter.title} sends tma1 nothing",
                    install,
                )
            )
            continue
        installed_any = True
        if script.path.exists() and b"X-TMA1-Nonce" not in script.path.read_bytes():
            # An older tma1's script sends the token itself, which the server now refuses.
            out.append(
                Check(
                    FAIL,
                    name,
                    f"hook script outdated: {script.path} sends the token to whatever "
                    "listens on the port, and the server refuses it",
                    f"run {install}",
                )
            )
            continue
        if stale:
            out.append(
                Check(
                    FAIL,
                    name,
                    "installed but not current (differs from what this tma1 would write: "
                    + ", ".join(str(p) for p in stale)
                    + ")",
                    f"run {install} again",
                )
            )
            continue
        out.append(Check(OK, name, f"installed and current ({hooks.path})"))
        if adapter.name == "codex":
            out.append(check_codex_trust(env))
        # What this agent's hooks give tma1 no channel for (docs/hooks.md): worth knowing,
        # nothing to fix.
        out.extend(
            Check(WARN, f"{adapter.name} limit", " ".join(limit.split()))
            for limit in adapter.cannot_be_told
        )
    if not installed_any and not any(c.status == FAIL for c in out):
        out.append(
            Check(
                FAIL,
                "hooks",
                "no agent has tma1's hooks: nothing reaches the server",
                "`tma1 install --adapter claude-code` (or codex, or all)",
            )
        )
    return out


def check_codex_trust(env: Mapping[str, str] | None = None) -> Check:
    """Codex runs a new or changed hook only once the user trusted it (/hooks)."""
    from tma1.adapters import codex

    name = "codex trust"
    try:
        state = codex.trust_state(codex.hooks_path(env).parent)
    except Exception as exc:
        return Check(UNKNOWN, name, f"cannot tell whether Codex trusts the hooks ({exc})")
    if state == "trusted":
        return Check(OK, name, "Codex trusts tma1's hooks")
    problems = {
        "untrusted": "Codex has not trusted tma1's hooks yet: it runs none of them",
        "stale": "tma1's hooks changed since Codex trusted them: it runs none of them",
        "disabled": "tma1's hooks are switched off in Codex",
    }
    if state in problems:
        return Check(FAIL, name, problems[state], " ".join(codex.TRUST_NOTE.split()))
    return Check(UNKNOWN, name, f"cannot tell whether Codex trusts the hooks ({state})")


# --- service --------------------------------------------------------------------------


def check_service(env: Mapping[str, str] | None = None, *, up: bool) -> Check:
    """Whether something keeps tma1 running (docs/service.md): without it, tma1 watches
    only while a `tma1 serve` somebody started runs."""
    from tma1 import service_unit

    name = "service"
    st = service_unit.status(env)
    if st.platform is None or st.path is None:
        return Check(
            WARN if up else FAIL,
            name,
            f"no user service here ({st.manager.detail})",
            "" if up else "run `tma1 serve` yourself",
        )
    if st.file == "foreign":
        return Check(WARN, name, f"{st.path} is not tma1's: tma1 leaves it alone")
    if st.file == "absent":
        fix = "`tma1 service install` keeps it running (docs/service.md)"
        if up:
            return Check(
                WARN, name, "not installed: tma1 runs only while this `tma1 serve` does", fix
            )
        return Check(FAIL, name, "not installed, and no server is running", fix)
    if st.file == "outdated":
        return Check(
            FAIL,
            name,
            f"{st.path} differs from what this tma1 would write",
            "run `tma1 service install` again",
        )
    if not st.manager.available:
        when = "enabled (starts with the next user manager)" if st.enabled else "not enabled"
        return Check(WARN, name, f"installed, {when}; {st.manager.detail}")
    if st.active:
        return Check(OK, name, f"installed and running ({st.path})")
    return Check(
        FAIL,
        name,
        "installed but not running",
        "`systemctl --user restart tma1` (or `tma1 service status` for why)",
    )


# --- token ----------------------------------------------------------------------------


def check_token(settings: Settings, *, up: bool) -> Check:
    import httpx

    from tma1.mcp.api import base_url

    path = settings.token_path
    token = read_token(path)
    if not token:
        return Check(
            FAIL,
            "hook token",
            f"no token at {path}: the hooks cannot authenticate",
            "run `tma1 install` (or start `tma1 serve` with this data dir) to create it",
        )
    if not up:
        return Check(UNKNOWN, "hook token", f"{path} exists; cannot compare (server down)")
    try:
        resp = httpx.get(
            f"{base_url(settings)}/api/hooks/token-check",
            headers={"X-TMA1-Token": token},
            timeout=2.0,
            trust_env=False,
        )
    except httpx.HTTPError as exc:
        return Check(UNKNOWN, "hook token", f"cannot compare with the server ({exc})")
    if resp.status_code == 200:
        return Check(OK, "hook token", f"{path} matches the server's")
    if resp.status_code in (401, 403):
        return Check(
            FAIL,
            "hook token",
            f"{path} does not match the server's: every hook and read is refused",
            "restart `tma1 serve` with the same data dir as the hooks "
            f"(TMA1_DATA_DIR={settings.data_dir})",
        )
    return Check(
        UNKNOWN,
        "hook token",
        f"the server cannot check tokens (HTTP {resp.status_code}); restart it with this tma1",
    )


def check_dashboard(settings: Settings) -> Check:
    """A fresh one-time login URL for the dashboard (the server answers its data only to
    the token or a session cookie, which this URL gets the browser)."""
    from tma1.mcp.api import base_url
    from tma1.token import login_url

    token = read_token(settings.token_path)
    if not token:
        return Check(UNKNOWN, "dashboard", "no token here to log in with")
    url = login_url(base_url(settings), token)
    return Check(OK, "dashboard", f"open {url} (a one-time login URL, valid for 24 h)")


# --- data -----------------------------------------------------------------------------


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def check_data(settings: Settings, health: dict[str, Any] | None) -> list[Check]:
    data_dir = settings.data_dir
    out: list[Check] = []
    if not data_dir.exists():
        return [
            Check(
                FAIL,
                "data",
                f"{data_dir} does not exist yet",
                "start `tma1 serve` (it creates the data dir, private to you)",
            )
        ]
    if not data_dir.is_dir():
        return [
            Check(
                FAIL,
                "data",
                f"{data_dir} is not a directory",
                "move it away or set TMA1_DATA_DIR to a directory",
            )
        ]
    files = [data_dir / n for n in ("tma1.db", "tma1.db-wal", "tma1.db-shm")]
    total = sum(p.stat().st_size for p in files if p.exists())
    where = (
        settings.database_url.split("@")[-1]
        if settings.database_url
        else f"{files[0]} ({_size(total)} with its WAL)"
    )
    rows = (health or {}).get("rows")
    events = f", {rows.get('tma1_hook_events', '?')} events" if isinstance(rows, dict) else ""
    out.append(Check(OK, "data", f"database {where}{events}; data dir {data_dir}"))
    loose = []
    for p, shown in [(data_dir, str(data_dir)), *((f, f.name) for f in files if f.exists())]:
        mode = stat.S_IMODE(p.stat().st_mode)
        if mode & 0o077:
            loose.append(f"{shown} ({oct(mode)})")
    if loose:
        out.append(
            Check(
                FAIL,
                "data privacy",
                "readable by other local users: " + ", ".join(loose),
                f"restart `tma1 serve` (it tightens them) or chmod 700 {data_dir} and 600 its "
                "database files",
            )
        )
    elif os.name == "posix":
        out.append(Check(OK, "data privacy", "data dir 0700, database files 0600"))
    return out


# --- file watcher ---------------------------------------------------------------------

UNWATCHED_SHOWN = 10
_WATCH_FIXES = {
    "over budget": "add its generated directories to .gitignore, or raise "
    "TMA1_WATCH_MAX_DIRS and restart `tma1 serve`",
    "limit": "raise TMA1_MAX_WATCHED_PROJECTS, or wait until a watched project is idle for 2 h",
    "failed": "see the server's log; tma1 tries again after 10 min",
}


def check_watcher(health: dict[str, Any] | None) -> list[Check]:
    """One line on the file watcher, then one per project it does not watch (from
    GET /api/health): refused (a pseudo-filesystem, the root, the home directory), over
    the directory budget, past the project limit, or failed."""
    sensors = (health or {}).get("sensors")
    if not isinstance(sensors, dict):
        return []
    if not sensors.get("watch_files"):
        return [Check(OK, "file watcher", "off (tma1 serve --no-watch)")]
    files = sensors.get("files")
    files = files if isinstance(files, dict) else {}
    unwatched = files.get("unwatched")
    unwatched = unwatched if isinstance(unwatched, dict) else {}
    summary = f"watching {files.get('watched', 0)} project(s)"
    if not unwatched:
        return [Check(OK, "file watcher", summary)]
    out = [Check(WARN, "file watcher", f"{summary}; not watching {len(unwatched)}")]
    for project, why in list(unwatched.items())[:UNWATCHED_SHOWN]:
        why = why if isinstance(why, dict) else {}
        reason, detail = str(why.get("reason", "?")), str(why.get("detail", ""))
        out.append(
            Check(
                WARN, "not watched", f"{project}: {reason}: {detail}", _WATCH_FIXES.get(reason, "")
            )
        )
    if len(unwatched) > UNWATCHED_SHOWN:
        more = len(unwatched) - UNWATCHED_SHOWN
        out.append(Check(WARN, "not watched", f"and {more} more (GET /api/health)"))
    return out
