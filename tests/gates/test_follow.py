"""Follow-rate (design §2.13) per kind, each case worked out by hand, through the live API
on a real SQLite and a real PostgreSQL. The window is the next 5 tool calls (PreToolUse)
of the same session after the emit."""

from __future__ import annotations

from typing import Any

from conftest import LiveServer
from gateseed import Session

from tma1.clock import ManualClock


def _rate(live: LiveServer, kind: str, window: int = 5) -> dict[str, Any]:
    with live.client() as c:
        r = c.get("/api/anomalies/follow-rate", params={"days": 7, "window": window})
    assert r.status_code == 200, r.text
    return r.json()["kinds"][kind]


def _session(live: LiveServer, clock: ManualClock, sid: str, **kw: Any) -> Session:
    return Session(live.store, sid, ts=clock.now_ms() - 3_600_000, **kw)


def test_stale_file_view_follow_is_a_read_of_the_file(live: LiveServer, clock: ManualClock) -> None:
    f = "/repo/app/models.py"
    # followed: the Read comes as the 3rd call after the emit.
    s = _session(live, clock, "sv-followed").read(f).edit(f)
    s.emit("stale_file_view", f, [f]).bash("ls").call("Grep", pattern="x").read(f).flush()
    # not followed: five calls that are not a Read of the file (an Edit does not count),
    # the Read comes 6th — outside the window.
    s = _session(live, clock, "sv-late").read(f)
    s.emit("stale_file_view", f, [f]).edit(f).read("/repo/other.py").bash("pytest")
    s.bash("git diff").call("Grep", pattern="y").read(f).flush()
    # not followed: the only Read of the file was before the emit.
    s = _session(live, clock, "sv-before").read(f).emit("stale_file_view", f, [f])
    s.bash("make").flush()
    # followed (Codex has no Read tool): `cat` of the file by a relative path.
    s = _session(live, clock, "sv-codex", source="codex")
    s.emit("stale_file_view", f, [f]).bash("cat app/models.py").flush()
    # 4 emits, 2 followed.
    got = _rate(live, "stale_file_view")
    assert (got["emits"], got["followed"], got["rate"]) == (4, 2, 0.5)
    # Four emits are under the minimum sample (5): no verdict yet.
    assert (got["pass"], got["status"], got["n"]) == (None, "not_enough_data", 4)


def test_build_broken_follow_is_a_read_of_an_edited_file(
    live: LiveServer, clock: ManualClock
) -> None:
    x, y = "/repo/src/x.ts", "/repo/src/y.ts"
    err = "Exit code 2\nsrc/y.ts(3,1): error TS2304: Cannot find name 'z'."
    # followed: a Read of y.ts as exactly the 5th call — the window's last.
    s = _session(live, clock, "bb-followed").edit(x).edit(y).bash("npm run build", fail=err)
    s.emit("build_broken_after_my_edit", "npm run build", [y, x])
    s.bash("git status").edit(x).bash("npm run build", fail=err).call("Glob", pattern="*")
    s.read(y).flush()
    # not followed: edits the file and re-runs the build, never reads a related file.
    s = _session(live, clock, "bb-blind").edit(x).bash("npm run build", fail=err)
    s.emit("build_broken_after_my_edit", "npm run build", [x])
    s.edit(x).bash("npm run build", fail=err).read("/repo/package.json").flush()
    got = _rate(live, "build_broken_after_my_edit")
    assert (got["emits"], got["followed"], got["rate"]) == (2, 1, 0.5)


def test_repeated_failed_build_follow_is_no_blind_rerun(
    live: LiveServer, clock: ManualClock
) -> None:
    cmd = "make test"
    fail = "Exit code 2\nmake: *** [test] Error 1"
    # followed: investigates for five calls; the re-run is the 6th call, outside the window.
    s = _session(live, clock, "rf-followed")
    for _ in range(3):
        s.bash(cmd, fail=fail)
    s.emit("repeated_failed_build", cmd)
    s.read("/repo/Makefile").edit("/repo/foo.c").bash("git diff").read("/repo/foo.h")
    s.bash("make -n test").bash(cmd).flush()
    # not followed: the same command again as the 2nd call.
    s = _session(live, clock, "rf-rerun")
    for _ in range(3):
        s.bash(cmd, fail=fail)
    s.emit("repeated_failed_build", cmd).read("/repo/Makefile").bash(cmd, fail=fail).flush()
    # not followed: no tool call at all after the emit (nothing observed to follow).
    s = _session(live, clock, "rf-idle")
    for _ in range(3):
        s.bash(cmd, fail=fail)
    s.emit("repeated_failed_build", cmd).hook("Stop").flush()
    # followed: fixes something first, then runs the command once more (the suggestion).
    s = _session(live, clock, "rf-fix-then-rerun")
    for _ in range(3):
        s.bash(cmd, fail=fail)
    s.emit("repeated_failed_build", cmd).read("/repo/foo.c").edit("/repo/foo.c").bash(cmd)
    s.flush()
    got = _rate(live, "repeated_failed_build")
    assert (got["emits"], got["followed"]) == (4, 2)
    assert got["rate"] == 0.5
    assert (got["pass"], got["status"]) == (None, "not_enough_data")


def test_test_stuck_follow_is_reading_the_test_or_not_rerunning(
    live: LiveServer, clock: ManualClock
) -> None:
    tid = "tests/test_calc.py::test_add"
    run = "pytest tests/test_calc.py -q"
    out = f"Exit code 1\nFAILED {tid} - assert 1 == 2\n1 failed"

    def stuck(sid: str) -> Session:
        s = _session(live, clock, sid)
        for _ in range(3):
            s.bash(run, fail=out)
        return s.emit("test_stuck", tid)

    # followed: reads the test's file (matched by its relative path), even though it re-runs.
    stuck("ts-read").bash(run, fail=out).read("/repo/tests/test_calc.py").flush()
    # followed: never re-runs the test command in the window (fixes the code instead).
    s = stuck("ts-fix").call("Grep", pattern="def add").read("/repo/calc.py")
    s.edit("/repo/calc.py").flush()
    # not followed: re-runs the same test command straight away, no look at the test file.
    stuck("ts-rerun").edit("/repo/calc.py").bash(run, fail=out).flush()
    got = _rate(live, "test_stuck")
    assert (got["emits"], got["followed"]) == (3, 2)
    assert got["rate"] == round(2 / 3, 4)


def test_external_modified_follow_is_a_read_of_the_changed_file(
    live: LiveServer, clock: ManualClock
) -> None:
    f = "/repo/config.yaml"
    s = _session(live, clock, "ex-followed").emit("external_modified_during_session", "", [f])
    s.read(f).flush()
    # not followed: overwrites the file without reading the external change.
    s = _session(live, clock, "ex-overwrite").emit("external_modified_during_session", "", [f])
    s.edit(f).call("Write", file_path=f, content="x").flush()
    got = _rate(live, "external_modified_during_session")
    assert (got["emits"], got["followed"], got["rate"]) == (2, 1, 0.5)


def test_context_pressure_follow_is_compaction_end_or_commit(
    live: LiveServer, clock: ManualClock
) -> None:
    def pressure(sid: str) -> Session:
        return _session(live, clock, sid).bash("ls").emit("context_pressure")

    # followed: a compaction after two calls.
    s = pressure("cp-compact").read("/repo/a").read("/repo/b")
    s.hook("PreCompact", trigger="auto").flush()
    # followed: a git commit as the 4th call, inside a compound command.
    s = pressure("cp-commit").read("/repo/a").edit("/repo/a").bash("pytest")
    s.bash("git add -A && git commit -m wip").flush()
    # followed: the session ends after one call.
    pressure("cp-end").read("/repo/a").hook("SessionEnd", reason="exit").flush()
    # not followed: five ordinary calls, the compaction comes after the 6th.
    s = pressure("cp-late")
    for i in range(6):
        s.read(f"/repo/f{i}")
    s.hook("PreCompact", trigger="manual").flush()
    # not followed: git commands, but no commit.
    pressure("cp-log").bash("git log --oneline").bash("git status").flush()
    got = _rate(live, "context_pressure")
    assert (got["emits"], got["followed"], got["rate"]) == (5, 3, 0.6)
    # A wider window takes in cp-late's compaction after its 6th call.
    assert _rate(live, "context_pressure", window=6)["followed"] == 4
