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
from dataclasses import replace
from pathlib import Path
from typing import Any

from tma1.commands._args import cli_settings, read_token
from tma1.commands.doctor_health import (
    FAIL,
    OK,
    UNKNOWN,
    WARN,
    Diagnosis,
    check_ingest,
    check_watcher,
)
from tma1.config import Settings


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


def diagnose(settings: Settings, env: Mapping[str, str] | None = None) -> list[Diagnosis]:
    server, health = check_server(settings)
    checks = [server]
    same = check_same_data(settings, health)
    if same is not None:
        checks.append(same)
    checks += check_hooks(settings, env)
    checks.append(check_token(settings, up=health is not None))
    if health:
        checks.append(check_dashboard(settings))
    checks.append(check_service(env, up=health is not None))
    if health is not None:
        checks.append(check_ingest(health))
    checks += check_data(settings)
    checks += check_watcher(health)
    if same is not None and same.status == FAIL:
        # Judged against a data dir the server does not use, the hooks look stale and the
        # token missing; a reinstall would not help: the fix is the one the mismatch names.
        checks = [replace(c, fix=same.fix) if "tma1 install" in c.fix else c for c in checks]
    return checks


def check_same_data(settings: Settings, health: dict[str, Any] | None) -> Diagnosis | None:
    """Whether the server that answers keeps the data this command looks at (its data dir
    and database, from /api/health); None when no server answers."""
    from tma1.store.connection import database_identity

    if health is None:
        return None
    name = "server data"
    if not health:  # it refused this data dir's token: ask its ping which data dir it keeps
        return _other_data_dir(settings, name)
    theirs_dir, theirs_db = health.get("data_dir"), health.get("database_url")
    if not isinstance(theirs_dir, str) or not isinstance(theirs_db, str):
        return Diagnosis(
            UNKNOWN, name, "the server does not say which data it keeps (an older tma1)"
        )
    mine_dir = str(settings.data_dir.expanduser().absolute())
    mine_db = database_identity(settings.effective_database_url)
    if theirs_dir == mine_dir and theirs_db == mine_db:
        return Diagnosis(OK, name, f"the server keeps this data dir ({mine_dir})")
    if theirs_dir != mine_dir:
        return Diagnosis(
            FAIL,
            name,
            f"the server keeps other data: data dir {theirs_dir}, not {mine_dir}",
            f"check that server with `tma1 doctor --data-dir {theirs_dir}`, or restart "
            f"`tma1 serve` with TMA1_DATA_DIR={mine_dir}",
        )
    return Diagnosis(
        FAIL,
        name,
        f"the server keeps other data: database {theirs_db}, not {mine_db}",
        f"check that server with TMA1_DATABASE_URL set to its database, or restart "
        f"`tma1 serve` with TMA1_DATABASE_URL={mine_db}",
    )


# --- server ---------------------------------------------------------------------------


def check_server(settings: Settings) -> tuple[Diagnosis, dict[str, Any] | None]:
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
            return Diagnosis(
                FAIL, "server", f"running at {url} but refuses this data dir's token"
            ), {}
        resp.raise_for_status()
        health = resp.json()
        if not isinstance(health, dict):
            raise ValueError("not a JSON object")
    except (httpx.HTTPError, ValueError) as exc:
        what = type(exc).__name__ if not str(exc) else str(exc).splitlines()[0][:80]
        return (
            Diagnosis(
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
        check = Diagnosis(
            FAIL,
            "server",
            f"{detail} but degraded: {why}",
            "see the server's log; events are kept and written when the database is back",
        )
    elif version != __version__:
        check = Diagnosis(
            WARN,
            "server",
            f"{detail}; this command is tma1 {__version__}",
            "restart the server so both run the same version",
        )
    else:
        check = Diagnosis(OK, "server", detail)
    return check, health


# --- hooks ----------------------------------------------------------------------------


def check_hooks(settings: Settings, env: Mapping[str, str] | None = None) -> list[Diagnosis]:
    """One line per agent: hooks installed and current, missing, or stale."""
    from tma1.adapters import executable, found_on_machine, get_adapters, jsonhooks
    from tma1.adapters.agents import SPECS
    from tma1.adapters.files import InstallError
    from tma1.adapters.registration import InstallState, ScriptRegistration

    state = InstallState.load(settings.data_dir)
    out: list[Diagnosis] = []
    installed_any = False
    for adapter in get_adapters("every", settings, env):
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
            out.append(Diagnosis(FAIL, name, str(exc), f"repair the file, then run {install}"))
            continue
        config_dir = hooks.path.parent  # the agent's own config directory
        absent = (
            f"{adapter.title} not found: no {config_dir}, no `{executable(adapter.name)}` on PATH"
        )
        if ours == 0:
            if not found_on_machine(adapter, env):
                out.append(Diagnosis(OK, name, f"not installed ({absent})"))
                continue
            out.append(
                Diagnosis(
                    FAIL,
                    name,
                    f"not installed in {hooks.path}: {adapter.title} sends tma1 nothing",
                    install,
                )
            )
            continue
        if not found_on_machine(adapter, env, besides_ours=True):
            # Wired by an older `install --adapter all` where the agent never ran: nothing
            # to fix for tma1 (Codex trust included), only something to tidy.
            out.append(
                Diagnosis(
                    WARN,
                    name,
                    f"installed, but {adapter.title} is not on this machine ({config_dir} "
                    f"holds only tma1's files, no `{executable(adapter.name)}` on PATH)",
                    f"`tma1 uninstall --adapter {adapter.name}` if you do not use it",
                )
            )
            continue
        installed_any = True
        if script.path.exists() and b"X-TMA1-Nonce" not in script.path.read_bytes():
            # An older tma1's script sends the token itself, which the server now refuses.
            out.append(
                Diagnosis(
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
                Diagnosis(
                    FAIL,
                    name,
                    "installed but not current (differs from what this tma1 would write: "
                    + ", ".join(str(p) for p in stale)
                    + ")",
                    f"run {install} again",
                )
            )
            continue
        out.append(Diagnosis(OK, name, f"installed and current ({hooks.path})"))
        if (agent_checks := SPECS[adapter.name].doctor) is not None:
            out.extend(Diagnosis(*line) for line in agent_checks(env))
        # What this agent's hooks give tma1 no channel for (docs/hooks.md): worth knowing,
        # nothing to fix.
        out.extend(
            Diagnosis(WARN, f"{adapter.name} limit", " ".join(limit.split()))
            for limit in adapter.cannot_be_told
        )
    if not installed_any and not any(c.status == FAIL for c in out):
        out.append(
            Diagnosis(
                FAIL,
                "hooks",
                "no agent has tma1's hooks: nothing reaches the server",
                "`tma1 install --adapter claude-code` (or codex, or all)",
            )
        )
    return out


# --- service --------------------------------------------------------------------------


def check_service(env: Mapping[str, str] | None = None, *, up: bool) -> Diagnosis:
    """Whether something keeps tma1 running (docs/service.md): without it, tma1 watches
    only while a `tma1 serve` somebody started runs."""
    from tma1 import autostart

    name = "service"
    st = autostart.status(env)
    if st.platform is None or st.path is None:
        return Diagnosis(
            WARN if up else FAIL,
            name,
            f"no user service here ({st.manager.detail})",
            "" if up else "run `tma1 serve` yourself",
        )
    if st.file == "foreign":
        return Diagnosis(WARN, name, f"{st.path} is not tma1's: tma1 leaves it alone")
    if st.file == "absent":
        fix = "`tma1 service install` keeps it running (docs/service.md)"
        if up:
            return Diagnosis(
                WARN, name, "not installed: tma1 runs only while this `tma1 serve` does", fix
            )
        return Diagnosis(FAIL, name, "not installed, and no server is running", fix)
    if st.file == "outdated":
        return Diagnosis(
            FAIL,
            name,
            f"{st.path} differs from what this tma1 would write",
            "run `tma1 service install` again",
        )
    if not st.manager.available:
        when = "enabled (starts with the next user manager)" if st.enabled else "not enabled"
        return Diagnosis(WARN, name, f"installed, {when}; {st.manager.detail}")
    if st.active:
        return Diagnosis(OK, name, f"installed and running ({st.path})")
    return Diagnosis(
        FAIL,
        name,
        "installed but not running",
        "`systemctl --user restart tma1` (or `tma1 service status` for why)",
    )


# --- token ----------------------------------------------------------------------------


def check_token(settings: Settings, *, up: bool) -> Diagnosis:
    import httpx

    from tma1.mcp.api import base_url

    path = settings.token_path
    token = read_token(path)
    if not token:
        return Diagnosis(
            FAIL,
            "hook token",
            f"no token at {path}: the hooks cannot authenticate",
            "run `tma1 install` (or start `tma1 serve` with this data dir) to create it",
        )
    if not up:
        return Diagnosis(UNKNOWN, "hook token", f"{path} exists; cannot compare (server down)")
    try:
        resp = httpx.get(
            f"{base_url(settings)}/api/hooks/token-check",
            headers={"X-TMA1-Token": token},
            timeout=2.0,
            trust_env=False,
        )
    except httpx.HTTPError as exc:
        return Diagnosis(UNKNOWN, "hook token", f"cannot compare with the server ({exc})")
    if resp.status_code == 200:
        return Diagnosis(OK, "hook token", f"{path} matches the server's")
    if resp.status_code in (401, 403):
        return Diagnosis(
            FAIL,
            "hook token",
            f"{path} does not match the server's: every hook and read is refused",
            "restart `tma1 serve` with the same data dir as the hooks "
            f"(TMA1_DATA_DIR={settings.data_dir})",
        )
    return Diagnosis(
        UNKNOWN,
        "hook token",
        f"the server cannot check tokens (HTTP {resp.status_code}); restart it with this tma1",
    )


def check_dashboard(settings: Settings) -> Diagnosis:
    """A fresh one-time login URL for the dashboard (the server answers its data only to
    the token or a session cookie, which this URL gets the browser)."""
    from tma1.auth.hooktoken import login_url
    from tma1.mcp.api import base_url

    token = read_token(settings.token_path)
    if not token:
        return Diagnosis(UNKNOWN, "dashboard", "no token here to log in with")
    url = login_url(base_url(settings), token)
    return Diagnosis(OK, "dashboard", f"open {url} (a one-time login URL, valid for 24 h)")


# --- data -----------------------------------------------------------------------------


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def check_data(settings: Settings) -> list[Diagnosis]:
    data_dir = settings.data_dir
    out: list[Diagnosis] = []
    if not data_dir.exists():
        return [
            Diagnosis(
                FAIL,
                "data",
                f"{data_dir} does not exist yet",
                "start `tma1 serve` (it creates the data dir, private to you)",
            )
        ]
    if not data_dir.is_dir():
        return [
            Diagnosis(
                FAIL,
                "data",
                f"{data_dir} is not a directory",
                "move it away or set TMA1_DATA_DIR to a directory",
            )
        ]
    files = [data_dir / n for n in ("tma1.db", "tma1.db-wal", "tma1.db-shm")]
    total = sum(p.stat().st_size for p in files if p.exists())
    db_line, retention = check_database(settings)
    where = (
        settings.database_url.split("@")[-1]
        if settings.database_url
        else f"{files[0]} ({_size(total)} with its WAL)"
    )
    out.append(
        Diagnosis(db_line.status, "data", f"database {where}{db_line.message}; data dir {data_dir}")
    )
    if retention is not None:
        out.append(retention)
    loose = []
    for p, shown in [(data_dir, str(data_dir)), *((f, f.name) for f in files if f.exists())]:
        mode = stat.S_IMODE(p.stat().st_mode)
        if mode & 0o077:
            loose.append(f"{shown} ({oct(mode)})")
    if loose:
        out.append(
            Diagnosis(
                FAIL,
                "data privacy",
                "readable by other local users: " + ", ".join(loose),
                f"restart `tma1 serve` (it tightens them) or chmod 700 {data_dir} and 600 its "
                "database files",
            )
        )
    elif os.name == "posix":
        out.append(Diagnosis(OK, "data privacy", "data dir 0700, database files 0600"))
    return out


def _other_data_dir(settings: Settings, name: str) -> Diagnosis | None:
    import httpx

    from tma1.auth.hooktoken import data_dir_tag
    from tma1.mcp.api import base_url

    try:
        tag = httpx.get(f"{base_url(settings)}/api/ping", timeout=2.0, trust_env=False).headers
    except httpx.HTTPError:
        return None
    mine = settings.data_dir.expanduser().absolute()
    if tag.get("X-TMA1-Data-Dir") in (None, data_dir_tag(mine)):
        return None  # the same data dir with another token: the token line says so
    known = Settings().data_dir.expanduser().absolute()  # the default data dir
    theirs = str(known) if tag.get("X-TMA1-Data-Dir") == data_dir_tag(known) else None
    return Diagnosis(
        FAIL,
        name,
        f"the server keeps other data: data dir {theirs or 'another one'}, not {mine}",
        f"check that server with `tma1 doctor --data-dir {theirs or 'ITS_DATA_DIR'}`, or "
        f"restart `tma1 serve` with TMA1_DATA_DIR={mine}",
    )


def check_database(settings: Settings) -> tuple[Diagnosis, Diagnosis | None]:
    """This command's own database, read-only: its events and size (the "data" line's
    tail), and what the TTL would remove from it now (tma1.store.retention)."""
    from tma1.commands._args import open_store
    from tma1.config import ConfigError
    from tma1.origin.machine import read_machine_id
    from tma1.privacy import sqlite_path
    from tma1.store import retention

    url = settings.effective_database_url
    path = sqlite_path(url)
    if path is not None and not path.exists():
        return Diagnosis(OK, "data", ", none yet (`tma1 serve` creates it)"), None
    try:
        # This machine's store: on a team database the TTL applies to its own rows.
        mid = settings.machine_id or read_machine_id(settings.data_dir.expanduser())
        store = open_store(url, machine_id=mid)
    except ConfigError as exc:
        return Diagnosis(FAIL, "data", f": {exc}"), None
    try:
        events = store.counts()["tma1_hook_events"]
        size = retention.database_bytes(store)
        seen = retention.preview(store, settings.data_ttl_seconds * 1000)
    except Exception as exc:
        return Diagnosis(UNKNOWN, "data", f": cannot read it ({type(exc).__name__})"), None
    finally:
        store.close()
    sized = f", {_size(size)}" if size is not None and settings.database_url else ""
    ttl = _days(settings.data_ttl_seconds)
    if seen.cutoff is None or not seen.total:
        what = "removes nothing now"
    else:
        parts = ", ".join(f"{n} {t.removeprefix('tma1_')}" for t, n in seen.rows.items() if n)
        what = f"would remove {seen.total} rows older than {_day(seen.cutoff)}: {parts}"
    line = Diagnosis(
        OK,
        "retention",
        f"TMA1_DATA_TTL {ttl}, counted back from the newest event "
        f"({_day(seen.newest_ts)}): {what}; labelled emits and their sessions are kept",
    )
    return Diagnosis(OK, "data", f"{sized}, {events} events"), line


def _days(seconds: int) -> str:
    return f"{seconds / 86_400:g} days" if seconds >= 86_400 else f"{seconds} s"


def _day(ts_ms: int | None) -> str:
    import time

    if ts_ms is None:
        return "none yet"
    return time.strftime("%Y-%m-%d", time.gmtime(ts_ms / 1000))
