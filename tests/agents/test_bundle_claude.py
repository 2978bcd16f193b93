"""The session bundle on the real Claude Code binary (pinned in versions.json), driven by
the fake model, watched by a real `tma1 serve` through the hooks a real `tma1 install`
wrote: what reaches the model's first request after `--resume`, in a new session of a
project another session broke, and across a real `/compact`."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest
from agentkit import Rig, model, rig
from fakemodel import Body, FakeModel, Reply, Text, Tool

pytestmark = [pytest.mark.slow, pytest.mark.agents]
__all__ = ["model", "rig"]  # the fixtures

AGENT = "claude-code"
BUILD = Tool("Bash", {"command": "./build.sh", "description": "build"})


def _ready(rig: Rig) -> None:
    rig.install(AGENT)
    rig.serve()


def _session_id(stdout: str) -> str:
    results = []
    for line in stdout.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict) and msg.get("type") == "result":
            results.append(msg)
    assert results, f"no result message in Claude Code's stream:\n{stdout[-2000:]}"
    return str(results[-1]["session_id"])


def _emits(rig: Rig, session_id: str) -> list[dict[str, Any]]:
    con = sqlite3.connect(f"file:{rig.data_dir / 'tma1.db'}?mode=ro", uri=True, timeout=10)
    con.row_factory = sqlite3.Row
    try:
        rows = con.execute(
            "SELECT * FROM tma1_anomaly_emits WHERE session_id = ? ORDER BY id", (session_id,)
        )
        return [dict(r) for r in rows]
    finally:
        con.close()


def _break_the_build(rig: Rig, model: FakeModel, runs: int = 3) -> str:
    """A session edits src/app.py, runs ./build.sh (which fails) `runs` times and stops
    (tma1 may block the first Stop; the second Text ends the turn)."""
    app = str(rig.project / "src" / "app.py")
    model.script = [
        Tool("Edit", {"file_path": app, "old_string": "return 1", "new_string": "return 2"}),
        *[BUILD] * runs,
        Text("I am stopping here."),
        Text("Stopping anyway."),
    ]
    run = rig.claude(model.url, "make the build pass")
    assert run.returncode == 0, run.stderr[-2000:]
    return _session_id(run.stdout)


def test_a_resumed_session_with_a_failing_check_gets_the_bundle_in_its_first_request(
    rig: Rig, model: FakeModel
) -> None:
    _ready(rig)
    sid = _break_the_build(rig, model)
    before = len(model.main_requests())

    model.script = [Text("Resuming."), Text("Stopping.")]
    run = rig.claude(model.url, "carry on", "--resume", sid)
    assert run.returncode == 0, run.stderr[-2000:]
    assert _session_id(run.stdout) == sid

    first = model.main_requests()[before].conversation
    assert "tma1 (session resume): what this session should know." in first
    assert "Still unresolved in this session:" in first
    assert "repeated_failed_build" in first and "./build.sh" in first
    assert "src/app.py:3: error" in first
    # Carried as SessionStart additional context (hookSpecificOutput), not as a prompt.
    assert "SessionStart hook additional context" in first

    rows = [r for r in _emits(rig, sid) if r["channel"] == "session_start"]
    assert {r["kind"] for r in rows} >= {"repeated_failed_build"}


def test_a_session_started_in_a_project_another_session_broke_is_told_so(
    rig: Rig, model: FakeModel
) -> None:
    _ready(rig)
    breaker = _break_the_build(rig, model, runs=1)
    before = len(model.main_requests())

    model.script = [Text("Hello.")]
    run = rig.claude(model.url, "what is the state of the build?")
    assert run.returncode == 0, run.stderr[-2000:]
    newcomer = _session_id(run.stdout)
    assert newcomer != breaker

    first = model.main_requests()[before].conversation
    assert "tma1 (session startup): what this session should know." in first
    assert "Checks failing in this project" in first
    # It never passed here: the breaker ran it last, it did not break it (design §2.21).
    assert f"(last run in session {breaker[:8]} (claude-code); 1 failing run)" in first
    assert "Still unresolved" not in first  # the newcomer has no findings of its own
    assert _emits(rig, newcomer) == []  # project state is told, not emitted


def _summary(body: Body) -> Reply:
    return Text("<analysis>a</analysis>\n<summary>The agent edited src/app.py.</summary>")


def test_compact_keeps_the_open_check_in_the_summary_and_retells_it_after(
    rig: Rig, model: FakeModel
) -> None:
    _ready(rig)
    sid = _break_the_build(rig, model)
    before = len(model.main_requests())

    # `/compact`: Claude Code runs the PreCompact hook, asks the model for a summary,
    # then fires SessionStart with source "compact".
    model.script = [_summary, _summary]
    run = rig.claude(model.url, "/compact", "--resume", sid)
    assert run.returncode == 0, run.stderr[-2000:]
    asked = [r.text for r in model.main_requests()[before:]]
    assert asked, "no summary request"
    # tma1's PreCompact answer reached the summariser as "Additional Instructions".
    assert "Additional Instructions:\\ntma1, which monitors this session" in asked[0]
    assert "./build.sh" in asked[0].split("Additional Instructions:")[1]

    events = [e for e in rig.events() if e["session_id"] == sid]
    sources = [
        e["metadata"].get("source") for e in events if e["hook_event_name"] == "SessionStart"
    ]
    assert sources[-1] == "compact"
    compact_ts = max(e["ts"] for e in events if e["metadata"].get("source") == "compact")
    retold = [r for r in _emits(rig, sid) if r["channel"] == "session_start"]
    assert any(r["ts"] >= compact_ts for r in retold), retold  # told again in the new epoch

    # The compact bundle is part of the compacted conversation: the next resume carries it
    # in its first request, and (same context epoch) tma1 re-tells nothing at that resume.
    # (Claude Code keeps the newest rounds verbatim after a compaction, so the resume bundle
    # of the `/compact` run itself is still there too: once.)
    before = len(model.main_requests())
    model.script = [Text("Carrying on."), Text("Stopping.")]
    run = rig.claude(model.url, "carry on", "--resume", sid)
    assert run.returncode == 0, run.stderr[-2000:]
    first = model.main_requests()[before].conversation
    assert first.count("tma1 (session compact): what this session should know.") == 1
    assert "repeated_failed_build" in first.split("tma1 (session compact)")[1]
    assert first.count("tma1 (session resume)") == 1
    last_start = max(
        e["ts"]
        for e in rig.events()
        if e["session_id"] == sid and e["hook_event_name"] == "SessionStart"
    )
    assert last_start > compact_ts
    assert all(r["ts"] < last_start for r in _emits(rig, sid) if r["channel"] == "session_start")
