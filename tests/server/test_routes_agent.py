"""`/api/agent/*`: session resolution, session state, external changes — on a live server
with real SQLite and PostgreSQL, seeded through the hook path like a real agent."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import LiveServer
from mcpkit import event, make_project, post

from tma1.clock import MINUTE_MS
from tma1.events import FileChange, Usage
from tma1.server.routes_agent import ancestors, parse_time


def test_ancestors_are_the_only_projects_that_can_contain_a_path() -> None:
    assert ancestors("/a/b/c") == ["/a/b/c", "/a/b", "/a", "/"]
    assert ancestors("/a/b/") == ["/a/b", "/a", "/"]
    assert ancestors("/") == ["/"]


def test_parse_time_accepts_ms_seconds_and_iso() -> None:
    assert parse_time("1700000000000") == 1_700_000_000_000
    assert parse_time("1700000000") == 1_700_000_000_000
    assert parse_time("2023-11-14T22:13:20Z") == 1_700_000_000_000
    assert parse_time("2023-11-14T23:13:20+01:00") == 1_700_000_000_000
    for bad in ("yesterday", "2023-11-14T22:13:20"):
        with pytest.raises(ValueError):
            parse_time(bad)


def test_resolve_picks_the_newest_session_whose_project_contains_cwd(
    live: LiveServer, tmp_path: Path
) -> None:
    proj = make_project(tmp_path / "proj")
    other = make_project(tmp_path / "other")
    nested = make_project(proj / "vendor" / "lib")  # a repository inside the repository
    post(live, event("old", proj, "SessionStart", source="startup"))
    post(live, event("new", proj / "src", "SessionStart", source="startup"))
    post(live, event("elsewhere", other, "SessionStart", source="startup"))
    post(live, event("inner", nested, "SessionStart", source="startup"))
    post(live, event("old", proj, "UserPromptSubmit", prompt="hi"))  # `old` is active again
    c = live.client()

    r = c.get("/api/agent/resolve", params={"cwd": str(proj / "src" / "deep")})
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["session_id"], body["project"]) == ("old", str(proj))
    assert [o["session_id"] for o in body["others"]] == ["new"]
    # Inside the nested repository both projects contain cwd; the newest session wins.
    assert c.get("/api/agent/resolve", params={"cwd": str(nested)}).json()["session_id"] == "old"
    assert c.get("/api/agent/resolve", params={"cwd": str(other)}).json()["session_id"] == (
        "elsewhere"
    )
    # A sibling whose name merely starts with the project's is not inside it.
    r = c.get("/api/agent/resolve", params={"cwd": str(tmp_path / "proj-2")})
    assert r.status_code == 404 and "tma1 install" in r.json()["detail"]
    assert c.get("/api/agent/resolve", params={"cwd": "relative/dir"}).status_code == 422


def test_resolve_follows_a_symlinked_checkout(live: LiveServer, tmp_path: Path) -> None:
    proj = make_project(tmp_path / "real")
    link = tmp_path / "link"
    os.symlink(proj, link)
    post(live, event("s1", proj, "SessionStart", source="startup"))
    r = live.client().get("/api/agent/resolve", params={"cwd": str(link / "src")})
    assert r.status_code == 200 and r.json()["session_id"] == "s1"


def test_session_state_counts_tools_failures_edits_and_context(
    live: LiveServer, tmp_path: Path
) -> None:
    proj = make_project(tmp_path / "proj")
    a, b = str(proj / "src" / "a.py"), str(proj / "src" / "b.py")
    post(live, event("s1", proj, "SessionStart", source="startup"))

    def call(tool: str, tool_input: dict[str, object], **result: object) -> None:
        post(live, event("s1", proj, "PreToolUse", tool_name=tool, tool_input=tool_input))
        name = "PostToolUseFailure" if "error" in result else "PostToolUse"
        post(live, event("s1", proj, name, tool_name=tool, tool_input=tool_input, **result))

    call("Bash", {"command": "make"}, error="Exit code 2\nmake: *** [all] Error 1")  # old
    live.service.clock.advance(40 * MINUTE_MS)  # type: ignore[attr-defined]
    call("Edit", {"file_path": a, "old_string": "x", "new_string": "y"}, tool_response={})
    call("Write", {"file_path": b, "content": "z"}, tool_response={})
    call("Edit", {"file_path": a, "old_string": "y", "new_string": "w"}, tool_response={})
    call("Read", {"file_path": a}, tool_response={"file": {"content": "w"}})
    call("Bash", {"command": "pytest -q"}, error="Exit code 1\nFAILED tests/t.py::test_x")
    call(  # a masked failure: the pipeline exited 0
        "Bash",
        {"command": "pytest -q 2>&1 | tail -3"},
        tool_response={"stdout": "FAILED tests/t.py::test_x - assert 0\n1 failed", "stderr": ""},
    )
    now = live.service.clock.now_ms()
    live.store.insert_usages(
        [
            Usage(ts=now - 5_000, session_id="s1", occupancy=70_000),
            Usage(ts=now, session_id="s1", occupancy=45_000, model="claude-x"),
        ]
    )

    r = live.client().get("/api/agent/sessions/s1/state")
    assert r.status_code == 200, r.text
    s = r.json()
    assert s["project"] == str(proj) and s["agent_source"] == "claude-code"
    assert s["tool_calls"]["by_tool"] == {
        "Bash": {"calls": 3, "failures": 3},
        "Edit": {"calls": 2, "failures": 0},
        "Read": {"calls": 1, "failures": 0},
        "Write": {"calls": 1, "failures": 0},
    }
    assert (s["tool_calls"]["total"], s["tool_calls"]["failures"]) == (7, 3)
    recent = s["failures_last_30_min"]
    assert recent["count"] == 2  # the `make` failure is 40 minutes old
    assert [f["command"] for f in recent["newest"]] == ["pytest -q 2>&1 | tail -3", "pytest -q"]
    assert [f["failure_kind"] for f in recent["newest"]] == ["masked", "exit"]
    assert recent["newest"][1]["test_ids"] == ["tests/t.py::test_x"]
    assert [(e["path"], e["edits"]) for e in s["recent_edits"]] == [(a, 2), (b, 1)]
    assert s["context"] == {
        "occupancy": 45_000,  # the newest request, not the largest
        "threshold": 100_000,
        "ratio": 0.45,
        "over_threshold": False,
        "measured_at": now,
        "model": "claude-x",
    }
    assert live.client().get("/api/agent/sessions/nope/state").status_code == 404


def test_external_changes_are_the_ones_this_session_did_not_make(
    live: LiveServer, tmp_path: Path
) -> None:
    proj = make_project(tmp_path / "proj")
    other = make_project(tmp_path / "other")
    post(live, event("s1", proj, "SessionStart", source="startup"))
    start = live.service.clock.now_ms()
    f = str(proj / "src" / "main.py")

    def change(ts: int, writer: str | None, project: Path = proj, path: str = f) -> None:
        live.store.insert_change(
            FileChange(
                ts=ts, project=str(project), path=path, change="modified", writer_session=writer
            )
        )

    change(start - 60_000, None)  # before the session started
    change(start + 1_000, "s1")  # our own write
    change(start + 2_000, "s2")  # another agent on this repository
    change(start + 3_000, None)  # an editor, git, a person
    change(start + 4_000, None, project=other, path=str(other / "x.py"))  # another project
    live.service.clock.advance(10_000)  # type: ignore[attr-defined]
    c = live.client()

    body = c.get("/api/agent/sessions/s1/external-changes").json()
    assert body["since"] == start and body["project"] == str(proj)
    assert [(x["ts"], x["changed_by"]) for x in body["changes"]] == [
        (start + 3_000, None),
        (start + 2_000, "s2"),
    ]
    assert (body["total"], body["truncated"]) == (2, False)

    iso = datetime.fromtimestamp((start + 2_500) / 1000, UTC).isoformat()
    later = c.get("/api/agent/sessions/s1/external-changes", params={"since": iso}).json()
    assert [x["ts"] for x in later["changes"]] == [start + 3_000]
    earlier = c.get(
        "/api/agent/sessions/s1/external-changes", params={"since": str(start - 120_000)}
    ).json()
    assert earlier["total"] == 3
    bad = c.get("/api/agent/sessions/s1/external-changes", params={"since": "soon"})
    assert bad.status_code == 422 and "since" in bad.json()["detail"]
    assert c.get("/api/agent/sessions/nope/external-changes").status_code == 404


def test_agent_routes_refuse_foreign_origins(live: LiveServer) -> None:
    r = live.client().get(
        "/api/agent/resolve", params={"cwd": "/x"}, headers={"Origin": "https://evil.example"}
    )
    assert r.status_code == 403


def test_hostile_input_is_a_422_not_a_500(live: LiveServer, tmp_path: Path) -> None:
    proj = make_project(tmp_path / "proj")
    post(live, event("s1", proj, "SessionStart", source="startup"))
    c = live.client()
    assert c.get("/api/agent/resolve", params={"cwd": "/tmp/\x00x"}).status_code == 422
    assert c.get("/api/agent/resolve", params={"cwd": "/a" * 300}).status_code == 422
    assert c.get("/api/agent/resolve", params={"cwd": "/a" * 256}).status_code == 404
    assert c.get("/api/agent/sessions/a%00b/state").status_code == 422
    assert c.get("/api/agent/sessions/a%00b/external-changes").status_code == 422
    assert c.get(f"/api/agent/sessions/{'x' * 201}/state").status_code == 422
    for since in ("99999999999999999999999", "-5", "\x00", "2023-13-40T00:00:00Z"):
        r = c.get("/api/agent/sessions/s1/external-changes", params={"since": since})
        assert r.status_code == 422, (since, r.text)
    # The longest plausible values still work.
    r = c.get("/api/agent/sessions/s1/external-changes", params={"since": "9999999999999999"})
    assert r.status_code == 200 and r.json()["changes"] == []
