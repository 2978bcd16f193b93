"""Muting (design §2.20) through the real hook path: `tma1 serve`, the installed hook
script run as the agent runs it, `tma1 mute`/`unmute` as subprocesses. A muted kind is
computed and shown as muted (preview API, MCP get_anomalies), never delivered, never
emitted; unmuting brings it back."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import free_port
from trustkit import Served, clean_env, run, serving

from tma1.adapters.hookscript import script_name
from tma1.engine.mutes import Mute

BUILD = "make build"
BUILD_OUT = "Exit code 2\nmain.go:12:5: undefined: frobnicate\nmake: *** [build] Error 1"
KIND = "repeated_failed_build"


def _blocks(answer: str) -> bool:
    """Claude Code's Stop answer that keeps it going (docs/hooks.md: additionalContext)."""
    out = json.loads(answer).get("hookSpecificOutput", {}) if answer else {}
    return out.get("hookEventName") == "Stop" and "do not stop yet" in out.get(
        "additionalContext", ""
    )


def _hook(script: Path, env: dict[str, str], payload: dict[str, Any]) -> str:
    res = subprocess.run(
        ["sh", str(script)],
        input=json.dumps(payload).encode(),
        env={**env, "TMA1_HOOK_TIMEOUT": "20"},
        capture_output=True,
        timeout=60,
    )
    assert res.returncode == 0
    return res.stdout.decode()


def _ev(sid: str, cwd: Path, name: str, **kw: Any) -> dict[str, Any]:
    return {"session_id": sid, "hook_event_name": name, "cwd": str(cwd), **kw}


def _fail(sid: str, cwd: Path, n: int) -> dict[str, Any]:
    return _ev(
        sid,
        cwd,
        "PostToolUseFailure",
        tool_name="Bash",
        tool_input={"command": BUILD},
        error=BUILD_OUT,
        tool_use_id=f"fail-{n}",
    )


def _emits(srv: Served, sid: str, want: int) -> list[dict[str, Any]]:
    """The session's emit rows, once `want` are there (the writer is asynchronous) or the
    deadline passed."""
    deadline = time.monotonic() + 10
    while True:
        rows = srv.get("/api/anomalies", params={"session_id": sid}).json()
        rows = rows.get("emits", rows) if isinstance(rows, dict) else rows
        if len(rows) >= want or time.monotonic() > deadline:
            return rows
        time.sleep(0.1)


def _preview(srv: Served, sid: str) -> list[dict[str, Any]]:
    r = srv.get("/api/anomalies/preview", params={"session_id": sid})
    return [f for f in r.json()["findings"] if f["kind"] == KIND]


def _mcp_text(srv: Served, sid: str, cwd: Path) -> str:
    from tma1.mcp.api import Tma1Api
    from tma1.mcp.server import Tools

    async def go() -> str:
        assert srv.data_dir is not None
        token = (srv.data_dir / "hook-token").read_text().strip()
        api = Tma1Api(srv.url, token=token)
        try:
            result = await Tools(api, cwd=str(cwd)).get_anomalies(sid)
        finally:
            await api.aclose()
        return "\n".join(getattr(c, "text", "") for c in result.content)

    return anyio.run(go)


def test_muted_kind_is_shown_but_never_delivered_until_unmuted(tmp_path: Path) -> None:
    home, data = tmp_path / "home", tmp_path / "data"
    proj, other = tmp_path / "proj", tmp_path / "other"
    for d in (home / ".claude", proj / ".git", other / ".git"):
        d.mkdir(parents=True)
    env = clean_env(home, data, TMA1_PORT=str(free_port()))
    assert run(env, "install", "--adapter", "claude-code").returncode == 0
    script = data / "hooks" / script_name("claude-code")

    muted = run(env, "mute", KIND, "--project", str(proj))
    assert muted.returncode == 0, muted.stderr
    assert f"muted {KIND} in {proj}" in muted.stdout
    listed = run(env, "mute")
    assert f"muted: {KIND} in {proj}, until `tma1 unmute`" in listed.stdout

    with serving(env, port=int(env["TMA1_PORT"])) as srv:
        # Muted project: three failures of the same build, then a Stop.
        for n in range(3):
            _hook(script, env, _fail("m1", proj, n))
        assert _hook(script, env, _ev("m1", proj, "Stop")) == ""
        shown = _preview(srv, "m1")
        assert shown and all(f["muted"] and not f["would_deliver"] for f in shown), shown
        assert shown[0]["decision"] == "muted" and shown[0]["muted_project"] == str(proj)
        assert "Muted in" in _mcp_text(srv, "m1", proj)
        # Another project is not muted: the same loop blocks its Stop.
        for n in range(3):
            _hook(script, env, _fail("o1", other, n))
        assert _blocks(_hook(script, env, _ev("o1", other, "Stop")))
        assert [e["kind"] for e in _emits(srv, "o1", 1)] == [KIND]
        assert _emits(srv, "m1", 0) == []

        unmuted = run(env, "unmute", KIND, "--project", str(proj))
        assert unmuted.returncode == 0, unmuted.stderr
        answer = _hook(script, env, _ev("m1", proj, "Stop"))
        assert _blocks(answer), answer
        assert [e["kind"] for e in _emits(srv, "m1", 1)] == [KIND]
        assert not _preview(srv, "m1")[0]["muted"]


def test_unmute_of_what_is_not_muted_says_so(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir(mode=0o700)
    env = clean_env(tmp_path, tmp_path / "data")
    res = run(env, "unmute", KIND)
    assert res.returncode == 1
    assert res.stderr.strip() == f"tma1: {KIND} was not muted in every project"
    run(env, "mute", KIND, "--project", str(tmp_path))
    res = run(env, "unmute", KIND)
    assert "it is muted" in res.stderr and "same --project" in res.stderr
    assert "Traceback" not in res.stderr


def test_timed_mute_ends_by_itself(tmp_path: Path) -> None:
    m = Mute(kind=KIND, project=None, until_ms=1_000)
    assert m.matches(KIND, "/any", 999)
    assert not m.matches(KIND, "/any", 1_000)
    (tmp_path / "data").mkdir(mode=0o700)
    res = run(clean_env(tmp_path, tmp_path / "data"), "mute", KIND, "--for", "2h")
    assert res.returncode == 0 and "until 20" in res.stdout
    bad = run(clean_env(tmp_path, tmp_path / "data"), "mute", KIND, "--for", "soon")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "--for='soon' is not a duration" in bad.stderr
    assert (tmp_path / "data" / "mutes.json").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("args", [("mute", KIND), ("mute",), ("unmute", KIND)])
def test_a_data_dir_that_does_not_exist_is_refused_not_created(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    """Issue 28.5: a mistyped --data-dir made a directory and a mutes.json no server reads."""
    typo = tmp_path / "tma1-typo"
    res = run(clean_env(tmp_path, tmp_path / "data"), *args, "--data-dir", str(typo))
    assert res.returncode == 2
    assert res.stderr.strip() == (
        f"tma1: configuration error: no tma1 data dir at {typo}: check --data-dir "
        "(TMA1_DATA_DIR); `tma1 serve` creates it on first start"
    )
    assert not typo.exists() and res.stdout == ""
