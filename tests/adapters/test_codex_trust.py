"""Whether Codex trusts tma1's hooks: `tma1.adapters.codex.trust_state`, on files laid out
as Codex 0.171 writes them (the hashes below are the ones the real binary recorded when
its TUI's "Trust all and continue" was chosen, in a throw-away CODEX_HOME)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trustkit import trust_all

from tma1.adapters import jsonhooks
from tma1.adapters.agents import codex
from tma1.adapters.agents.codex import hook_trust, trust_hash, trust_state
from tma1.config import Settings

# Codex 0.171.0, hooks.json {"SessionStart"|"Stop": [{"hooks": [{"type": "command",
# "command": "/bin/true", "timeout": 5}]}]}, trusted in the TUI: its config.toml then held
REAL = {
    "session_start": "sha256:1c771808593cd55aa6c3bed0e61aef482e8cd46a135d83e92db209cce5845e95",
    "stop": "sha256:d6aaf760a8f8afa7c73bf552ef1d4f22fb34c3c84809fcaee3053ec1bce4dd78",
}


# More that Codex 0.171 recorded: (event, command, timeout or None) -> hash. tma1's own
# handler (as `tma1 install --adapter codex` wrote it, timeout 5) on PreToolUse and
# SessionEnd (whose timeout Codex caps at 3 s, default 1 s), and handlers without one.
TMA1_SCRIPT = "/tmp/i14p-t2/data/hooks/tma1-hook-codex.sh"
MORE = [
    (
        "PreToolUse",
        TMA1_SCRIPT,
        5,
        "sha256:bf54f78c15d3466dab3267a87aff9c68439cd294e5c0e799073c67e83c49867a",
    ),
    (
        "SessionEnd",
        TMA1_SCRIPT,
        5,
        "sha256:822897506948838f1b1aa831b085acfe5491bd27965f4830df35320da687066f",
    ),
    (
        "SessionEnd",
        "/bin/true",
        1,
        "sha256:e316a08dd3c9aaa8f1ce73ad0aae0a3a5027e24211addbfe4fc16859be173e94",
    ),
    (
        "SessionEnd",
        "/bin/echo",
        None,
        "sha256:0d9f4bf1b55ecd4acba1557f5feab072a15e1bceda9f22e356da3a6d2729da85",
    ),
    (
        "Stop",
        "/bin/echo",
        None,
        "sha256:07f27b97d34e37eaa9df553fc98b2eb09049f5317354a6b6642bbe001a40f19a",
    ),
]


def test_the_hash_is_the_one_codex_records() -> None:
    handler = {"type": "command", "command": "/bin/true", "timeout": 5}
    assert trust_hash("SessionStart", {"hooks": [handler]}, handler) == REAL["session_start"]
    assert trust_hash("Stop", {"hooks": [handler]}, handler) == REAL["stop"]
    # Another timeout is another handler to Codex: untrusted again.
    assert trust_hash("Stop", {}, {**handler, "timeout": 6}) != REAL["stop"]
    for event, command, timeout, recorded in MORE:
        h: dict[str, object] = {"type": "command", "command": command}
        if timeout is not None:
            h["timeout"] = timeout
        assert trust_hash(event, {"hooks": [h]}, h) == recorded, (event, command, timeout)


def install(home: Path, data_dir: Path, port: int = 14318) -> Path:
    """What `tma1 install --adapter codex` writes into hooks.json (the registration's own
    plan, applied), next to a user's handler of their own."""
    settings = Settings(data_dir=data_dir, port=port)
    reg = next(
        r
        for r in codex.adapter(settings, {"CODEX_HOME": str(home)}).registrations
        if isinstance(r, codex.JsonHooksRegistration)
    )
    path = home / "hooks.json"
    user = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send"}]}]}}
    doc = path.read_text() if path.exists() else json.dumps(user)
    wanted = jsonhooks.add_hooks(json.loads(doc), reg.events, reg.handler, reg.marker, reg.matcher)
    path.write_text(json.dumps(wanted, indent=2))
    return path


def test_states_from_install_to_trust_to_a_changed_handler(tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    home.mkdir()
    assert trust_state(home) == "absent"  # no hooks.json
    (home / "hooks.json").write_text('{"hooks": {}}')
    assert trust_state(home) == "absent"  # no tma1 handler
    install(home, tmp_path / "data")
    assert trust_state(home) == "untrusted"  # installed, never trusted: `codex exec` skips
    assert len(hook_trust(home)) == len(codex.EVENTS)
    trust_all(home)
    assert trust_state(home) == "trusted"
    assert {t.state for t in hook_trust(home)} == {"trusted"}
    before = (home / "config.toml").read_text()
    # A reinstall from another data dir changes the command: trusted before, stale now.
    install(home, tmp_path / "other-data")
    assert trust_state(home) == "stale"
    assert (home / "config.toml").read_text() == before  # tma1 never writes trust
    trust_all(home)
    assert trust_state(home) == "trusted"


def test_a_new_event_is_untrusted_and_a_switched_off_hook_is_disabled(tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    home.mkdir()
    install(home, tmp_path / "data")
    trust_all(home)
    text = (home / "config.toml").read_text()
    # Drop one handler's record, as if a newer tma1 had added that event since.
    key = next(t.key for t in hook_trust(home) if t.event == "SessionEnd")
    block = f'[hooks.state."{key}"]\ntrusted_hash = '
    start = text.index(block)
    end = text.index("\n", start + len(block)) + 1
    (home / "config.toml").write_text(text[:start] + text[end:])
    assert trust_state(home) == "untrusted"
    assert [t.event for t in hook_trust(home) if t.state == "untrusted"] == ["SessionEnd"]
    (home / "config.toml").write_text(
        text.replace(block, f'[hooks.state."{key}"]\nenabled = false\ntrusted_hash = ')
    )
    assert trust_state(home) == "disabled"


@pytest.mark.parametrize("bad", ["{not json", '{"hooks": []}', "[]"])
def test_unreadable_files_are_absent_not_errors(tmp_path: Path, bad: str) -> None:
    (tmp_path / "hooks.json").write_text(bad)
    assert trust_state(tmp_path) == "absent"


def test_a_broken_config_toml_reads_as_nothing_trusted(tmp_path: Path) -> None:
    install(tmp_path, tmp_path / "data")
    (tmp_path / "config.toml").write_text("[hooks.state\nthis is not toml")
    assert trust_state(tmp_path) == "untrusted"
