"""`tma1 doctor` as a subprocess, against a real `tma1 serve` where the server matters."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from conftest import free_port
from trustkit import clean_env, run, serving, trust_all

from tma1.adapters.hookscript import script_name
from tma1.auth.hooktoken import hook_headers
from tma1.events import parse_payload
from tma1.store import Store


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    # Claude Code has run here: its config dir holds something of its own (a config dir
    # holding only what tma1 wrote is an agent that is not on this machine).
    (h / ".claude" / "projects").mkdir(parents=True)
    return h


def _agent_ran(config_dir: Path) -> None:
    """The agent's config dir, with a file of the agent's own in it."""
    config_dir.mkdir(exist_ok=True)
    (config_dir / "version.json").write_text("{}")


def _line(out: str, name: str) -> str:
    lines = [ln for ln in out.splitlines() if ln[6:24].rstrip() == name]
    assert len(lines) == 1, (name, out)
    return lines[0]


def _env(home: Path, data: Path) -> dict[str, str]:
    """The hooks are installed for, and the server runs on, one free port."""
    return clean_env(home, data, TMA1_PORT=str(free_port()))


def _doctor(env: dict[str, str]):
    return run(env, "doctor")


def test_healthy_install_says_ok_on_every_line(home: Path, tmp_path: Path) -> None:
    env = _env(home, tmp_path / "data")
    assert run(env, "install", "--adapter", "claude-code").returncode == 0
    with serving(env, port=int(env["TMA1_PORT"])):
        res = run(env, "doctor")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    server = _line(res.stdout, "server")
    assert server.startswith("ok") and "running at" in server and "tma1 0." in server
    assert _line(res.stdout, "hooks claude-code").startswith("ok")
    assert "installed and current" in _line(res.stdout, "hooks claude-code")
    # Codex is not on this machine: not a problem.
    assert _line(res.stdout, "hooks codex").startswith("ok")
    assert _line(res.stdout, "hook token").startswith("ok")
    data = _line(res.stdout, "data")
    assert data.startswith("ok") and str(tmp_path / "data") in data
    assert _line(res.stdout, "data privacy").startswith("ok")
    assert "everything tma1 needs is in place" in res.stdout


def test_server_down_is_a_failure_with_its_fix(home: Path, tmp_path: Path) -> None:
    env = _env(home, tmp_path / "data")
    run(env, "install", "--adapter", "claude-code")
    res = _doctor(env)
    assert res.returncode == 1
    line = _line(res.stdout, "server")
    assert (
        line.startswith("FAIL")
        and "not running" in line
        and "fix: start it with `tma1 serve`" in line
    )
    assert _line(res.stdout, "hook token").startswith("?")
    assert "Traceback" not in res.stderr


def test_hooks_missing_names_the_install_command(home: Path, tmp_path: Path) -> None:
    env = _env(home, tmp_path / "data")
    with serving(env, port=int(env["TMA1_PORT"])):
        res = _doctor(env)
    assert res.returncode == 1
    line = _line(res.stdout, "hooks claude-code")
    assert line.startswith("FAIL") and "not installed" in line
    assert "fix: `tma1 install --adapter claude-code`" in line


def test_each_agent_is_looked_for_in_its_own_config_dir(home: Path, tmp_path: Path) -> None:
    """Gemini CLI here, Claude Code not: Gemini's missing hooks are the problem."""
    (home / ".claude" / "projects").rmdir()
    (home / ".claude").rmdir()
    _agent_ran(home / ".gemini")
    res = _doctor(_env(home, tmp_path / "data"))
    claude = _line(res.stdout, "hooks claude-code")
    assert claude.startswith("ok") and f"no {home / '.claude'}" in claude
    gemini = _line(res.stdout, "hooks gemini")
    assert gemini.startswith("FAIL") and str(home / ".gemini" / "settings.json") in gemini
    assert "fix: `tma1 install --adapter gemini`" in gemini


def test_hooks_stale_after_the_script_or_entry_changed(home: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = _env(home, data)
    run(env, "install", "--adapter", "claude-code")
    # An older tma1 wrote a different script (or the user edited it).
    script = data / "hooks" / script_name("claude-code")
    script.write_text(script.read_text() + "# an older version\n")
    with serving(env, port=int(env["TMA1_PORT"])):
        res = _doctor(env)
    assert res.returncode == 1
    line = _line(res.stdout, "hooks claude-code")
    assert line.startswith("FAIL") and "not current" in line and str(script) in line
    assert "fix: run `tma1 install --adapter claude-code` again" in line
    # Re-running install fixes it.
    run(env, "install", "--adapter", "claude-code")
    with serving(env, port=int(env["TMA1_PORT"])):
        again = _doctor(env)
    assert _line(again.stdout, "hooks claude-code").startswith("ok"), again.stdout


def test_hooks_stale_when_an_event_entry_is_missing(home: Path, tmp_path: Path) -> None:
    env = _env(home, tmp_path / "data")
    run(env, "install", "--adapter", "claude-code")
    settings = home / ".claude" / "settings.json"
    doc = json.loads(settings.read_text())
    del doc["hooks"]["Stop"]
    settings.write_text(json.dumps(doc))
    res = _doctor(env)
    line = _line(res.stdout, "hooks claude-code")
    assert line.startswith("FAIL") and "not current" in line and str(settings) in line


def test_token_mismatch_says_which_data_dir_to_use(home: Path, tmp_path: Path) -> None:
    hooks_data = tmp_path / "data"
    env = _env(home, hooks_data)
    run(env, "install", "--adapter", "claude-code")
    # The server runs with another data dir, hence another token.
    other = clean_env(home, tmp_path / "other", TMA1_PORT=env["TMA1_PORT"])
    with serving(other, port=int(env["TMA1_PORT"])):
        res = _doctor(env)
    assert res.returncode == 1
    line = _line(res.stdout, "hook token")
    assert line.startswith("FAIL") and "does not match" in line
    assert f"TMA1_DATA_DIR={hooks_data}" in line


def test_codex_untrusted_is_a_failure(home: Path, tmp_path: Path, monkeypatch) -> None:
    """In process: `trust_state(codex_home)` comes from the Codex adapter (another branch);
    the doctor line is checked with stand-ins for each of its answers, and says "cannot
    tell" when this tma1 has no such function."""
    from tma1.adapters.agents import codex
    from tma1.commands import doctor
    from tma1.config import Settings

    _agent_ran(home / ".codex")
    env = _env(home, tmp_path / "data")
    assert run(env, "install", "--adapter", "codex").returncode == 0
    settings = Settings(data_dir=tmp_path / "data", port=int(env["TMA1_PORT"]))

    def trust() -> doctor.Diagnosis:
        return next(c for c in doctor.check_hooks(settings, env) if c.name == "codex trust")

    if not hasattr(codex, "trust_state"):
        assert trust().status == doctor.UNKNOWN
    seen: list[Path] = []
    for state, status in (
        ("untrusted", doctor.FAIL),
        ("stale", doctor.FAIL),
        ("disabled", doctor.FAIL),
        ("trusted", doctor.OK),
    ):

        def fake(codex_home: Path, state: str = state) -> str:
            seen.append(Path(codex_home))
            return state

        monkeypatch.setattr(codex, "trust_state", fake, raising=False)
        check = trust()
        assert check.status == status, (state, check)
        if status == doctor.FAIL:
            assert check.fix and "doctor" not in check.fix
    assert seen and all(p == home / ".codex" for p in seen)
    # And in the printed report, with its fix on the same line.
    monkeypatch.setattr(codex, "trust_state", lambda codex_home: "untrusted", raising=False)
    line = trust().line()
    assert line.startswith("FAIL") and "codex trust" in line and "— fix: " in line


def test_service_line_says_whether_something_keeps_tma1_running(home: Path, tmp_path: Path) -> None:
    env = _env(home, tmp_path / "data")
    assert run(env, "install", "--adapter", "claude-code").returncode == 0
    down = _line(_doctor(env).stdout, "service")
    assert down.startswith("FAIL") and "no server is running" in down
    assert "tma1 service install" in down
    with serving(env, port=int(env["TMA1_PORT"])):
        res = _doctor(env)
    up = _line(res.stdout, "service")
    assert up.startswith("warn") and "tma1 service install" in up
    assert res.returncode == 0, res.stdout  # a warning is nothing to fix
    installed = run(env, "service", "install")
    assert installed.returncode == 0, installed.stderr
    line = _line(_doctor(env).stdout, "service")
    assert "not installed" not in line and "installed" in line, line


def test_codex_trust_is_read_from_codex_s_own_records(home: Path, tmp_path: Path) -> None:
    """The real `trust_state`: a fresh install is untrusted (Codex would run none of the
    hooks); once Codex's trust records hold each handler's hash, the line is ok."""
    _agent_ran(home / ".codex")
    env = _env(home, tmp_path / "data")
    assert run(env, "install", "--adapter", "codex").returncode == 0
    res = _doctor(env)
    untrusted = _line(res.stdout, "codex trust")
    assert untrusted.startswith("FAIL") and "Trust all and continue" in untrusted
    trust_all(home / ".codex")
    assert _line(_doctor(env).stdout, "codex trust").startswith("ok")


def test_what_an_agent_cannot_be_told_is_listed_once_its_hooks_are_in(
    home: Path, tmp_path: Path
) -> None:
    _agent_ran(home / ".gemini")
    env = _env(home, tmp_path / "data")
    before = _doctor(env).stdout
    assert "gemini limit" not in before
    assert run(env, "install", "--adapter", "gemini").returncode == 0
    out = _doctor(env).stdout
    limits = [ln for ln in out.splitlines() if ln[6:24].rstrip() == "gemini limit"]
    assert limits and all(ln.startswith("warn") for ln in limits)
    assert any("&lt;tma1-context&gt;" in ln for ln in limits), limits


def test_doctor_prints_a_login_url_that_logs_in_once(home: Path, tmp_path: Path) -> None:
    import httpx

    env = _env(home, tmp_path / "data")
    assert run(env, "install", "--adapter", "claude-code").returncode == 0
    with serving(env, port=int(env["TMA1_PORT"])) as srv:
        res = _doctor(env)
        line = _line(res.stdout, "dashboard")
        assert line.startswith("ok") and "one-time" in line
        url = line.split("open ", 1)[1].split(" ", 1)[0]
        assert url.startswith(srv.url + "/?login=")
        with httpx.Client(trust_env=False, follow_redirects=True) as browser:
            assert browser.get(f"{srv.url}/api/sessions").status_code == 401
            assert browser.get(url).url == srv.url + "/"
            assert browser.get(f"{srv.url}/api/sessions").status_code == 200
    assert res.returncode == 0, res.stdout


def test_an_older_hook_script_is_outdated_with_its_fix(home: Path, tmp_path: Path) -> None:
    """A script from before issue 31 sends the token itself, which the server refuses now:
    doctor names it and the fix, and install puts it right."""
    env = _env(home, tmp_path / "data")
    assert run(env, "install", "--adapter", "claude-code").returncode == 0
    script = tmp_path / "data" / "hooks" / script_name("claude-code")
    old = script.read_text().replace("X-TMA1-Nonce", "X-TMA1-Token").replace("X-TMA1-Auth", "X")
    script.write_text(old)
    res = _doctor(env)
    line = _line(res.stdout, "hooks claude-code")
    assert line.startswith("FAIL") and "hook script outdated" in line
    assert "fix: run `tma1 install --adapter claude-code`" in line
    assert res.returncode == 1
    assert run(env, "install", "--adapter", "claude-code").returncode == 0
    assert "installed and current" in _line(_doctor(env).stdout, "hooks claude-code")


def test_a_server_with_another_data_dir_is_a_failure_not_a_reinstall(
    home: Path, tmp_path: Path
) -> None:
    """Issue 28.3: doctor once said "ok data … N events" for a data dir that does not
    exist, because the events were the running server's, kept elsewhere."""
    served_data = tmp_path / "data"
    env = _env(home, served_data)
    assert run(env, "install", "--adapter", "claude-code").returncode == 0
    typo = tmp_path / "typo"
    with serving(env, port=int(env["TMA1_PORT"])) as srv:
        for i in range(3):
            httpx.post(
                f"{srv.url}/api/hooks",
                headers=hook_headers((served_data / "hook-token").read_text().strip()),
                content=json.dumps({"session_id": f"s{i}", "hook_event_name": "Stop"}),
                timeout=5,
            )
        mine = run(env, "doctor")
        res = run(env, "doctor", "--data-dir", str(typo))
    assert _line(mine.stdout, "server data").startswith("ok")
    assert "3 events" in _line(mine.stdout, "data")
    assert res.returncode == 1
    line = _line(res.stdout, "server data")
    # Without the server's token (it is in the other data dir) doctor cannot read its
    # health; its /api/ping says by a hash that the data dir is not this one.
    assert line.startswith("FAIL") and f"not {typo}" in line, res.stdout
    assert "tma1 doctor --data-dir" in line
    assert "events" not in _line(res.stdout, "data")
    assert "tma1 install" not in res.stdout, res.stdout
    assert "Traceback" not in res.stderr


def test_doctor_shows_the_database_size_and_what_the_ttl_would_remove(
    home: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    env = _env(home, data)
    data.mkdir(mode=0o700)
    store = Store.open(f"sqlite:///{data / 'tma1.db'}")
    day = 86_400_000
    for ago in (100, 90, 20, 0):
        store.insert_event(
            parse_payload({"session_id": "s", "hook_event_name": "Stop"}, ts=10**12 - ago * day)
        )
    store.close()
    res = run(env, "doctor")
    data_line = _line(res.stdout, "data")
    assert "4 events" in data_line and "KiB with its WAL" in data_line
    line = _line(res.stdout, "retention")
    assert line.startswith("ok") and "TMA1_DATA_TTL 60 days" in line
    assert "would remove 2 rows" in line and "2 hook_events" in line
    short = run({**env, "TMA1_DATA_TTL": "200d"}, "doctor")
    assert "removes nothing now" in _line(short.stdout, "retention")


def test_an_agent_wired_but_absent_is_reported_absent_not_failing(
    home: Path, tmp_path: Path
) -> None:
    """Issue 28.4: an older `install --adapter all` wired Codex on a machine without it;
    doctor then failed on "codex trust" forever."""
    env = {**_env(home, tmp_path / "data"), "PATH": f"{tmp_path / 'no-bin'}:/usr/bin:/bin"}
    assert run(env, "install", "--adapter", "claude-code").returncode == 0
    assert run(env, "install", "--adapter", "codex").returncode == 0  # makes ~/.codex
    with serving(env, port=int(env["TMA1_PORT"])):
        res = run(env, "doctor")
    line = _line(res.stdout, "hooks codex")
    assert line.startswith("warn") and "Codex is not on this machine" in line, res.stdout
    assert "tma1 uninstall --adapter codex" in line
    assert "codex trust" not in res.stdout
    assert "ok    hooks gemini" in res.stdout and "Gemini CLI not found" in res.stdout
    assert not [ln for ln in res.stdout.splitlines() if ln.startswith("FAIL")], res.stdout


def test_the_server_data_line_compares_data_dir_and_database(tmp_path: Path) -> None:
    """In process, on /api/health answers: the same data, another data dir, the same data
    dir with another database (a team PostgreSQL), and an older server that does not say."""
    from tma1.commands import doctor
    from tma1.config import Settings
    from tma1.store.connection import database_identity

    mine = Settings(data_dir=tmp_path / "d")
    same = {
        "data_dir": str(tmp_path / "d"),
        "database_url": database_identity(mine.effective_database_url),
    }
    assert doctor.check_same_data(mine, None) is None
    assert doctor.check_same_data(mine, same).status == doctor.OK
    other_dir = doctor.check_same_data(mine, {**same, "data_dir": "/srv/tma1"})
    assert other_dir.status == doctor.FAIL and "--data-dir /srv/tma1" in other_dir.fix
    pg = "postgresql+psycopg://team:***@db.local/tma1"
    other_db = doctor.check_same_data(mine, {**same, "database_url": pg})
    assert other_db.status == doctor.FAIL and pg in other_db.message
    assert "TMA1_DATABASE_URL" in other_db.fix
    assert doctor.check_same_data(mine, {"status": "ok"}).status == doctor.UNKNOWN
