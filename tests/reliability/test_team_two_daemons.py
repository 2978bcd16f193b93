"""Issue 30: two developers' `tma1 serve` on one PostgreSQL, their working trees at the
same path (`/workspaces/app` in every devcontainer). Neither machine's agent hears of the
other's sessions, failing checks or file writes; the team scope shows both machines'
sessions under one repository, and the team's gates count both machines' emits.

Two real servers (different TMA1_MACHINE_IDs and data dirs) on a fresh database of the
real PostgreSQL test cluster. One directory stands for both trees (two git repositories
at one path cannot exist on one machine): both servers' hooks name the same `cwd`, and
only machine B watches it, so every file change in it is B's."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import LOOPBACK_TLS, PG_URL, _drop_pg_database, _fresh_pg_database
from loadkit import ServeProcess, hook_headers

from tma1.store import Store

pytestmark = pytest.mark.skipif(not PG_URL, reason="no PostgreSQL test cluster")

REMOTE = "git@github.com:Acme/app.git"


def call(server: ServeProcess, method: str, path: str, **kw: Any) -> httpx.Response:
    """Every request of this test, authenticated as the hook script (a fresh nonce and its
    keyed hash) or as an API client (the token)."""
    auth = hook_headers(server.token) if path == "/api/hooks" else {}
    headers = {"X-TMA1-Token": server.token, **auth, **kw.pop("headers", {})}
    return httpx.request(
        method, f"{server.url}{path}", headers=headers, timeout=30, verify=LOOPBACK_TLS, **kw
    )


def get(server: ServeProcess, path: str, **params: Any) -> Any:
    r = call(server, "GET", path, params=params)
    assert r.status_code == 200, (path, r.status_code, r.text[:500])
    return r.json()


def hook(server: ServeProcess, payload: dict[str, Any]) -> str:
    """What the agent hears back."""
    r = call(server, "POST", "/api/hooks", content=json.dumps(payload))
    assert r.status_code == 200, r.text[:500]
    return r.text


@pytest.fixture
def team_db() -> Iterator[str]:
    assert PG_URL
    url = _fresh_pg_database(PG_URL)
    yield url
    _drop_pg_database(PG_URL, url)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "workspaces" / "app"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text(
        f'[core]\n\tbare = false\n[remote "origin"]\n\turl = {REMOTE}\n'
        "\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
    )
    (root / "src").mkdir()
    (root / "src" / "shared.py").write_text("x = 1\n")
    return root


@pytest.fixture
def servers(tmp_path: Path, team_db: str) -> Iterator[tuple[ServeProcess, ServeProcess]]:
    started: list[ServeProcess] = []
    try:
        # One after the other: the first one migrates the empty database.
        for name, watch in (("a", False), ("b", True)):
            started.append(
                ServeProcess.start(
                    tmp_path / f"data-{name}",
                    database_url=team_db,
                    env={"TMA1_MACHINE_ID": f"machine-{name}"},
                    watch=watch,
                )
            )
        yield started[0], started[1]
    finally:
        for s in started:
            s.stop()


def _session(server: ServeProcess, sid: str, cwd: Path, *, failing_check: bool) -> str:
    """A short session; what its SessionStart was told."""
    base = {"session_id": sid, "cwd": str(cwd), "transcript_path": f"{cwd}/t-{sid}.jsonl"}
    shared = str(cwd / "src" / "shared.py")
    told = hook(server, {**base, "hook_event_name": "SessionStart", "source": "startup"})
    hook(server, {**base, "hook_event_name": "UserPromptSubmit", "prompt": "go on"})
    hook(server, {**base, "hook_event_name": "PreToolUse", "tool_name": "Read",
                  "tool_use_id": f"{sid}-r", "tool_input": {"file_path": shared}})  # fmt: skip
    read = {"type": "text", "file": {"filePath": shared, "content": "x = 1\n"}}
    hook(server, {**base, "hook_event_name": "PostToolUse", "tool_name": "Read",
                  "tool_use_id": f"{sid}-r", "tool_input": {"file_path": shared},
                  "tool_response": read})  # fmt: skip
    if failing_check:
        cmd = "pytest -q tests/test_only_on_b.py"
        hook(server, {**base, "hook_event_name": "PreToolUse", "tool_name": "Bash",
                      "tool_use_id": f"{sid}-t", "tool_input": {"command": cmd}})  # fmt: skip
        hook(server, {**base, "hook_event_name": "PostToolUseFailure", "tool_name": "Bash",
                      "tool_use_id": f"{sid}-t", "tool_input": {"command": cmd},
                      "error": "Exit code 1\nFAILED tests/test_only_on_b.py::test_b - "
                               "assert 1 == 2\n1 failed in 0.1s"})  # fmt: skip
    return told


def _wait_for(what: str, probe: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_two_machines_on_one_database_hear_only_of_their_own_tree(
    servers: tuple[ServeProcess, ServeProcess], project: Path, team_db: str
) -> None:
    a, b = servers
    sid_a, sid_b, sid_b2 = (f"{m}-{uuid.uuid4().hex[:8]}" for m in ("sa", "sb", "sb2"))
    _session(b, sid_b, project, failing_check=True)
    a_started = _session(a, sid_a, project, failing_check=False)
    b_started = _session(b, sid_b2, project, failing_check=False)
    # A file written in B's tree, by no agent: B's watcher stores it as B's change.
    (project / "src" / "only_on_b.py").write_text("y = 2\n")
    _wait_for(
        "B's watcher to store the change",
        lambda: get(b, f"/api/agent/sessions/{sid_b2}/external-changes")["changes"],
    )

    # The controls: on machine B, a second session hears of B's failing check, of B's
    # other session and of the file written in B's tree.
    b_told = json.dumps(
        [
            b_started,
            get(b, f"/api/agent/sessions/{sid_b2}/external-changes"),
        ]
    )
    for mark in ("test_only_on_b", sid_b, "only_on_b.py"):
        assert mark in b_told, mark

    # Machine A's agent hears of none of it: not in its bundle, its preview, its state,
    # the files changed behind it, the session `tma1 mcp` resolves for the cwd, nor the
    # session list.
    a_told = json.dumps(
        [
            a_started,
            get(a, f"/api/agent/sessions/{sid_a}/bundle"),
            get(a, f"/api/agent/sessions/{sid_a}/bundle", source="startup"),
            get(a, "/api/anomalies/preview", session_id=sid_a),
            get(a, f"/api/agent/sessions/{sid_a}/state"),
            get(a, f"/api/agent/sessions/{sid_a}/external-changes"),
            get(a, "/api/agent/resolve", cwd=str(project)),
            get(a, "/api/sessions"),
            get(a, "/api/anomalies"),
        ]
    )
    assert sid_a in a_told
    for mark in ("test_only_on_b", sid_b, sid_b2, "only_on_b.py", "machine-b"):
        assert mark not in a_told, mark
    assert get(a, "/api/agent/resolve", cwd=str(project))["session_id"] == sid_a
    r = call(a, "GET", f"/api/agent/sessions/{sid_b}/state")
    assert r.status_code == 404, r.text[:300]

    # The team scope: both machines' sessions, under one repository (each daemon records
    # a session's repository off the hook path: wait for the three rows).
    repo = "github.com/Acme/app"
    team = _wait_for(
        "the sessions' repositories",
        lambda: (
            [s for s in get(a, "/api/sessions", scope="team") if s["repo"] == repo][2:]
            and get(a, "/api/sessions", scope="team")
        ),
    )
    by_id = {s["session_id"]: s for s in team}
    assert {sid_a, sid_b, sid_b2} <= set(by_id)
    assert {by_id[s]["machine_id"] for s in (sid_a, sid_b, sid_b2)} == {"machine-a", "machine-b"}
    for s in (sid_a, sid_b, sid_b2):
        assert (by_id[s]["repo"], by_id[s]["repo_path"]) == (repo, ""), by_id[s]
    in_repo = get(a, "/api/sessions", scope="team", repo=repo)
    assert {s["session_id"] for s in in_repo} == {sid_a, sid_b, sid_b2}
    assert [(r["repo"], r["sessions"], r["machines"]) for r in get(a, "/api/repos")] == [
        (repo, 1, 1)
    ]
    assert [
        (r["repo"], r["sessions"], r["machines"]) for r in get(a, "/api/repos", scope="team")
    ] == [(repo, 3, 2)]
    only_b = get(a, "/api/sessions", scope="team", machine="machine-b")
    assert {s["session_id"] for s in only_b} == {sid_b, sid_b2}

    # The gates: one emit stored by each machine (as each daemon's store writes it); a
    # machine's gate counts its own, the team's counts both.
    now = int(time.time() * 1000)
    for mid, sid in (("machine-a", sid_a), ("machine-b", sid_b)):
        st = Store.open(team_db, migrate=False, machine_id=mid)
        try:
            st.insert_emits([_emit(sid, now)])
        finally:
            st.close()

    def emits_counted(server: ServeProcess, **params: Any) -> int:
        report = get(server, "/api/anomalies/budget", days=1, **params)
        return sum(int(k["total"]) for k in report["kinds"].values())

    assert emits_counted(a) == 1
    assert emits_counted(b) == 1
    assert emits_counted(a, scope="team") == 2

    def emits_followed(server: ServeProcess, **params: Any) -> int:
        report = get(server, "/api/anomalies/follow-rate", days=1, **params)
        return int(report["overall"]["emits"])

    assert (emits_followed(a), emits_followed(b), emits_followed(a, scope="team")) == (1, 1, 2)
    assert {e["session_id"] for e in get(a, "/api/anomalies")["emits"]} == {sid_a}
    team_emits = get(a, "/api/anomalies", scope="team")["emits"]
    assert {e["session_id"] for e in team_emits} == {sid_a, sid_b}


def _emit(session_id: str, ts: int) -> dict[str, Any]:
    return {
        "ts": ts,
        "session_id": session_id,
        "kind": "test_stuck",
        "severity": "warning",
        "channel": "post_tool_use",
        "evidence": "tests/test_x.py::test_x failed 3 times",
        "suggestion": "read the failure",
        "related_files": [],
        "first_emitted_at": ts,
        "stable_key": f"test_stuck:{session_id}",
    }
