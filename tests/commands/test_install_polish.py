"""Install/uninstall polish (issue 17): the diff touches only tma1's lines, uninstall
leaves no backup that holds the installed version, and --help names every file."""

from __future__ import annotations

import json
from pathlib import Path

from installkit import USER_SETTINGS, tma1, write_settings

CLAUDE_JSON = """{
  "numStartups": 12,
  "projects": {"/home/me/app": {"allowedTools": [], "history": [{"display": "hi"}]}},
  "tipsHistory": {"a": 1, "b": 2}
}
"""


def _diff_lines(out: str) -> list[str]:
    return [ln.strip() for ln in out.splitlines() if ln.startswith("    ")]


def test_install_diff_adds_lines_and_rewraps_none_of_the_users(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = write_settings(home, USER_SETTINGS)
    (home / ".claude.json").write_text(CLAUDE_JSON)
    dry = tma1(home, "install", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    lines = _diff_lines(dry.stdout)
    removed = [ln[1:] for ln in lines if ln.startswith("-") and not ln.startswith("---")]
    added = {ln[1:] for ln in lines if ln.startswith("+") and not ln.startswith("+++")}
    # Nothing of the user's is rewritten: a line at most gains the comma JSON needs
    # before a member appended after it.
    assert all(r + "," in added for r in removed), dry.stdout
    assert tma1(home, "install").returncode == 0
    text = path.read_text()
    for line in USER_SETTINGS.splitlines():
        if line.strip() not in ("}", "]", "},", "],"):
            assert line in text, line  # e.g. '"allow": ["Bash(ls:*)"]' keeps its one line
    claude_json = (home / ".claude.json").read_text()
    assert (
        '"projects": {"/home/me/app": {"allowedTools": [], "history": [{"display": "hi"}]}}'
        in claude_json
    )


def test_uninstall_after_a_clean_restore_leaves_no_backup(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = write_settings(home, USER_SETTINGS)
    (home / ".claude.json").write_text(CLAUDE_JSON)
    assert tma1(home, "install").returncode == 0
    backup = path.with_name("settings.json.tma1-backup")
    assert backup.read_text() == USER_SETTINGS  # the user's original, while installed
    r = tma1(home, "uninstall")
    assert r.returncode == 0, r.stderr
    assert path.read_text() == USER_SETTINGS
    assert (home / ".claude.json").read_text() == CLAUDE_JSON
    assert sorted(p.name for p in home.rglob("*.tma1-backup")) == []


def test_backup_keeps_the_users_original_across_reinstall_and_a_dirty_uninstall(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    path = write_settings(home, USER_SETTINGS)
    backup = path.with_name("settings.json.tma1-backup")
    assert tma1(home, "install").returncode == 0
    # A reinstall that changes tma1's entries (another port) keeps the original backup.
    assert tma1(home, "install", "--port", "15555").returncode == 0
    assert backup.read_text() == USER_SETTINGS
    # The user edits the file while installed: uninstall cannot restore byte for byte, so
    # the backup (their file from before install) stays, and says so.
    doc = json.loads(path.read_text())
    doc["model"] = "sonnet"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    r = tma1(home, "uninstall")
    assert r.returncode == 0, r.stderr
    assert "settings.json.tma1-backup" in r.stdout and "before install" in r.stdout
    assert backup.read_text() == USER_SETTINGS  # never the installed version
    assert json.loads(path.read_text())["model"] == "sonnet"
    assert "tma1-hook" not in path.read_text()


def test_install_help_names_every_file_it_edits(tmp_path: Path) -> None:
    out = tma1(tmp_path, "install", "--help").stdout
    flat = " ".join(out.split())
    for name in (
        "~/.claude/settings.json",
        "~/.claude.json",
        "~/.codex/hooks.json",
        "~/.codex/config.toml",
    ):
        assert name in flat, name
