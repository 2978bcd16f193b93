"""The file watcher end to end: a real temporary git repository, real writes on disk, a live
tma1 server (real uvicorn, SQLite and PostgreSQL) with the watcher on and a real clock.

Every wait polls the store with a deadline; nothing asserts how fast it happened.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import LiveServer, start_live_server

from tma1.clock import SystemClock
from tma1.config import Settings
from tma1.events import FileChange
from tma1.sensors.files import FileSensor, ProjectWatch
from tma1.store import Store

DEADLINE_S = 20.0


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        check=True,
        capture_output=True,
    )


def make_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q")
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('app')\n")
    (root / "src" / "util.py").write_text("X = 1\n")
    (root / "README.md").write_text("# demo\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def wlive(tmp_path: Path, db_url: str) -> Iterator[LiveServer]:
    settings = Settings(data_dir=tmp_path / "data", database_url=db_url, watch_files=True)
    srv = start_live_server(settings, clock=SystemClock())
    yield srv
    srv.stop()


def wait_for(probe: Callable[[], Any], what: str, deadline_s: float = DEADLINE_S) -> Any:
    end = time.monotonic() + deadline_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def changes(srv: LiveServer, project: Path) -> list[FileChange]:
    return srv.store.project_changes(str(project), 0)


class Agent:
    """One simulated agent session: hooks around real writes, like Claude Code sends them."""

    def __init__(self, srv: LiveServer, repo: Path, name: str) -> None:
        self.srv = srv
        self.repo = repo
        self.sid = f"{name}-{uuid.uuid4().hex[:8]}"

    def send(self, event: str, **fields: Any) -> str:
        payload = {"session_id": self.sid, "hook_event_name": event, "cwd": str(self.repo)}
        payload.update(fields)
        r = self.srv.hook(payload)
        assert r.status_code == 200
        return r.text

    def prompt(self, text: str = "go on") -> str:
        return self.send("UserPromptSubmit", prompt=text)

    def start(self) -> None:
        self.prompt("start")
        assert self.srv.service.sensors.files.wait_ready(str(self.repo), DEADLINE_S)

    def read(self, path: Path) -> None:
        tid = uuid.uuid4().hex
        inp = {"file_path": str(path)}
        self.send("PreToolUse", tool_name="Read", tool_input=inp, tool_use_id=tid)
        self.send(
            "PostToolUse",
            tool_name="Read",
            tool_input=inp,
            tool_use_id=tid,
            tool_response={"file": {"filePath": str(path), "content": path.read_text()}},
        )

    def edit(self, path: Path, new_text: str, tool: str = "Edit") -> None:
        tid = uuid.uuid4().hex
        inp = {"file_path": str(path), "old_string": "", "new_string": new_text}
        self.send("PreToolUse", tool_name=tool, tool_input=inp, tool_use_id=tid)
        path.write_text(new_text)
        self.send(
            "PostToolUse",
            tool_name=tool,
            tool_input=inp,
            tool_use_id=tid,
            tool_response={"filePath": str(path), "success": True},
        )

    def bash(self, command: str, run: Callable[[], None]) -> None:
        tid = uuid.uuid4().hex
        inp = {"command": command}
        self.send("PreToolUse", tool_name="Bash", tool_input=inp, tool_use_id=tid)
        run()
        self.send(
            "PostToolUse",
            tool_name="Bash",
            tool_input=inp,
            tool_use_id=tid,
            tool_response={"stdout": "", "stderr": "", "interrupted": False},
        )

    def emitted(self) -> list[dict[str, Any]]:
        delivery = self.srv.service.delivery
        flush = getattr(delivery, "flush", None)
        if callable(flush):
            flush()
        return [e for e in self.srv.store.emits_since(0) if e["session_id"] == self.sid]

    def kinds(self) -> set[str]:
        return {e["kind"] for e in self.emitted()}


def row_of(srv: LiveServer, repo: Path, path: Path, **match: Any) -> FileChange | None:
    for c in reversed(changes(srv, repo)):
        if c.path == str(path) and all(getattr(c, k) == v for k, v in match.items()):
            return c
    return None


# --- acceptance scenarios ----------------------------------------------------------------


def test_agent_edit_is_attributed_and_fires_nothing(wlive: LiveServer, repo: Path) -> None:
    agent = Agent(wlive, repo, "edit")
    agent.start()
    target = repo / "src" / "app.py"
    agent.read(target)
    agent.edit(target, "print('edited by the agent')\n")
    size = len("print('edited by the agent')\n")
    # Wait for the complete content (a busy machine may show the truncation first).
    row = wait_for(lambda: row_of(wlive, repo, target, size=size), "the agent's change")
    assert row.writer_session == agent.sid
    assert row.change == "modified"
    # git's blob id of the new content: the same hash `git hash-object` prints.
    expected = subprocess.run(
        ["git", "hash-object", str(target)], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert row.content_hash == expected
    # A new file written by the agent is "added", and attributed too.
    created = repo / "src" / "new_mod.py"
    agent.edit(created, "Y = 2\n", tool="Write")
    added = wait_for(lambda: row_of(wlive, repo, created), "the agent's new file")
    assert (added.change, added.writer_session) == ("added", agent.sid)
    assert agent.prompt() == ""
    assert agent.kinds() == set()


def test_outside_write_after_read_then_edit_is_stale_view(wlive: LiveServer, repo: Path) -> None:
    agent = Agent(wlive, repo, "stale")
    agent.start()
    target = repo / "src" / "util.py"
    agent.read(target)
    target.write_text("X = 'changed by a human'\n")  # no hooks: someone else
    row = wait_for(lambda: row_of(wlive, repo, target), "the outside change")
    assert row.writer_session is None
    agent.edit(target, "X = 3\n")  # no re-read in between
    wait_for(lambda: row_of(wlive, repo, target, writer_session=agent.sid), "the agent's edit")
    body = agent.prompt()
    assert "stale_file_view" in agent.kinds()
    assert "util.py" in body
    stale = [e for e in agent.emitted() if e["kind"] == "stale_file_view"]
    assert str(target) in stale[0]["related_files"]


def test_outside_write_anywhere_is_external_modified(wlive: LiveServer, repo: Path) -> None:
    agent = Agent(wlive, repo, "ext")
    agent.start()
    assert agent.prompt() == ""
    other = repo / "docs" / "notes.md"
    other.parent.mkdir()
    other.write_text("written by a human\n")
    row = wait_for(lambda: row_of(wlive, repo, other), "the outside change")
    assert (row.change, row.writer_session) == ("added", None)
    body = agent.prompt()
    assert "external_modified_during_session" in agent.kinds()
    assert "notes.md" in body


def test_two_sessions_see_each_others_writes(wlive: LiveServer, repo: Path) -> None:
    one = Agent(wlive, repo, "one")
    two = Agent(wlive, repo, "two")
    one.start()
    two.start()
    f1, f2 = repo / "src" / "app.py", repo / "src" / "util.py"
    one.edit(f1, "print('one')\n")
    two.edit(f2, "X = 'two'\n")
    r1 = wait_for(lambda: row_of(wlive, repo, f1), "session one's write")
    r2 = wait_for(lambda: row_of(wlive, repo, f2), "session two's write")
    assert (r1.writer_session, r2.writer_session) == (one.sid, two.sid)
    one.prompt()
    two.prompt()
    ext1 = [e for e in one.emitted() if e["kind"] == "external_modified_during_session"]
    ext2 = [e for e in two.emitted() if e["kind"] == "external_modified_during_session"]
    assert ext1 and ext2
    assert str(f2) in ext1[0]["related_files"] and str(f1) not in ext1[0]["related_files"]
    assert str(f1) in ext2[0]["related_files"] and str(f2) not in ext2[0]["related_files"]


def test_formatter_inside_bash_is_attributed_to_that_session(wlive: LiveServer, repo: Path) -> None:
    agent = Agent(wlive, repo, "fmt")
    agent.start()
    formatter = (
        "import pathlib, sys\n"
        "for p in pathlib.Path(sys.argv[1]).rglob('*.py'):\n"
        "    p.write_text(p.read_text().replace(\"'\", '\"'))\n"
    )

    def run() -> None:
        subprocess.run([sys.executable, "-c", formatter, str(repo / "src")], check=True)

    agent.bash("ruff format src", run)
    app, util = repo / "src" / "app.py", repo / "src" / "util.py"
    r_app = wait_for(lambda: row_of(wlive, repo, app), "the formatted app.py")
    assert r_app.writer_session == agent.sid
    assert row_of(wlive, repo, util) is None  # util.py had no quote: unchanged content
    assert agent.prompt() == ""
    assert agent.kinds() == set()


def test_ignored_touched_and_swap_files_fire_nothing(wlive: LiveServer, repo: Path) -> None:
    agent = Agent(wlive, repo, "quiet")
    agent.start()
    (repo / "build").mkdir()
    (repo / "build" / "out.o").write_bytes(b"\x7fELF")
    (repo / "run.log").write_text("log line\n")
    (repo / "src" / "deep").mkdir()
    agent.edit(repo / "src" / "deep" / ".gitignore", "cache.bin\n", tool="Write")
    (repo / "src" / "deep" / "cache.bin").write_bytes(b"xx")
    (repo / ".git" / "info" / "exclude").write_text("scratch.txt\n")
    time.sleep(0.3)  # let notify see the exclude change before the file it excludes
    (repo / "scratch.txt").write_text("mine\n")
    app = repo / "src" / "app.py"
    os.utime(app)  # touch: same content, new mtime
    app.write_text(app.read_text())  # a no-op save
    for swap in (".app.py.swp", "app.py~", "4913", ".#app.py"):
        (repo / "src" / swap).write_text("swap")
    (repo / "src" / ".app.py.swp").unlink()
    # A barrier: the agent's own write, stored after everything above was processed.
    sentinel = repo / "src" / "sentinel.py"
    agent.edit(sentinel, "S = 1\n", tool="Write")
    wait_for(lambda: row_of(wlive, repo, sentinel), "the sentinel")
    paths = sorted(c.path for c in changes(wlive, repo))
    # The new .gitignore is itself a project file (the agent's); what it and the others
    # ignore is not recorded at all.
    assert paths == [str(repo / "src" / "deep" / ".gitignore"), str(sentinel)]
    assert {c.writer_session for c in changes(wlive, repo)} == {agent.sid}
    assert wlive.service.counters.get("files.unchanged") >= 1
    assert agent.prompt() == ""
    assert agent.kinds() == set()


def test_change_seen_before_its_pre_tool_use_is_still_attributed(
    wlive: LiveServer, repo: Path
) -> None:
    """The hook timed out on the agent's side: the Write ran before the server even got its
    Pre, so the change is stored (and stamped) before the Pre. The Write's content proves
    whose it is."""
    agent = Agent(wlive, repo, "race")
    agent.start()
    target = repo / "src" / "app.py"
    target.write_text("print('raced')\n")
    row = wait_for(lambda: row_of(wlive, repo, target), "the early change")
    assert row.writer_session is None
    tid = uuid.uuid4().hex
    inp = {"file_path": str(target), "content": "print('raced')\n"}
    agent.send("PreToolUse", tool_name="Write", tool_input=inp, tool_use_id=tid)
    agent.send("PostToolUse", tool_name="Write", tool_input=inp, tool_use_id=tid, tool_response={})
    wait_for(lambda: row_of(wlive, repo, target, writer_session=agent.sid), "re-attribution")
    assert len([c for c in changes(wlive, repo) if c.path == str(target)]) == 1
    assert agent.prompt() == ""
    assert "external_modified_during_session" not in agent.kinds()


def test_deleted_and_renamed_directory(wlive: LiveServer, repo: Path) -> None:
    agent = Agent(wlive, repo, "del")
    agent.start()
    (repo / "README.md").unlink()
    wait_for(lambda: row_of(wlive, repo, repo / "README.md", change="deleted"), "the deletion")
    os.rename(repo / "src", repo / "lib")  # notify reports only the directory
    wait_for(lambda: row_of(wlive, repo, repo / "lib" / "app.py", change="added"), "moved in")
    wait_for(lambda: row_of(wlive, repo, repo / "src" / "util.py", change="deleted"), "moved out")


def test_data_dir_inside_the_project_is_never_reported(tmp_path: Path, db_url: str) -> None:
    repo = make_repo(tmp_path / "repo")
    # SQLite (when that leg runs) writes its database and WAL inside the watched tree.
    data = repo / ".tma1"
    url = f"sqlite:///{data / 'tma1.db'}" if db_url.startswith("sqlite") else db_url
    srv = start_live_server(
        Settings(data_dir=data, database_url=url, watch_files=True), clock=SystemClock()
    )
    try:
        agent = Agent(srv, repo, "data")
        agent.start()
        for _ in range(5):
            agent.prompt()
        sentinel = repo / "sentinel.txt"
        sentinel.write_text("x")
        wait_for(lambda: row_of(srv, repo, sentinel), "the sentinel")
        assert [c.path for c in changes(srv, repo)] == [str(sentinel)]
    finally:
        srv.stop()


# --- lifecycle: limit and idle stop -------------------------------------------------------


def test_watch_limit_logs_and_idle_watches_stop(
    tmp_path: Path, sqlite_store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    from tma1.clock import ManualClock
    from tma1.counters import Counters

    repos = [make_repo(tmp_path / f"r{i}") for i in range(3)]
    clock = ManualClock(start_ms=int(time.time() * 1000))
    touched: list[str] = []
    sensor = FileSensor(
        store=sqlite_store,
        clock=clock,
        settings=Settings(data_dir=tmp_path / "data", max_watched_projects=2),
        counters=Counters(),
        on_project_change=touched.append,
    )
    try:
        with caplog.at_level(logging.WARNING, logger="tma1.sensors.files"):
            assert isinstance(sensor.ensure_watch(str(repos[0])), ProjectWatch)
            assert isinstance(sensor.ensure_watch(str(repos[1])), ProjectWatch)
            assert sensor.ensure_watch(str(repos[2])) is None
            assert sensor.ensure_watch(str(repos[2])) is None
        refusals = [r for r in caplog.records if "TMA1_MAX_WATCHED_PROJECTS" in r.getMessage()]
        assert len(refusals) == 1 and str(repos[2]) in refusals[0].getMessage()
        assert all(sensor.wait_ready(str(r)) for r in repos[:2])
        clock.advance(60 * 60_000)
        sensor.ensure_watch(str(repos[1]))  # an event keeps repo 1 alive
        clock.advance(60 * 60_000)
        assert sensor.reap() == [str(repos[0])]
        assert set(sensor.watches) == {str(repos[1])}
        # A slot is free again: the third project is watched on its next event.
        assert isinstance(sensor.ensure_watch(str(repos[2])), ProjectWatch)
        assert sensor.wait_ready(str(repos[2]))
        # The stopped watcher no longer records anything.
        (repos[0] / "late.txt").write_text("late\n")
        (repos[2] / "seen.txt").write_text("seen\n")
        wait_for(lambda: sqlite_store.project_changes(str(repos[2]), 0), "repo 2's change")
        assert sqlite_store.project_changes(str(repos[0]), 0) == []
        assert str(repos[2]) in touched
    finally:
        sensor.stop()
    assert sensor.watches == {}


def test_non_git_directory_has_no_baseline_but_dedups_later_saves(
    tmp_path: Path, sqlite_store: Store
) -> None:
    from tma1.counters import Counters

    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.txt").write_text("one\n")
    sensor = FileSensor(
        store=sqlite_store,
        clock=SystemClock(),
        settings=Settings(data_dir=tmp_path / "data"),
        counters=Counters(),
        on_project_change=lambda p: None,
    )
    try:
        sensor.ensure_watch(str(plain))
        assert sensor.wait_ready(str(plain))
        (plain / "a.txt").write_text("two\n")
        wait_for(lambda: sqlite_store.project_changes(str(plain), 0), "first change")
        (plain / "a.txt").write_text("two\n")  # same content again: dropped
        (plain / "b.txt").write_text("b\n")
        wait_for(
            lambda: any(
                c.path.endswith("b.txt") for c in sqlite_store.project_changes(str(plain), 0)
            ),
            "barrier",
        )
        rows = sqlite_store.project_changes(str(plain), 0)
        assert [(Path(c.path).name, c.change) for c in rows] == [
            ("a.txt", "modified"),
            ("b.txt", "added"),
        ]
    finally:
        sensor.stop()


def test_watch_files_off_watches_nothing(tmp_path: Path, db_url: str) -> None:
    repo = make_repo(tmp_path / "repo")
    srv = start_live_server(
        Settings(data_dir=tmp_path / "data", database_url=db_url, watch_files=False),
        clock=SystemClock(),
    )
    try:
        agent = Agent(srv, repo, "off")
        agent.prompt()
        (repo / "README.md").write_text("changed\n")
        health = srv.client().get("/api/health").json()["sensors"]
        assert health["watch_files"] is False and health["files"]["watched"] == 0
        assert srv.service.sensors.files.watches == {}
    finally:
        srv.stop()
    assert changes(srv, repo) == []


def test_health_lists_the_watched_project(wlive: LiveServer, repo: Path) -> None:
    Agent(wlive, repo, "health").start()
    files = wlive.client().get("/api/health").json()["sensors"]["files"]
    assert files["watched"] == 1 and files["limit"] == 32
    entry = files["projects"][str(repo)]
    assert entry["ready"] is True and entry["failed"] is None
    assert entry["baseline_files"] == 4  # .gitignore, README.md, src/app.py, src/util.py


def test_codex_apply_patch_is_attributed(wlive: LiveServer, repo: Path) -> None:
    """Codex names the files of an apply_patch envelope relative to its cwd."""
    agent = Agent(wlive, repo, "codex")
    agent.start()
    patch = (
        "*** Begin Patch\n*** Add File: src/added.py\n+A = 1\n"
        "*** Update File: README.md\n@@\n-# demo\n+# demo, patched\n*** End Patch\n"
    )
    base = {"session_id": agent.sid, "cwd": str(repo), "tool_name": "apply_patch"}
    call = {**base, "tool_input": {"command": patch}, "tool_use_id": "call_1"}
    assert wlive.hook({**call, "hook_event_name": "PreToolUse"}, params={"source": "codex"})
    (repo / "src" / "added.py").write_text("A = 1\n")
    (repo / "README.md").write_text("# demo, patched\n")
    post = {**call, "hook_event_name": "PostToolUse", "tool_response": "Success. Updated files"}
    assert wlive.hook(post, params={"source": "codex"}).status_code == 200
    added = wait_for(lambda: row_of(wlive, repo, repo / "src" / "added.py"), "added.py")
    readme = wait_for(lambda: row_of(wlive, repo, repo / "README.md"), "README.md")
    assert (added.change, added.writer_session) == ("added", agent.sid)
    assert (readme.change, readme.writer_session) == ("modified", agent.sid)


def test_files_over_4_mb_carry_no_hash(tmp_path: Path, sqlite_store: Store) -> None:
    from tma1.counters import Counters

    repo = make_repo(tmp_path / "repo")
    sensor = FileSensor(
        store=sqlite_store,
        clock=SystemClock(),
        settings=Settings(data_dir=tmp_path / "data"),
        counters=Counters(),
        on_project_change=lambda p: None,
    )
    try:
        sensor.ensure_watch(str(repo))
        assert sensor.wait_ready(str(repo))
        big = repo / "data.bin"
        big.write_bytes(b"\0" * (4 * 1024 * 1024 + 1))
        small = repo / "small.bin"
        small.write_bytes(b"\0" * (4 * 1024 * 1024))

        def final_rows() -> dict[str, FileChange] | None:
            # The newest row of each; a write seen half-done may have left an earlier one.
            rows = {Path(c.path).name: c for c in sqlite_store.project_changes(str(repo), 0)}
            done = rows.get("data.bin") and rows["data.bin"].size == big.stat().st_size
            return rows if done and "small.bin" in rows else None

        by_name = wait_for(final_rows, "both files")
        assert by_name["data.bin"].content_hash is None
        assert by_name["data.bin"].size == 4 * 1024 * 1024 + 1
        assert by_name["small.bin"].content_hash is not None
    finally:
        sensor.stop()
