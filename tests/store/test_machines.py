"""Rows per machine (issue 30): a store reads only its machine's rows; its team view reads
every machine's; rows of no known machine (from before migration 0005) are this
machine's on SQLite only."""

from __future__ import annotations

import pytest
from gateseed import emit_row
from sqlalchemy import select, text

from tma1.events import FileChange, Usage, parse_payload
from tma1.store import Store
from tma1.store.emits import ForeignEmit, list_emits, set_label
from tma1.store.schema import hook_events
from tma1.store.sessions import changes_behind, list_sessions


def _event(sid: str, ts: int, cwd: str = "/workspaces/app") -> object:
    return parse_payload(
        {"session_id": sid, "hook_event_name": "UserPromptSubmit", "cwd": cwd, "prompt": "p"},
        ts=ts,
    )


def test_each_machine_reads_its_own_rows(db_url: str) -> None:
    a = Store.open(db_url, machine_id="m-a")
    b = Store.open(db_url, migrate=False, machine_id="m-b")
    try:
        a.insert_events([_event("sa", 1_000)])  # type: ignore[list-item]
        b.insert_events([_event("sb", 1_001)])  # type: ignore[list-item]
        b.insert_changes([FileChange(1_002, "/workspaces/app", "/workspaces/app/x", "added")])
        b.insert_usages([Usage(1_003, "sb", occupancy=5)])
        project = "/workspaces/app"
        assert [s for s, *_ in a.project_activity(project, 0, 10_000)] == ["sa"]
        assert a.project_changes(project, 0) == []
        assert len(b.project_changes(project, 0)) == 1
        assert changes_behind(a, project, 0, "sa", limit=5)[0] == 0
        assert a.latest_usage("sb") is None and b.latest_usage("sb") is not None
        assert a.window_events("sb", 0) == [] and a.session_events("sb", 0) == []
        assert [e.session_id for e in b.window_events("sb", 0)] == ["sb"]
        assert {s["session_id"] for s in list_sessions(a)} == {"sa"}
        team = {s["session_id"]: s["machine_id"] for s in list_sessions(a.team())}
        assert team == {"sa": "m-a", "sb": "m-b"}
        assert a.team() is a.team()
    finally:
        a.close()
        b.close()


def test_a_scratch_script_another_machine_wrote_is_not_this_ones(db_url: str) -> None:
    """The bundle leaves a session's scratch scripts (written with Write) out of the
    project's checks: what another machine's agent wrote in its tree says nothing here."""
    a = Store.open(db_url, machine_id="m-a")
    b = Store.open(db_url, migrate=False, machine_id="m-b")
    write = {
        "session_id": "sb",
        "hook_event_name": "PostToolUse",
        "cwd": "/workspaces/app",
        "tool_name": "Write",
        "tool_input": {"file_path": "/workspaces/app/test-x.js", "content": "x"},
        "tool_response": {"type": "create"},
    }
    try:
        b.insert_events([parse_payload(write, ts=1_000)])
        assert [e.session_id for e in b.project_file_creations("/workspaces/app", 0, 9_999)] == [
            "sb"
        ]
        assert a.project_file_creations("/workspaces/app", 0, 9_999) == []
    finally:
        a.close()
        b.close()


def test_rows_of_no_known_machine_are_local_on_sqlite_only(db_url: str) -> None:
    legacy = Store.open(db_url)  # a store of no machine writes NULL, as before 0005
    mine = Store.open(db_url, migrate=False, machine_id="m-a")
    try:
        legacy.insert_events([_event("old", 1_000)])  # type: ignore[list-item]
        with legacy.connect() as conn:
            assert conn.execute(select(hook_events.c.machine_id)).scalar_one() is None
        seen = [s for s, *_ in mine.project_activity("/workspaces/app", 0, 10_000)]
        assert seen == (["old"] if mine.dialect == "sqlite" else [])
        assert [s["session_id"] for s in list_sessions(mine.team())] == ["old"]
    finally:
        legacy.close()
        mine.close()


def test_attribution_never_claims_another_machines_change(db_url: str) -> None:
    a = Store.open(db_url, machine_id="m-a")
    b = Store.open(db_url, migrate=False, machine_id="m-b")
    try:
        [cid] = b.insert_changes([FileChange(5, "/workspaces/app", "/workspaces/app/y", "added")])
        assert a.set_change_writer([cid], "sa") == 0
        assert b.set_change_writer([cid], "sb") == 1
        assert [c.writer_session for c in b.project_changes("/workspaces/app", 0)] == ["sb"]
    finally:
        a.close()
        b.close()


@pytest.mark.empty_database
def test_the_upgrade_leaves_old_rows_of_no_known_machine(db_url: str) -> None:
    """Several machines upgrade a team database: none of them may claim its old rows."""
    from alembic import command
    from alembic.config import Config

    from tma1.store.connection import _MIGRATIONS, make_engine

    engine = make_engine(db_url)
    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0004")
        conn.execute(
            text(
                "INSERT INTO tma1_hook_events (ts, session_id, event_type, hook_event_name, "
                "agent_source, project) VALUES (1, 'old', 'UserPromptSubmit', "
                "'UserPromptSubmit', 'claude-code', '/workspaces/app')"
            )
        )
    engine.dispose()
    store = Store.open(db_url, machine_id="m-a")  # migrates to head
    try:
        with store.connect() as conn:
            assert conn.execute(select(hook_events.c.machine_id)).all() == [(None,)]
        assert "tma1_session_repos" in store.table_names()
    finally:
        store.close()


def test_labels_are_written_on_the_emits_machine_only(db_url: str) -> None:
    a = Store.open(db_url, machine_id="m-a")
    b = Store.open(db_url, migrate=False, machine_id="m-b")
    legacy = Store.open(db_url, migrate=False)  # NULL, as before migration 0005
    try:
        b.insert_emits([emit_row(ts=1_000, session_id="sb", kind="test_stuck")])
        legacy.insert_emits([emit_row(ts=1_001, session_id="old", kind="test_stuck")])
        ids = {e["session_id"]: e["id"] for e in list_emits(legacy, limit=5)}
        with pytest.raises(ForeignEmit, match="stored by machine m-b, not this one"):
            set_label(a, ids["sb"], "tp", now_ms=2_000)
        with pytest.raises(ForeignEmit):
            set_label(a, ids["sb"], "clear", now_ms=2_000)
        assert set_label(b, ids["sb"], "tp", now_ms=2_000) is not None
        # A row of no known machine is this machine's on SQLite only (one machine's file).
        if a.dialect == "sqlite":
            assert set_label(a, ids["old"], "fp", now_ms=2_000) is not None
        else:
            with pytest.raises(ForeignEmit, match="no known machine"):
                set_label(a, ids["old"], "fp", now_ms=2_000)
        assert set_label(a, 999_999, "tp", now_ms=2_000) is None
    finally:
        for st in (a, b, legacy):
            st.close()


def test_two_machines_sessions_with_one_id_are_two_in_the_team_view(db_url: str) -> None:
    """Two machines' agents can report one session id:
    on a team database (PostgreSQL) the team view lists them apart, each with its own
    counts; a SQLite file is one machine's and keys sessions by id alone."""
    a = Store.open(db_url, machine_id="m-a")
    b = Store.open(db_url, migrate=False, machine_id="m-b")
    try:
        a.insert_events([_event("same", 1_000)])  # type: ignore[list-item]
        b.insert_events([_event("same", 2_000), _event("same", 3_000)])  # type: ignore[list-item]
        b.insert_emits([emit_row(ts=3_000, session_id="same", kind="test_stuck")])
        team = list_sessions(a.team())
        if a.dialect == "postgresql":
            got = {(s["machine_id"], s["start_ts"], s["last_ts"], s["anomalies"]) for s in team}
            assert got == {("m-a", 1_000, 1_000, 0), ("m-b", 2_000, 3_000, 1)}
            assert [s["machine_id"] for s in team] == ["m-b", "m-a"]  # newest first
        else:
            assert [(s["session_id"], s["start_ts"], s["last_ts"]) for s in team] == [
                ("same", 1_000, 3_000)
            ]
        # One machine's view of the team database: that machine's session alone.
        mine = list_sessions(a.team().of_machine("m-b"))
        assert [(s["start_ts"], s["anomalies"]) for s in mine] == [(2_000, 1)]
        assert [(s["start_ts"], s["anomalies"]) for s in list_sessions(a)] == [(1_000, 0)]
    finally:
        a.close()
        b.close()
