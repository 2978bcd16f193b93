"""`tma1 service install|uninstall|status` as a subprocess into a temporary $HOME.

The systemd unit is checked by systemd's own parser (`systemd-analyze verify`) when it is
installed; the launchd plist by plistlib (`plutil -lint` is macOS-only). The service
manager is either the real one on this machine (in a container: no systemd user manager,
which must be said, not hidden) or a fake `systemctl` first on PATH that logs its calls.
"""

from __future__ import annotations

import os
import plistlib
import shlex
import shutil
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from conftest import tma1_cmd

from tma1 import autostart as su

UNIT = Path(".config/systemd/user/tma1.service")
PLIST = Path("Library/LaunchAgents/tma1.serve.plist")


def env_for(home: Path, path_prefix: Path | None = None, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        # No XDG_RUNTIME_DIR or session bus: a real systemctl can reach no user manager,
        # so a test never enables or starts a service for the user running it.
        if not k.startswith("TMA1_")
        and k not in ("XDG_CONFIG_HOME", "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS")
    }
    env["HOME"] = str(home)
    if path_prefix is not None:
        env["PATH"] = f"{path_prefix}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def tma1(
    home: Path, *args: str, path_prefix: Path | None = None, **extra: str
) -> subprocess.CompletedProcess[str]:
    if args[0] == "service" and "--platform" not in args:
        args = (*args[:2], "--platform", "systemd", *args[2:])
    return subprocess.run(
        tma1_cmd(*args),
        env=env_for(home, path_prefix, **extra),
        capture_output=True,
        text=True,
        timeout=60,
    )


def snapshot(root: Path) -> dict[str, tuple[bytes | None, int]]:
    """Every path under root with its bytes (None for directories) and mode."""
    return {
        str(p.relative_to(root)): (
            None if p.is_dir() else p.read_bytes(),
            stat.S_IMODE(p.lstat().st_mode),
        )
        for p in sorted(root.rglob("*"))
    }


def without_data_dir(snap: dict[str, tuple[bytes | None, int]]) -> dict:
    # The data dir is tma1's own (kept by uninstall, as `tma1 uninstall` keeps it).
    return {k: v for k, v in snap.items() if k != ".tma1" and not k.startswith(".tma1/")}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def systemd_verify(home: Path, unit: Path) -> subprocess.CompletedProcess[str]:
    """systemd's own parser on the unit; it needs a runtime dir even for --user."""
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed here (apt-get install systemd)")
    runtime = home.parent / "runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    return subprocess.run(
        ["systemd-analyze", "--user", "verify", str(unit)],
        env={**env_for(home), "XDG_RUNTIME_DIR": str(runtime)},
        capture_output=True,
        text=True,
        timeout=60,
    )


FAKE_SYSTEMCTL = """#!/bin/sh
echo "$*" >> "$FAKE_LOG"
case "$*" in
  "--user is-system-running") echo running ;;
  "--user is-enabled tma1.service") echo enabled ;;
  "--user is-active tma1.service") echo active ;;
  *"fail-me"*) echo "boom" >&2; exit 1 ;;
esac
exit 0
"""


@pytest.fixture
def fake_systemctl(tmp_path: Path) -> tuple[Path, Path]:
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    script = bin_dir / "systemctl"
    script.write_text(FAKE_SYSTEMCTL)
    script.chmod(0o755)
    return bin_dir, tmp_path / "systemctl.log"


def calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


# -- systemd ------------------------------------------------------------------------------


@pytest.mark.parametrize("existing", ["empty-home", "other-units"])
def test_install_then_uninstall_is_byte_identical(home: Path, existing: str) -> None:
    if existing == "other-units":
        other = home / UNIT.parent / "syncthing.service"
        other.parent.mkdir(parents=True)
        other.write_text("[Service]\nExecStart=/usr/bin/syncthing\n")
        (home / ".config" / "user-dirs.dirs").write_text("XDG_DESKTOP_DIR=x\n")
    before = snapshot(home)
    r = tma1(home, "service", "install", "--platform", "systemd")
    assert r.returncode == 0, r.stderr
    unit = home / UNIT
    text = unit.read_text()
    assert su.is_ours(unit.read_bytes())
    assert stat.S_IMODE(unit.stat().st_mode) == 0o644
    assert "Restart=on-failure" in text
    assert "LimitNOFILE=65536" in text  # issue 31: 1,024 files were too few
    assert "WantedBy=default.target" in text
    exec_start = next(ln for ln in text.splitlines() if ln.startswith("ExecStart="))
    # the absolute entry point of the tma1 that ran install (this venv's), then `serve`
    argv = shlex.split(exec_start.removeprefix("ExecStart="))
    assert argv == [str(Path(sys.executable).absolute().parent / "tma1"), "serve"]
    assert os.access(argv[0], os.X_OK)

    r = tma1(home, "service", "uninstall", "--platform", "systemd")
    assert r.returncode == 0, r.stderr
    assert without_data_dir(snapshot(home)) == without_data_dir(before)
    assert not (home / ".tma1" / "install-state.json").exists()


def test_the_unit_passes_systemd_analyze_verify(home: Path) -> None:
    data_dir = home / 'odd dir %h $HOME \\ "q"'
    r = tma1(home, "service", "install", TMA1_DATA_DIR=str(data_dir), TMA1_PORT="14999")
    assert r.returncode == 0, r.stderr
    v = systemd_verify(home, home / UNIT)
    assert v.returncode == 0 and v.stderr == "", v.stderr
    # systemd's parser rejects what a broken writer would produce: the check can fail
    broken = home / "broken" / "tma1.service"
    broken.parent.mkdir()
    broken.write_text((home / UNIT).read_text().replace("Restart=on-failure", "Restart=often"))
    v = systemd_verify(home, broken)
    assert "Failed to parse service restart specifier" in v.stderr
    # the carried environment reads back exactly (quoting and specifier escapes)
    carried = su.carried_environment("systemd", (home / UNIT).read_bytes())
    assert carried == {"TMA1_DATA_DIR": str(data_dir), "TMA1_PORT": "14999"}
    # uninstall finds the data dir (and its record of the directories made) in the unit
    assert tma1(home, "service", "uninstall").returncode == 0
    assert not (home / ".config").exists()


def test_install_twice_is_install_once(home: Path) -> None:
    assert tma1(home, "service", "install").returncode == 0
    first = (home / UNIT).read_bytes()
    r = tma1(home, "service", "install")
    assert r.returncode == 0, r.stderr
    assert "unchanged" in r.stdout
    assert (home / UNIT).read_bytes() == first


def test_settings_change_updates_the_unit_in_place(home: Path) -> None:
    assert tma1(home, "service", "install").returncode == 0
    r = tma1(home, "service", "install", "--port", "15000")
    assert r.returncode == 0, r.stderr
    assert "update" in r.stdout
    assert 'Environment="TMA1_PORT=15000"' in (home / UNIT).read_text()
    assert tma1(home, "service", "uninstall").returncode == 0
    assert not (home / UNIT).exists()


def test_a_database_url_is_carried_in_a_private_file(home: Path) -> None:
    url = "postgresql+psycopg://tma1:s3cret@db.internal/tma1"
    r = tma1(home, "service", "install", TMA1_DATABASE_URL=url)
    assert r.returncode == 0, r.stderr
    assert su.carried_environment("systemd", (home / UNIT).read_bytes()) == {
        "TMA1_DATABASE_URL": url
    }
    assert stat.S_IMODE((home / UNIT).stat().st_mode) == 0o600


def test_a_foreign_unit_is_refused_and_never_removed(home: Path) -> None:
    unit = home / UNIT
    unit.parent.mkdir(parents=True)
    unit.write_text("[Service]\nExecStart=/opt/my/tma1 serve\n")
    before = snapshot(home)
    r = tma1(home, "service", "install")
    assert r.returncode == 1
    assert "not written by tma1" in r.stderr
    r = tma1(home, "service", "uninstall")
    assert r.returncode == 0
    assert "not tma1's" in r.stdout
    assert snapshot(home) == before


def test_dry_run_prints_the_unit_and_writes_nothing(home: Path) -> None:
    r = tma1(home, "service", "install", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "would create" in r.stdout
    assert "+Restart=on-failure" in r.stdout
    assert snapshot(home) == {}
    assert tma1(home, "service", "install").returncode == 0
    before = snapshot(home)
    r = tma1(home, "service", "uninstall", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "would delete" in r.stdout and "-Restart=on-failure" in r.stdout
    assert snapshot(home) == before


def test_a_bad_setting_fails_before_anything_is_written(home: Path) -> None:
    r = tma1(home, "service", "install", TMA1_PORT="http")
    assert r.returncode == 2
    assert "TMA1_PORT" in r.stderr
    assert snapshot(home) == {}


OFFLINE_SYSTEMCTL = """#!/bin/sh
echo "$*" >> "$FAKE_LOG"
case "$*" in
  "--user is-system-running")
    echo offline; echo "Failed to connect to bus: No medium found" >&2; exit 1 ;;
  "--user is-enabled tma1.service") echo enabled ;;
esac
exit 0
"""


def test_without_a_user_manager_it_enables_offline_and_says_so(home: Path, tmp_path: Path) -> None:
    # A systemctl whose user manager is unreachable, as in a container or over SSH.
    bin_dir = tmp_path / "offline-bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(OFFLINE_SYSTEMCTL)
    (bin_dir / "systemctl").chmod(0o755)
    log = tmp_path / "offline.log"
    r = tma1(home, "service", "install", path_prefix=bin_dir, FAKE_LOG=str(log))
    assert r.returncode == 0, r.stderr
    assert calls(log) == ["--user is-system-running", "--user enable tma1.service"]
    assert "no systemd user manager is reachable" in r.stderr
    assert "offline" in r.stderr
    assert "written and enabled" in r.stderr
    assert "NOT running as a service now: run `tma1 serve` yourself" in r.stderr
    assert (home / UNIT).exists()
    s = tma1(home, "service", "status", path_prefix=bin_dir, FAKE_LOG=str(log))
    assert s.returncode == 1
    assert "unavailable" in s.stdout and "enabled: starts with the next user manager" in s.stdout
    log.unlink()
    r = tma1(home, "service", "uninstall", path_prefix=bin_dir, FAKE_LOG=str(log))
    assert r.returncode == 0, r.stderr
    assert calls(log) == ["--user is-system-running", "--user disable tma1.service"]
    assert not (home / ".config").exists()


def test_without_systemctl_nothing_will_start_it_and_it_says_so(home: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare-bin"  # only what tma1 itself needs: no systemctl
    bare.mkdir()
    r = subprocess.run(
        tma1_cmd("service", "install", "--platform", "systemd"),
        env={**env_for(home), "PATH": str(bare)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "systemctl is not installed" in r.stderr
    assert "nothing will start it" in r.stderr
    assert "NOT running as a service now" in r.stderr


def test_on_this_machine_the_real_systemctl_enables_and_disables(home: Path) -> None:
    """systemd's own systemctl, with no user manager to reach (the env has no runtime dir
    and no session bus): `enable` makes the wants link, `disable` takes it away."""
    if shutil.which("systemctl") is None:
        pytest.skip("systemctl is not installed here (apt-get install systemd)")
    before = snapshot(home)
    r = tma1(home, "service", "install")
    assert r.returncode == 0, r.stderr
    assert "no systemd user manager is reachable" in r.stderr
    link = home / UNIT.parent / "default.target.wants" / "tma1.service"
    assert link.is_symlink() and link.resolve() == (home / UNIT).resolve()
    v = systemd_verify(home, home / UNIT)
    assert v.returncode == 0 and v.stderr == "", v.stderr
    s = tma1(home, "service", "status")
    assert "enabled: starts with the next user manager" in s.stdout, s.stdout
    r = tma1(home, "service", "uninstall")
    assert r.returncode == 0, r.stderr
    assert not link.is_symlink()
    assert without_data_dir(snapshot(home)) == without_data_dir(before)


def test_with_a_user_manager_it_enables_and_starts_then_stops_and_disables(
    home: Path, fake_systemctl: tuple[Path, Path]
) -> None:
    bin_dir, log = fake_systemctl
    extra = {"FAKE_LOG": str(log)}
    r = tma1(home, "service", "install", path_prefix=bin_dir, **extra)
    assert r.returncode == 0, r.stderr
    # A checkout under /tmp (CI) draws a warning about where tma1 lives; nothing else.
    assert all("under the temporary directory" in ln for ln in r.stderr.splitlines()), r.stderr
    assert calls(log) == [
        "--user is-system-running",
        "--user daemon-reload",
        "--user enable tma1.service",
        "--user start tma1.service",
    ]
    log.unlink()
    s = tma1(home, "service", "status", path_prefix=bin_dir, **extra)
    assert s.returncode == 0, s.stdout
    assert "enabled, running" in s.stdout
    log.unlink()
    r = tma1(home, "service", "install", "--port", "15001", path_prefix=bin_dir, **extra)
    assert r.returncode == 0
    assert "--user restart tma1.service" in calls(log)  # a changed unit is restarted
    log.unlink()
    r = tma1(home, "service", "uninstall", path_prefix=bin_dir, **extra)
    assert r.returncode == 0, r.stderr
    assert calls(log) == [
        "--user is-system-running",
        "--user disable --now tma1.service",
        "--user daemon-reload",
    ]
    assert not (home / ".config").exists()


def test_a_failing_manager_command_is_an_error(
    home: Path, fake_systemctl: tuple[Path, Path]
) -> None:
    bin_dir, log = fake_systemctl
    # the fake's `enable` fails, as a real one does on a broken unit or a read-only home
    (bin_dir / "systemctl").write_text(
        FAKE_SYSTEMCTL.replace('*"fail-me"*)', '"--user enable tma1.service")')
    )
    r = tma1(home, "service", "install", path_prefix=bin_dir, FAKE_LOG=str(log))
    assert r.returncode == 1
    assert "`systemctl --user enable tma1.service` failed" in r.stderr
    assert "boom" in r.stderr


def test_xdg_config_home_is_honoured(home: Path, tmp_path: Path) -> None:
    xdg = tmp_path / "xdg"
    r = tma1(home, "service", "install", XDG_CONFIG_HOME=str(xdg))
    assert r.returncode == 0, r.stderr
    assert (xdg / "systemd" / "user" / "tma1.service").exists()
    assert not (home / ".config").exists()
    assert tma1(home, "service", "uninstall", XDG_CONFIG_HOME=str(xdg)).returncode == 0
    assert not xdg.exists()


# -- launchd (rendered and validated here; loaded only on a Mac) ---------------------------


def test_launchd_agent_written_validated_and_removed(home: Path) -> None:
    (home / "Library" / "Preferences").mkdir(parents=True)
    before = snapshot(home)
    r = tma1(home, "service", "install", "--platform", "launchd", TMA1_DATA_DIR=str(home / ".tma1"))
    assert r.returncode == 0, r.stderr
    if shutil.which("launchctl") is None:
        assert "launchctl is not installed" in r.stderr
    plist = home / PLIST
    doc = plistlib.loads(plist.read_bytes())  # a well-formed XML property list
    assert su.is_ours(plist.read_bytes())
    assert doc["Label"] == "tma1.serve"
    assert doc["ProgramArguments"][-1] == "serve"
    assert Path(doc["ProgramArguments"][0]).is_absolute()
    assert doc["KeepAlive"] == {"SuccessfulExit": False}  # restarted when it fails
    assert doc["RunAtLoad"] is True
    assert doc["SoftResourceLimits"] == {"NumberOfFiles": 8192}  # issue 31
    log = home / "Library" / "Logs" / "tma1" / "tma1.log"
    assert doc["StandardOutPath"] == doc["StandardErrorPath"] == str(log)
    assert log.parent.is_dir()  # launchd does not make the directory
    assert doc["EnvironmentVariables"] == {"TMA1_DATA_DIR": str(home / ".tma1")}
    assert plist.read_text().startswith(
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST'
    )
    r = tma1(home, "service", "uninstall", "--platform", "launchd")
    assert r.returncode == 0, r.stderr
    assert without_data_dir(snapshot(home)) == without_data_dir(before)


def test_launchd_logs_written_since_install_are_kept(home: Path) -> None:
    assert tma1(home, "service", "install", "--platform", "launchd").returncode == 0
    log = home / "Library" / "Logs" / "tma1" / "tma1.log"
    log.write_text("tma1 serving\n")
    assert tma1(home, "service", "uninstall", "--platform", "launchd").returncode == 0
    assert not (home / PLIST).exists()
    assert log.read_text() == "tma1 serving\n"


# -- status() for tma1 doctor, and tma1 install's hint --------------------------------------


def fake_runner(answers: dict[str, str]) -> su.Runner:
    def run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        key = " ".join(argv)
        return subprocess.CompletedProcess(argv, 0, answers.get(key, ""), "")

    return run


def test_status_function_for_doctor(home: Path) -> None:
    env = {"HOME": str(home)}
    running = fake_runner(
        {
            "systemctl --user is-system-running": "running\n",
            "systemctl --user is-enabled tma1.service": "enabled\n",
            "systemctl --user is-active tma1.service": "active\n",
        }
    )
    st = su.status(env, platform="systemd", run=running)
    assert (st.file, st.installed, st.ok) == ("absent", False, False)
    assert st.path == home / UNIT

    wanted = su.render("systemd", ["/opt/tma1/bin/tma1"], {}, env)
    (home / UNIT).parent.mkdir(parents=True)
    (home / UNIT).write_text(wanted)
    st = su.status(env, platform="systemd", run=running, wanted=wanted)
    assert (st.file, st.enabled, st.active, st.ok) == ("installed", True, True, True)
    st = su.status(env, platform="systemd", run=running)  # this tma1 is elsewhere
    assert st.file == "outdated" and st.installed and st.ok

    offline = fake_runner(
        {
            "systemctl --user is-system-running": "offline\n",
            "systemctl --user is-enabled tma1.service": "enabled\n",
        }
    )
    st = su.status(env, platform="systemd", run=offline, wanted=wanted)
    assert not st.manager.available and "offline" in st.manager.detail
    # is-enabled reads files (no manager needed); whether it runs cannot be known
    assert st.enabled is (True if shutil.which("systemctl") else None)
    assert st.active is None and not st.ok
    assert any("unavailable" in line for line in st.lines())

    (home / UNIT).write_text("[Service]\nExecStart=/bin/true\n")
    assert su.status(env, platform="systemd", run=running).file == "foreign"


def test_install_offers_the_service_until_it_is_installed(home: Path) -> None:
    if su.default_platform() is None:
        pytest.skip(f"no user service on {sys.platform}")
    r = tma1(home, "install", "--adapter", "claude-code")
    assert r.returncode == 0, r.stderr
    assert "to keep tma1 running: tma1 service install" in r.stdout
    assert tma1(home, "service", "install").returncode == 0
    r = tma1(home, "install", "--adapter", "claude-code")
    assert r.returncode == 0, r.stderr
    assert "tma1 service install" not in r.stdout
