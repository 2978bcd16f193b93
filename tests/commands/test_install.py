"""`tma1 install` / `tma1 uninstall` as a subprocess into a temporary $HOME."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import tma1_cmd
from installkit import USER_SETTINGS, env_for, snapshot, tma1, write_settings

from tma1.auth.hooktoken import http_hook_key

CLAUDE_EVENTS = {
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "UserPromptSubmit",
    "Stop",
    "SessionStart",
    "SessionEnd",
    "PreCompact",
    "SubagentStart",
    "SubagentStop",
}
CODEX_EVENTS = {
    "SessionStart",
    "PreToolUse",
    "PostToolUse",
    "UserPromptSubmit",
    "Stop",
    "PreCompact",
    "PostCompact",
    "SessionEnd",
    "SubagentStart",
    "SubagentStop",
}


def our_handlers(doc: dict, marker: str) -> list[tuple[str, dict]]:
    return [
        (event, h)
        for event, groups in doc.get("hooks", {}).items()
        for g in groups
        for h in g["hooks"]
        if marker in h.get("command", "")
    ]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def test_install_registers_every_event_once_and_keeps_the_users_entries(home: Path) -> None:
    path = write_settings(home, USER_SETTINGS)
    r = tma1(home, "install", "--adapter", "claude-code")
    assert r.returncode == 0, r.stderr
    doc = json.loads(path.read_text())
    ours = our_handlers(doc, "tma1-hook-claude-code.sh")
    assert sorted(e for e, _ in ours) == sorted(CLAUDE_EVENTS)
    script = home / ".tma1" / "hooks" / "tma1-hook-claude-code.sh"
    for event, h in ours:
        args = [] if event in ("SessionStart", "SessionEnd") else ["--stdin-closes"]
        assert h == {"type": "command", "command": str(script), "args": args, "timeout": 5}
    # our groups use the empty matcher
    for event in CLAUDE_EVENTS:
        assert any(
            g.get("matcher") == "" and any("tma1-hook" in h["command"] for h in g["hooks"])
            for g in doc["hooks"][event]
        )
    # the user's entries and unknown keys, untouched and first
    assert doc["hooks"]["Stop"][0] == {
        "hooks": [{"type": "command", "command": "notify-send done"}]
    }
    assert doc["hooks"]["PreToolUse"][0]["matcher"] == "Bash"
    assert doc["unknownFutureKey"] == {"nested": [1, 2.5, None, True]}
    assert doc["permissions"] == {"allow": ["Bash(ls:*)"]}
    assert doc["model"] == "opus"
    # the script is executable, the token exists with mode 0600, a backup holds the original
    assert os.access(script, os.X_OK)
    token = home / ".tma1" / "hook-token"
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert len(token.read_text().strip()) == 64
    assert (path.parent / "settings.json.tma1-backup").read_text() == USER_SETTINGS


def test_install_twice_is_install_once(home: Path) -> None:
    path = write_settings(home, USER_SETTINGS)
    assert tma1(home, "install").returncode == 0
    once = path.read_bytes()
    r = tma1(home, "install")
    assert r.returncode == 0, r.stderr
    assert path.read_bytes() == once
    assert len(our_handlers(json.loads(once), "tma1-hook-claude-code.sh")) == len(CLAUDE_EVENTS)
    # and uninstall still gives back the bytes from before the first install
    assert tma1(home, "uninstall").returncode == 0
    assert path.read_text() == USER_SETTINGS


ORIGINALS = {
    "two-space": USER_SETTINGS,
    "four-space-no-newline": json.dumps(json.loads(USER_SETTINGS), indent=4),
    "tabs": json.dumps(json.loads(USER_SETTINGS), indent="\t") + "\n",
    "compact-one-line": json.dumps(json.loads(USER_SETTINGS), separators=(",", ":")),
    "odd-hand-formatting": '{ "model" : "opus",\n\n   "env": {"A": "ü"} }\n',
    "empty-object": "{}\n",
    "hooks-but-empty": '{\n  "hooks": {}\n}\n',
}


@pytest.mark.parametrize("name", sorted(ORIGINALS))
def test_install_then_uninstall_is_byte_identical(home: Path, name: str) -> None:
    original = ORIGINALS[name]
    path = write_settings(home, original)
    os.chmod(path, 0o600)
    assert tma1(home, "install").returncode == 0
    assert path.read_text() != original
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # settings may hold secrets
    r = tma1(home, "uninstall")
    assert r.returncode == 0, r.stderr
    assert path.read_bytes() == original.encode()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not (home / ".tma1" / "hooks").exists()


def test_missing_settings_file_is_created_and_uninstall_removes_it(home: Path) -> None:
    assert tma1(home, "install").returncode == 0
    path = home / ".claude" / "settings.json"
    doc = json.loads(path.read_text())
    assert set(doc) == {"hooks"}
    assert set(doc["hooks"]) == CLAUDE_EVENTS
    assert tma1(home, "uninstall").returncode == 0
    assert not path.exists()
    assert not (home / ".claude").exists()  # install made the directory, so it goes too


def test_uninstall_keeps_changes_the_user_made_after_install(home: Path) -> None:
    path = write_settings(home, USER_SETTINGS)
    assert tma1(home, "install").returncode == 0
    doc = json.loads(path.read_text())
    doc["theme"] = "dark"
    doc["hooks"]["Stop"][0]["hooks"].append({"type": "command", "command": "echo bye"})
    path.write_text(json.dumps(doc, indent=2) + "\n")
    assert tma1(home, "uninstall").returncode == 0
    after = json.loads(path.read_text())
    expected = json.loads(USER_SETTINGS)
    expected["theme"] = "dark"
    expected["hooks"]["Stop"][0]["hooks"].append({"type": "command", "command": "echo bye"})
    assert after == expected
    assert path.read_text().startswith('{\n  "model"')  # the file's own indent kept


def test_reinstall_replaces_our_entry_in_place_even_from_another_data_dir(home: Path) -> None:
    old = home / "old-data" / "hooks" / "tma1-hook-claude-code.sh"
    settings = {
        "hooks": {
            "Stop": [
                {
                    "matcher": "",
                    "hooks": [
                        {"type": "command", "command": "echo mine"},
                        {"type": "command", "command": str(old), "timeout": 99},
                        {"type": "command", "command": "echo also mine"},
                    ],
                },
                {"hooks": [{"type": "command", "command": f"{old} --dup"}]},
            ]
        }
    }
    path = write_settings(home, json.dumps(settings, indent=2) + "\n")
    assert tma1(home, "install").returncode == 0
    doc = json.loads(path.read_text())
    new = str(home / ".tma1" / "hooks" / "tma1-hook-claude-code.sh")
    assert doc["hooks"]["Stop"] == [
        {
            "matcher": "",
            "hooks": [
                {"type": "command", "command": "echo mine"},
                {"type": "command", "command": new, "args": ["--stdin-closes"], "timeout": 5},
                {"type": "command", "command": "echo also mine"},
            ],
        }
    ]  # the duplicate group held only ours, so it went


@pytest.mark.parametrize(
    "bad",
    ['{"hooks": {"Stop": [}', "[1, 2]", '{"hooks": []}', '{"hooks": {"Stop": {}}}', "\ufeff{"],
)
def test_malformed_file_is_refused_and_left_untouched(home: Path, bad: str) -> None:
    path = write_settings(home, bad)
    before = snapshot(home)
    r = tma1(home, "install")
    assert r.returncode == 1
    assert str(path) in r.stderr
    assert "Nothing was changed" in r.stderr
    assert r.stdout == "" or "Traceback" not in r.stdout
    assert snapshot(home) == before  # not even the script or the token were written
    r = tma1(home, "uninstall")
    assert r.returncode == 1 and str(path) in r.stderr
    assert snapshot(home) == before


def test_dry_run_prints_a_diff_and_writes_nothing(home: Path) -> None:
    write_settings(home, USER_SETTINGS)
    (home / ".codex").mkdir()  # Codex is on this machine: `all` takes it
    before = snapshot(home)
    r = tma1(home, "install", "--adapter", "all", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert snapshot(home) == before
    script = str(home / ".tma1" / "hooks" / "tma1-hook-claude-code.sh")
    added = [ln.strip() for ln in r.stdout.splitlines() if ln.strip().startswith("+")]
    assert sum(f'"command": "{script}"' in ln for ln in added) == len(CLAUDE_EVENTS)
    assert "--- " + str(home / ".claude" / "settings.json") in r.stdout
    assert "+++ " + str(home / ".codex" / "hooks.json") in r.stdout
    assert "would create" in r.stdout and "would update" in r.stdout
    # after a real install, a dry-run uninstall shows the removal and still writes nothing
    assert tma1(home, "install").returncode == 0
    before = snapshot(home)
    r = tma1(home, "uninstall", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert snapshot(home) == before
    removed = [ln.strip() for ln in r.stdout.splitlines() if ln.strip().startswith("-")]
    assert sum(f'"command": "{script}"' in ln for ln in removed) == len(CLAUDE_EVENTS)


def test_codex_install_and_uninstall(home: Path) -> None:
    codex_dir = home / ".codex"
    codex_dir.mkdir()
    original = '{\n  "hooks": {\n    "Stop": [\n      {\n        "hooks": [\n          {\n            "type": "command",\n            "command": "python3 ~/.codex/stop.py",\n            "timeout": 30\n          }\n        ]\n      }\n    ]\n  }\n}\n'  # noqa: E501
    path = codex_dir / "hooks.json"
    path.write_text(original)
    r = tma1(home, "install", "--adapter", "codex")
    assert r.returncode == 0, r.stderr
    # What the user must do for Codex to run the hooks, and that they are not trusted yet.
    assert "  Codex has not trusted tma1's hooks yet" in r.stdout
    assert 'start `codex` (the interactive TUI) once and choose "Trust all and continue"' in (
        " ".join(r.stdout.split())
    )
    assert "`codex exec` never asks: it skips untrusted hooks silently" in r.stdout
    assert "open /hooks" not in r.stdout
    doc = json.loads(path.read_text())
    assert set(doc) == {"hooks"}  # Codex refuses unknown root keys
    ours = our_handlers(doc, "tma1-hook-codex.sh")
    assert sorted(e for e, _ in ours) == sorted(CODEX_EVENTS)
    for groups in doc["hooks"].values():
        for g in groups:
            if any("tma1-hook" in h["command"] for h in g["hooks"]):
                assert "matcher" not in g
    script = home / ".tma1" / "hooks" / "tma1-hook-codex.sh"
    assert "?source=codex&envelope=codex" in script.read_text()
    assert not (home / ".claude").exists()
    assert tma1(home, "uninstall", "--adapter", "codex").returncode == 0
    assert path.read_text() == original


def test_all_refuses_everything_when_one_file_is_malformed(home: Path) -> None:
    write_settings(home, USER_SETTINGS)
    (home / ".codex").mkdir()
    (home / ".codex" / "hooks.json").write_text("{oops")
    before = snapshot(home)
    r = tma1(home, "install", "--adapter", "all")
    assert r.returncode == 1
    assert str(home / ".codex" / "hooks.json") in r.stderr
    assert snapshot(home) == before


def test_honours_tma1_data_dir_and_claude_config_dir(home: Path, tmp_path: Path) -> None:
    data = tmp_path / "elsewhere"
    cfg = tmp_path / "claude-cfg"
    r = tma1(
        home, "install", TMA1_DATA_DIR=str(data), CLAUDE_CONFIG_DIR=str(cfg), TMA1_PORT="15555"
    )
    assert r.returncode == 0, r.stderr
    script = data / "hooks" / "tma1-hook-claude-code.sh"
    assert "TMA1_PORT=15555" in script.read_text()
    assert str(script) in (cfg / "settings.json").read_text()
    assert (data / "hook-token").exists()
    assert not (home / ".claude").exists()


def test_a_symlinked_settings_file_stays_a_symlink(home: Path, tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "claude-settings.json"
    real.write_text(USER_SETTINGS)
    (home / ".claude").mkdir()
    link = home / ".claude" / "settings.json"
    link.symlink_to(real)
    assert tma1(home, "install").returncode == 0
    assert link.is_symlink() and link.resolve() == real
    assert len(our_handlers(json.loads(real.read_text()), "tma1-hook")) == len(CLAUDE_EVENTS)
    assert tma1(home, "uninstall").returncode == 0
    assert link.is_symlink()
    assert real.read_text() == USER_SETTINGS


def test_uninstall_without_the_state_file_still_removes_only_ours(home: Path) -> None:
    """The data dir was wiped between install and uninstall: no record of the original.
    The file's own style is detected, so a file in Claude Code's style comes back intact."""
    original = json.dumps(json.loads(USER_SETTINGS), indent=2) + "\n"
    path = write_settings(home, original)
    assert tma1(home, "install").returncode == 0
    (home / ".tma1" / "install-state.json").unlink()
    assert tma1(home, "uninstall").returncode == 0
    assert path.read_text() == original


def test_an_event_the_user_had_left_empty_survives(home: Path) -> None:
    original = '{\n  "hooks": {\n    "Stop": [],\n    "PreToolUse": []\n  }\n}\n'
    path = write_settings(home, original)
    assert tma1(home, "install").returncode == 0
    doc = json.loads(path.read_text())
    doc["theme"] = "dark"  # a user edit, so uninstall must rebuild rather than restore
    path.write_text(json.dumps(doc, indent=2) + "\n")
    assert tma1(home, "uninstall").returncode == 0
    assert json.loads(path.read_text()) == {
        "hooks": {"Stop": [], "PreToolUse": []},
        "theme": "dark",
    }


def test_reinstall_after_the_state_file_was_lost_then_uninstall(home: Path) -> None:
    path = write_settings(home, USER_SETTINGS)
    assert tma1(home, "install").returncode == 0
    (home / ".tma1" / "install-state.json").unlink()
    assert tma1(home, "install").returncode == 0  # finds its own entries, records no original
    assert tma1(home, "uninstall").returncode == 0
    assert json.loads(path.read_text()) == json.loads(USER_SETTINGS)


def test_a_relative_data_dir_is_registered_as_an_absolute_path(home: Path, tmp_path: Path) -> None:
    r = subprocess.run(
        tma1_cmd("install"),
        env=env_for(home, TMA1_DATA_DIR="rel-data"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads((home / ".claude" / "settings.json").read_text())
    script = tmp_path / "rel-data" / "hooks" / "tma1-hook-claude-code.sh"
    commands = {event: h["command"] for event, h in our_handlers(doc, script.name)}
    assert commands["PostToolUse"] == str(script)
    assert (tmp_path / "rel-data" / "hook-token").exists()


def test_claude_code_hooks_fork_a_capped_worker_only_where_a_session_begins_or_ends(
    home: Path,
) -> None:
    """Claude Code closes the hook's stdin once the event is written: the script serves
    those events in one process (`--stdin-closes`); SessionStart and SessionEnd (/clear is
    both) keep the worker whose time cap also covers an agent that leaves stdin open.
    Every hook is in exec form (`args` present): Claude Code spawns the script itself,
    no shell first."""
    assert tma1(home, "install").returncode == 0
    doc = json.loads((home / ".claude" / "settings.json").read_text())
    handlers = dict(our_handlers(doc, "tma1-hook-claude-code.sh"))
    bounded = {e for e, h in handlers.items() if h["args"] != ["--stdin-closes"]}
    assert bounded == {"SessionStart", "SessionEnd"}
    assert all(handlers[e]["args"] == [] for e in bounded)
    assert set(handlers) > bounded | {"PreToolUse", "PostToolUse", "Stop", "UserPromptSubmit"}
    script = home / ".tma1" / "hooks" / "tma1-hook-claude-code.sh"
    assert {h["command"] for h in handlers.values()} == {str(script)}


def test_http_transport_round_trip(home: Path) -> None:
    """`--transport http`: every event but SessionStart as Claude Code's native http hook
    (JSON answers, a 1 s timeout, a key derived from the token as a literal header: never
    the token, which Claude Code would hand to any listener on the port), SessionStart as the
    command hook; reinstalling either way replaces in place; uninstall gives the bytes back."""
    original = USER_SETTINGS
    path = write_settings(home, original)
    os.chmod(path, 0o644)
    r = tma1(home, "install", "--transport", "http", "--port", "14999")
    assert r.returncode == 0, r.stderr
    assert "http transport" in r.stdout
    token = (home / ".tma1" / "hook-token").read_text().strip()
    doc = json.loads(path.read_text())
    http = [
        (event, h)
        for event, groups in doc["hooks"].items()
        for g in groups
        for h in g["hooks"]
        if h.get("type") == "http"
    ]
    assert sorted(e for e, _ in http) == sorted(CLAUDE_EVENTS - {"SessionStart"})
    for _, h in http:
        assert h == {
            "type": "http",
            "url": "http://127.0.0.1:14999/api/hooks?transport=http&hook=tma1-hook-claude-code.sh",
            "headers": {"X-TMA1-Token": http_hook_key(token)},
            "timeout": 1,
        }
    assert token not in path.read_text()
    assert [e for e, _ in our_handlers(doc, "tma1-hook-claude-code.sh")] == ["SessionStart"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # it holds the hook key now (was 0644)
    # The user's own handlers are where they were.
    assert doc["hooks"]["Stop"][0]["hooks"] == [{"type": "command", "command": "notify-send done"}]
    assert doc["hooks"]["PreToolUse"][0]["matcher"] == "Bash"

    once = path.read_bytes()
    assert tma1(home, "install", "--transport", "http", "--port", "14999").returncode == 0
    assert path.read_bytes() == once  # idempotent
    # Back to the command hook: every http handler replaced in place, none left.
    assert tma1(home, "install").returncode == 0
    doc = json.loads(path.read_text())
    assert not any(
        h.get("type") == "http" for gs in doc["hooks"].values() for g in gs for h in g["hooks"]
    )
    assert sorted(e for e, _ in our_handlers(doc, "tma1-hook-claude-code.sh")) == sorted(
        CLAUDE_EVENTS
    )
    assert tma1(home, "install", "--transport", "http").returncode == 0
    r = tma1(home, "uninstall")
    assert r.returncode == 0, r.stderr
    assert path.read_bytes() == original.encode()


def test_all_skips_agents_not_on_this_machine_and_says_so(home: Path, tmp_path: Path) -> None:
    """Issue 28.4: `all` means the agents found here (config dir or command on PATH)."""
    write_settings(home, USER_SETTINGS)
    path = f"{tmp_path / 'no-agents-bin'}:/usr/bin:/bin"
    r = tma1(home, "install", "--adapter", "all", PATH=path)
    assert r.returncode == 0, r.stderr
    skipped = [ln for ln in r.stdout.splitlines() if ln.startswith("skipped ")]
    assert [ln.split(":")[0] for ln in skipped] == [
        "skipped Codex",
        "skipped Gemini CLI",
        "skipped GitHub Copilot CLI",
    ], r.stdout
    assert "`codex` on PATH" in skipped[0] and "--adapter codex" in skipped[0]
    assert not (home / ".codex").exists()
    assert not (home / ".gemini").exists() and not (home / ".copilot").exists()
    assert "tma1-hook-claude-code.sh" in (home / ".claude" / "settings.json").read_text()


def test_dry_run_shows_only_tma1_s_lines_not_a_comma_added_to_the_user_s(home: Path) -> None:
    """Issue 28.9: the user's last key gains a comma when tma1's entries follow it; the
    diff showed that as the user's line changed (-/+)."""
    write_settings(home, '{\n  "model": "opus"\n}\n')
    r = tma1(home, "install", "--dry-run")
    assert r.returncode == 0, r.stderr
    diff = [ln[4:] for ln in r.stdout.splitlines() if ln.startswith("    ")]
    start = diff.index(f"--- {home / '.claude' / 'settings.json'}")
    hunk = diff[start : diff.index(f"+++ {home / '.claude.json'}") - 1]
    assert [ln for ln in hunk[2:] if ln.startswith("-")] == [], hunk
    assert '   "model": "opus",' in hunk  # the user's line: context, as it will read
    added = "\n".join(ln[1:] for ln in hunk[3:] if ln.startswith("+"))
    assert "tma1-hook-claude-code.sh" in added and "model" not in added
