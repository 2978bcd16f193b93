"""Attribution intervals (design §2.10) as pure logic, and the late claim against a real store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tma1.clock import ManualClock
from tma1.config import Settings
from tma1.counters import Counters
from tma1.events import FileChange, HookEvent, parse_payload
from tma1.sensors.attribution import OPEN_MAX_MS, SLACK_MS, Attribution
from tma1.sensors.baseline import git_blob_hash
from tma1.sensors.files import FileSensor
from tma1.store import Store

PROJ = "/work/proj"
FILE = "/work/proj/src/a.py"


def ev(ts: int, event: str, tool: str, sid: str = "S", **fields: Any) -> HookEvent:
    payload: dict[str, Any] = {
        "session_id": sid,
        "hook_event_name": event,
        "tool_name": tool,
        "cwd": PROJ,
        **fields,
    }
    e = parse_payload(payload, ts=ts)
    e.project = PROJ  # the directory does not exist here; events.py would say the same
    return e


def edit(
    ts: int, event: str, sid: str = "S", path: str = FILE, tid: str | None = "t1"
) -> HookEvent:
    extra = {"tool_use_id": tid} if tid else {}
    return ev(ts, event, "Edit", sid, tool_input={"file_path": path, "old_string": "a"}, **extra)


def bash(ts: int, event: str, sid: str = "S", tid: str = "b1") -> HookEvent:
    return ev(ts, event, "Bash", sid, tool_input={"command": "make fmt"}, tool_use_id=tid)


def test_write_interval_bounds() -> None:
    a = Attribution()
    a.note(edit(10_000, "PreToolUse"))
    a.note(edit(15_000, "PostToolUse"))
    assert a.explain(PROJ, FILE, 10_000) == "S"
    assert a.explain(PROJ, FILE, 9_999) is None  # no slack before the Pre
    assert a.explain(PROJ, FILE, 15_000 + SLACK_MS) == "S"
    assert a.explain(PROJ, FILE, 15_000 + SLACK_MS + 1) is None
    assert a.explain(PROJ, "/work/proj/src/b.py", 12_000) is None  # another path


def test_the_slack_ends_at_the_sessions_end_or_stop() -> None:
    # Claude Code's SessionEnd 100 ms after the Edit's Post; a save 1.2 s later (inside
    # the 2 s slack) is someone else's: the session had ended.
    for end in ("SessionEnd", "Stop"):
        a = Attribution()
        a.note(edit(10_000, "PreToolUse"))
        a.note(edit(10_500, "PostToolUse"))
        a.note(bash(10_550, "PreToolUse"))
        a.note(bash(10_600, "PostToolUse"))
        a.note(ev(10_700, end, ""))
        assert a.explain(PROJ, FILE, 10_700) == "S", end  # up to the end: still its own
        assert a.explain(PROJ, FILE, 10_700 + 1_200) is None, end
        assert a.explain(PROJ, "/work/proj/other.txt", 10_700 + 1_200) is None, end
    # A UserPromptSubmit ends no slack; a Stop long after the slack changes nothing.
    a = Attribution()
    a.note(edit(10_000, "PreToolUse"))
    a.note(edit(10_500, "PostToolUse"))
    a.note(ev(10_700, "UserPromptSubmit", ""))
    assert a.explain(PROJ, FILE, 10_700 + 1_200) == "S"
    a.note(ev(20_000, "Stop", ""))
    assert a.explain(PROJ, FILE, 10_700 + 1_200) == "S"
    # Another session's end does not cut this session's slack.
    a = Attribution()
    a.note(edit(10_000, "PreToolUse"))
    a.note(edit(10_500, "PostToolUse"))
    a.note(ev(10_700, "SessionEnd", "", sid="T"))
    assert a.explain(PROJ, FILE, 10_700 + 1_200) == "S"


def test_open_interval_lasts_ten_minutes_at_most() -> None:
    a = Attribution()
    a.note(edit(10_000, "PreToolUse"))
    assert a.explain(PROJ, FILE, 10_000 + OPEN_MAX_MS) == "S"
    assert a.explain(PROJ, FILE, 10_000 + OPEN_MAX_MS + 1) is None


def test_write_content_proves_a_change_stamped_before_the_pre() -> None:
    a = Attribution()
    content = "print('hi')\n"
    pre = ev(10_000, "PreToolUse", "Write", tool_input={"file_path": FILE, "content": content})
    a.note(pre)
    right = git_blob_hash(content.encode())
    assert a.explain(PROJ, FILE, 10_000 - SLACK_MS, right) == "S"
    assert a.explain(PROJ, FILE, 10_000 - SLACK_MS - 1, right) is None
    assert a.explain(PROJ, FILE, 9_000, git_blob_hash(b"other")) is None
    assert a.explain(PROJ, FILE, 9_000) is None


def test_shell_interval_covers_the_whole_project_only() -> None:
    a = Attribution()
    a.note(bash(20_000, "PreToolUse"))
    a.note(bash(30_000, "PostToolUseFailure"))
    assert a.explain(PROJ, "/work/proj/anything/at/all.txt", 25_000) == "S"
    assert a.explain("/elsewhere", "/elsewhere/x.txt", 25_000) is None
    assert a.explain(PROJ, FILE, 30_000 + SLACK_MS + 1) is None


def test_a_write_of_the_path_beats_a_shell_call_and_later_starts_win() -> None:
    a = Attribution()
    a.note(bash(10_000, "PreToolUse", sid="SHELL"))
    a.note(edit(11_000, "PreToolUse", sid="EDITOR", tid="e1"))
    assert a.explain(PROJ, FILE, 12_000) == "EDITOR"
    assert a.explain(PROJ, "/work/proj/other.txt", 12_000) == "SHELL"
    a.note(edit(11_500, "PreToolUse", sid="LATER", tid="e2"))
    assert a.explain(PROJ, FILE, 12_000) == "LATER"


def test_posts_pair_by_tool_use_id_or_oldest_open_call() -> None:
    a = Attribution()
    a.note(edit(1_000, "PreToolUse", tid="x"))
    a.note(edit(2_000, "PreToolUse", tid="y"))
    iv = a.note(edit(3_000, "PostToolUse", tid="y"))
    assert iv is not None and (iv.start, iv.end) == (2_000, 3_000)
    # Without ids (old Claude Code), a Post closes the oldest open call of the same kind.
    b = Attribution()
    b.note(edit(1_000, "PreToolUse", tid=None))
    b.note(edit(2_000, "PreToolUse", tid=None))
    first = b.note(edit(3_000, "PostToolUse", tid=None))
    assert first is not None and first.start == 1_000


def test_post_without_pre_uses_duration() -> None:
    a = Attribution()
    iv = a.note(ev(50_000, "PostToolUse", "Bash", tool_input={"command": "x"}, duration_ms=4_000))
    assert iv is not None and (iv.start, iv.end) == (46_000, 50_000)
    assert a.explain(PROJ, FILE, 46_000) == "S"
    assert a.explain(PROJ, FILE, 45_999) is None
    # Older versions send no duration: the call is taken to have begun up to 2 s before.
    b = Attribution()
    iv = b.note(ev(50_000, "PostToolUse", "Bash", tool_input={"command": "x"}))
    assert iv is not None and (iv.start, iv.end) == (50_000 - SLACK_MS, 50_000)


def test_non_writing_calls_open_nothing_and_prune_forgets() -> None:
    a = Attribution()
    assert a.note(ev(1_000, "PreToolUse", "Read", tool_input={"file_path": FILE})) is None
    assert a.note(ev(1_000, "UserPromptSubmit", "")) is None
    a.note(edit(1_000, "PreToolUse"))
    a.note(edit(2_000, "PostToolUse"))
    assert a.size() == 1
    a.prune(2_000 + SLACK_MS + 15 * 60_000 + 1)
    assert a.size() == 0


def _sensor(store: Store, tmp_path: Path, clock: ManualClock, touched: list[str]) -> FileSensor:
    return FileSensor(
        store=store,
        clock=clock,
        settings=Settings(data_dir=tmp_path / "data", watch_files=True),
        counters=Counters(),
        on_project_change=touched.append,
    )


def test_late_pre_claims_a_stored_change(store: Store, tmp_path: Path) -> None:
    """Pre stamped at receipt (before the write) but stored after the watcher stored the
    change: the change was unexplained when stored, and the Pre claims it."""
    clock = ManualClock(start_ms=100_000)
    touched: list[str] = []
    sensor = _sensor(store, tmp_path, clock, touched)
    sensor.store_changes(PROJ, [FileChange(ts=100_050, project=PROJ, path=FILE, change="modified")])
    other = "/work/proj/src/b.py"
    sensor.store_changes(
        PROJ, [FileChange(ts=100_060, project=PROJ, path=other, change="modified")]
    )
    assert [c.writer_session for c in store.project_changes(PROJ, 0)] == [None, None]
    touched.clear()
    sensor.on_event(edit(100_000, "PreToolUse", sid="LATE"))
    rows = {c.path: c.writer_session for c in store.project_changes(PROJ, 0)}
    assert rows == {FILE: "LATE", other: None}
    assert touched == [PROJ]
    # Claimed once: a later interval of another session does not steal it.
    sensor.on_event(edit(100_010, "PreToolUse", sid="THIEF", tid="t2"))
    assert {c.path: c.writer_session for c in store.project_changes(PROJ, 0)}[FILE] == "LATE"


def test_edit_pre_after_an_outside_change_does_not_claim_it(store: Store, tmp_path: Path) -> None:
    clock = ManualClock(start_ms=100_000)
    sensor = _sensor(store, tmp_path, clock, [])
    sensor.store_changes(PROJ, [FileChange(ts=100_000, project=PROJ, path=FILE, change="modified")])
    sensor.on_event(edit(100_500, "PreToolUse"))
    sensor.on_event(edit(100_900, "PostToolUse"))
    assert [c.writer_session for c in store.project_changes(PROJ, 0)] == [None]


def test_shell_pre_claims_a_change_anywhere_in_the_project(store: Store, tmp_path: Path) -> None:
    clock = ManualClock(start_ms=100_000)
    sensor = _sensor(store, tmp_path, clock, [])
    sensor.store_changes(
        PROJ, [FileChange(ts=100_200, project=PROJ, path="/work/proj/x.txt", change="added")]
    )
    sensor.on_event(bash(100_100, "PreToolUse", sid="SH"))
    assert [c.writer_session for c in store.project_changes(PROJ, 0)] == ["SH"]


def test_a_change_seen_late_is_attributed_by_its_write_time(store: Store, tmp_path: Path) -> None:
    """A long notify batch stamps the change well after the Post; the file's mtime (the
    write time) still falls inside the agent's interval."""
    clock = ManualClock(start_ms=200_000)
    sensor = _sensor(store, tmp_path, clock, [])
    sensor.on_event(edit(200_000, "PreToolUse", sid="AGENT"))
    sensor.on_event(edit(200_300, "PostToolUse", sid="AGENT"))
    seen = 200_300 + SLACK_MS + 1_500
    late = FileChange(ts=seen, project=PROJ, path=FILE, change="modified")
    other = FileChange(ts=seen, project=PROJ, path="/work/proj/src/b.py", change="modified")
    sensor.store_changes(PROJ, [late, other], {FILE: 200_200, other.path: 199_000})
    rows = {c.path: c.writer_session for c in store.project_changes(PROJ, 0)}
    assert rows == {FILE: "AGENT", other.path: None}
    # Without the hint the same change is nobody's.
    sensor.store_changes(PROJ, [late])
    assert [c.writer_session for c in store.project_changes(PROJ, 0) if c.path == FILE] == [
        "AGENT",
        None,
    ]


def test_turn_end_closes_calls_whose_post_never_came() -> None:
    a = Attribution()
    a.note(bash(10_000, "PreToolUse", sid="S", tid="lost"))
    a.note(bash(5_000, "PreToolUse", sid="OTHER", tid="running"))
    a.note(ev(20_000, "Stop", "", sid="S"))
    assert a.explain(PROJ, FILE, 20_000) == "S"
    # After S's turn ended (its Stop ends the slack too) only OTHER's call can still be
    # writing.
    assert a.explain(PROJ, FILE, 20_000 + 1) == "OTHER"
    assert a.explain(PROJ, FILE, 20_000 + SLACK_MS) == "OTHER"
    a.note(ev(30_000, "UserPromptSubmit", "", sid="OTHER"))
    assert a.explain(PROJ, FILE, 33_000) is None


def test_pre_noted_while_its_change_is_being_inserted(store: Store, tmp_path: Path) -> None:
    """The interleaving that slips between explain and remember: the Pre is noted (and
    finds nothing to claim) while the watcher thread is inserting the change."""
    clock = ManualClock(start_ms=300_000)
    sensor = _sensor(store, tmp_path, clock, [])
    real_insert = store.insert_changes

    def insert_then_hook(changes: list[FileChange]) -> list[int]:
        ids = real_insert(changes)
        sensor.on_event(edit(299_990, "PreToolUse", sid="MID"))  # the hook thread, meanwhile
        return ids

    store.insert_changes = insert_then_hook  # type: ignore[method-assign]
    try:
        sensor.store_changes(
            PROJ, [FileChange(ts=300_000, project=PROJ, path=FILE, change="modified")]
        )
    finally:
        store.insert_changes = real_insert  # type: ignore[method-assign]
    assert [c.writer_session for c in store.project_changes(PROJ, 0)] == ["MID"]
