"""The session bundle's pure core (`tma1.engine.bundle`): each part only when it is true,
silence otherwise, nothing twice in one context epoch, and the 2,000-character cap."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from enginekit import PROJECT, bash_fail, bash_ok

from tma1.checks.outcome import NOT_CHECK_FAILURES
from tma1.clock import MINUTE_MS
from tma1.engine.anomaly import Anomaly, Channel, Kind, Severity
from tma1.engine.bundle import (
    ACTIVE_MS,
    BUNDLE_MAX_CHARS,
    BundleInput,
    BundleMemory,
    Peer,
    build_bundle,
    compact_instructions,
    epoch_start,
    finding_key,
    open_checks,
    unresolved,
)
from tma1.engine.digest import CLOSE_TAG, OPEN_TAG
from tma1.engine.suppression import decide
from tma1.events import FileChange, HookEvent, parse_payload

T0 = 1_700_000_000_000
ME, OTHER = "me-11111111", "other-22222222"
BUILD_OUT = "Exit code 1\nsrc/app.py:3: error: name 'x' is not defined\nbuild failed"


def ev(data: dict[str, Any], ts: int) -> HookEvent:
    return parse_payload(data, ts=ts)


def fail(sid: str, cmd: str, ts: int, out: str = BUILD_OUT) -> HookEvent:
    return ev(bash_fail(sid, cmd, out), ts)


def ok(sid: str, cmd: str, ts: int) -> HookEvent:
    return ev(bash_ok(sid, cmd, "all good"), ts)


def finding(kind: str = Kind.BUILD_BROKEN_AFTER_MY_EDIT.value, subject: str = "x") -> Anomaly:
    return Anomaly(
        kind=kind,
        severity=Severity.MEDIUM.value,
        channel=Channel.USER_PROMPT_SUBMIT.value,
        evidence=f"evidence of {kind}",
        suggestion=f"do something about {kind}",
        subject=subject,
        last_evidence_ts=T0,
        session_id=ME,
    )


def inp(**kw: Any) -> BundleInput:
    base: dict[str, Any] = {
        "session_id": ME,
        "project": PROJECT,
        "source": "resume",
        "now": T0 + 30 * MINUTE_MS,
        "epoch_start": T0 - MINUTE_MS,
    }
    base.update(kw)
    return BundleInput(**base)


def change(path: str, ts: int, writer: str | None = None) -> FileChange:
    return FileChange(
        ts=ts, project=PROJECT, path=f"{PROJECT}/{path}", change="modified", writer_session=writer
    )


# --- silence -------------------------------------------------------------------------------


def test_silent_when_there_is_nothing_to_say() -> None:
    b = build_bundle(inp())
    assert b.text == "" and b.keys == () and b.findings == () and b.parts == ()
    # Passing runs, finished sessions, old or own changes: still nothing to say.
    quiet = inp(
        runs=[fail(ME, "make build", T0), ok(OTHER, "make build", T0 + 1_000)],
        peers=[Peer(OTHER, "codex", T0 + 30 * MINUTE_MS - ACTIVE_MS)],
        last_event_ts=T0 + 10_000,
        changes=[change("a.py", T0 + 5_000), change("b.py", T0 + 20_000, writer=ME)],
    )
    assert build_bundle(quiet).text == ""


# --- part 1: open checks ---------------------------------------------------------------------


def test_a_check_is_open_when_its_newest_run_failed_and_closed_by_a_later_pass() -> None:
    runs = [
        fail(ME, "make build", T0),
        ok(ME, "make build 2>&1 | tail -20", T0 + 1_000),  # the same check, passing: closed
        fail(ME, "npm test", T0 + 2_000),
        ok(ME, "npm test", T0 + 3_000),
        fail(OTHER, "npm test | tail -5", T0 + 4_000),  # broken again, by the other session
        fail(ME, "npm test", T0 + 5_000),
        fail(ME, "grep -r FAIL build.log", T0 + 6_000),  # plumbing: never a check
    ]
    [check] = open_checks(runs, T0 + 10_000)
    assert check.key == "npm run test"  # the check's identity (design §2.15)
    assert (check.since, check.last_failure, check.failures) == (T0 + 4_000, T0 + 5_000, 2)
    assert check.broken_by == OTHER
    # `now` is an explicit input: before the second breakage the check was closed.
    assert open_checks(runs, T0 + 3_500) == []


def test_checks_part_names_who_broke_it() -> None:
    runs = [
        ok(ME, "./build.sh", T0 - 1_000),  # it passed: a session that fails it after broke it
        fail(OTHER, "./build.sh", T0),
        fail(OTHER, "./build.sh", T0 + 1_000),
    ]
    b = build_bundle(inp(source="startup", runs=runs))
    assert b.parts == ("checks",)
    assert "`./build.sh` fails since" in b.text
    assert f"broken by session {OTHER[:8]} (claude-code); 2 failing runs" in b.text
    assert "src/app.py:3: error: name 'x' is not defined" in b.text
    assert b.findings == ()  # project state, not a finding of this session: nothing to emit
    mine = build_bundle(inp(runs=[ok(OTHER, "./build.sh", T0 - 1), fail(ME, "./build.sh", T0)]))
    assert "broken by this session; 1 failing run" in mine.text


def test_a_check_that_never_passed_is_failing_since_not_broken_by() -> None:
    # Held-out recordings, turn 3: "broken by session X" where X was only the first to run a
    # check that had never passed (design §2.21). Who ran it last is what is known.
    runs = [fail(OTHER, "./build.sh", T0), fail(ME, "./build.sh", T0 + 1_000)]
    b = build_bundle(inp(source="startup", session_id="third-33333333", runs=runs))
    assert "broken by" not in b.text
    assert "`./build.sh` failing since " in b.text
    assert f"(last run in session {ME[:8]} (claude-code); 2 failing runs)" in b.text
    [check] = open_checks(runs, T0 + 2_000)
    assert (check.passed_before, check.broken_by, check.last_session) == (False, OTHER, ME)
    mine = build_bundle(inp(runs=runs))
    assert "(last run in this session; 2 failing runs)" in mine.text


@pytest.mark.parametrize(
    "seen_pass",
    [
        # templar-373740ff 21:07: `go test -short ./... | head -20` exited 0 showing 20
        # passing packages; internal/monitoring, past the cut, failed as it had all day. The
        # next failure was then "broken by" the session that ran it.
        (
            "go test -short ./... 2>&1 | head -20",
            "".join(f"ok  \tacme/pkg{i}\t0.1s\n" for i in range(20)),
        ),
        ("pytest -q | head -n 3", "....\n....\n....\n"),
    ],
)
def test_a_pass_cut_short_by_head_is_no_pass_to_be_broken_from(seen_pass: tuple[str, str]) -> None:
    command, shown = seen_pass
    rerun = command.split(" 2>&1")[0].split(" |")[0]
    runs = [
        ev(bash_ok(OTHER, command, shown), T0),
        fail(ME, rerun, T0 + 1_000, "Exit code 1\nFAIL\tacme/monitoring\t3.1s\n1 failed\n"),
    ]
    b = build_bundle(inp(source="startup", session_id="third-33333333", runs=runs))
    assert "broken by" not in b.text and "failing since" in b.text
    # The same pass shown whole (fewer lines than head keeps) is a pass: then it broke.
    whole = [ev(bash_ok(OTHER, command, "ok  \tacme/pkg0\t0.1s\n"), T0), runs[1]]
    b = build_bundle(inp(source="startup", session_id="third-33333333", runs=whole))
    assert f"broken by session {ME[:8]}" in b.text


def test_an_invocation_error_is_no_verdict_on_a_check() -> None:
    e = fail(ME, "npm run lnit", T0, 'Exit code 1\nnpm error Missing script: "lnit"')
    e.failure_kind = "invocation"
    assert open_checks([e], T0 + 1) == []


# --- part 2: this session's unresolved findings ---------------------------------------------


def test_findings_are_retold_after_resume_compact_or_clear_never_at_startup() -> None:
    f = finding()
    for source in ("resume", "compact", "clear", None):
        b = build_bundle(inp(source=source, findings=[f]))
        assert b.parts == ("findings",), source
        assert b.findings == (f,)
        assert f.suggestion in b.text and "[medium] build_broken_after_my_edit" in b.text
    assert build_bundle(inp(source="startup", findings=[f])).text == ""


def test_a_check_named_by_a_standing_finding_is_told_once() -> None:
    f = finding(subject="./build.sh")
    runs = [fail(ME, "./build.sh", T0)]
    b = build_bundle(inp(findings=[f], runs=runs))
    assert b.parts == ("findings",)
    # Told already in this epoch, the finding still stands: the check is not told either.
    again = build_bundle(inp(findings=[f], runs=runs, told={finding_key(f): T0}))
    assert again.text == ""


def test_unresolved_leaves_out_settled_findings_and_context_pressure() -> None:
    now = T0 + MINUTE_MS
    stuck = finding(Kind.TEST_STUCK.value, "t1")
    pressure = finding(Kind.CONTEXT_PRESSURE.value, "")
    told = decide(stuck, None, None, now)  # fresh: stands
    resolved = replace(decide(finding(subject="gone"), None, None, now), reason="resolved")
    one_shot = replace(decide(pressure, None, None, now), reason="one_shot")
    fresh_pressure = decide(pressure, None, None, now)
    assert [f.subject for f in unresolved([told, resolved, one_shot, fresh_pressure])] == ["t1"]


# --- part 3: files changed outside since the session's last event ----------------------------


def test_changes_part_only_for_outside_changes_after_the_last_event() -> None:
    last = T0 + 10_000
    changes = [
        change("old.py", last - 1),  # before the last event: the session knew
        change("mine.py", last + 1, writer=ME),  # its own write
        change("theirs.py", last + 2, writer=OTHER),
        change("nobody.py", last + 3),
    ]
    b = build_bundle(inp(last_event_ts=last, changes=changes))
    assert b.parts == ("changes",)
    assert "nobody.py (modified), theirs.py (modified)" in b.text
    assert "old.py" not in b.text and "mine.py" not in b.text
    # A session with no event before this SessionStart (a fresh start) has no "since".
    assert build_bundle(inp(last_event_ts=None, changes=changes)).text == ""


# --- part 4: other sessions active on the project --------------------------------------------


def test_peers_part_only_for_other_sessions_active_now() -> None:
    now = T0 + 30 * MINUTE_MS
    peers = [
        Peer(OTHER, "codex", now - 2 * MINUTE_MS),
        Peer("stale-33333333", "claude-code", now - ACTIVE_MS),
        Peer(ME, "claude-code", now),
    ]
    b = build_bundle(inp(now=now, peers=peers))
    assert b.parts == ("sessions",)
    assert f"{OTHER[:8]} (codex, last event 2 min ago)" in b.text
    assert "stale-33" not in b.text and ME[:8] not in b.text
    assert b.keys == (f"peer|{OTHER}",)


def test_a_peer_is_active_only_in_the_middle_of_a_turn() -> None:
    """A session whose newest event ends its turn (Stop, SessionEnd) or that only started
    is idle however recent: the new session is its successor, not its peer (issue 27)."""
    now = T0 + 30 * MINUTE_MS
    mid_turn = Peer("working-11111111", "codex", now - 2 * MINUTE_MS, "PostToolUse")
    idle = [
        Peer(f"{hook.lower()}-{'2' * 8}", "claude-code", now - 30_000, hook)
        for hook in ("Stop", "SessionEnd", "SessionStart")
    ]
    b = build_bundle(inp(now=now, peers=[mid_turn, *idle]))
    assert "Other sessions active on this project now: working-" in b.text
    assert b.keys == ("peer|working-11111111",)
    assert build_bundle(inp(now=now, peers=idle)).text == ""
    # Mid-turn but silent for ACTIVE_MS: not active either.
    quiet = Peer("working-11111111", "codex", now - ACTIVE_MS, "PreToolUse")
    assert build_bundle(inp(now=now, peers=[quiet])).text == ""


def test_a_turn_the_user_ended_with_no_hook_is_not_active() -> None:
    """A turn the user interrupted (Codex `turn_aborted`, Claude Code's "[Request
    interrupted by user]") sends no Stop: the transcript's turn end, after the newest hook,
    says the turn is over (issue 27: 3 of the 5 false bundle items)."""
    now = T0 + 30 * MINUTE_MS
    last = now - 2 * MINUTE_MS
    aborted = Peer("aborted-11111111", "codex", last, "PostToolUse", turn_end_ts=last + 3_000)
    interrupted = Peer("esc-22222222", "claude-code", last, "PreToolUse", turn_end_ts=last)
    assert build_bundle(inp(now=now, peers=[aborted, interrupted])).text == ""
    # A turn end before the newest hook is an earlier turn's: the user prompted again.
    again = Peer("aborted-11111111", "codex", last, "PreToolUse", turn_end_ts=last - 60_000)
    b = build_bundle(inp(now=now, peers=[again, interrupted]))
    assert b.keys == ("peer|aborted-11111111",)


def test_a_peer_mid_tool_call_is_still_active_until_it_has_been_silent_active_ms() -> None:
    """A long tool call sends no hook until it ends: the PreToolUse is the evidence, up to
    `ACTIVE_MS` (the longest a tool call may run); after that nothing says it runs."""
    now = T0 + 30 * MINUTE_MS
    running = Peer("tests-11111111", "claude-code", now - ACTIVE_MS + 1, "PreToolUse")
    b = build_bundle(inp(now=now, peers=[running]))
    assert "Other sessions active on this project now: tests-11 (claude-code, last event" in b.text
    silent = Peer("tests-11111111", "claude-code", now - ACTIVE_MS, "PreToolUse")
    assert build_bundle(inp(now=now, peers=[silent])).text == ""


# --- epochs: nothing twice in one epoch -------------------------------------------------------


def test_nothing_is_told_twice_in_one_epoch_and_a_new_epoch_tells_again() -> None:
    f = finding()
    runs = [fail(OTHER, "make build", T0)]
    peers = [Peer(OTHER, "codex", T0 + 29 * MINUTE_MS)]
    first = build_bundle(inp(findings=[f], runs=runs, peers=peers))
    assert first.parts == ("checks", "findings", "sessions")
    told = {k: T0 + MINUTE_MS for k in first.keys}
    assert build_bundle(inp(findings=[f], runs=runs, peers=peers, told=told)).text == ""
    # A compaction after the telling starts a new epoch: all of it is news again.
    after = build_bundle(
        inp(findings=[f], runs=runs, peers=peers, told=told, epoch_start=T0 + 2 * MINUTE_MS)
    )
    assert after.parts == first.parts and after.findings == (f,)


def test_epoch_starts_at_the_newest_compaction_else_the_session_start() -> None:
    # Which events are compactions is `Store.latest_compaction_ts`'s (design §2.17; the
    # live tests here drive PreCompact and SessionStart source=compact through it).
    assert epoch_start(T0 + 5_000, T0) == T0 + 5_000
    assert epoch_start(None, T0) == T0
    assert epoch_start(None, None) == 0


def test_memory_restores_only_bundle_rows_and_a_digest_skips_what_a_bundle_just_told() -> None:
    mem = BundleMemory()
    f = finding()
    rows = [
        {"session_id": ME, "ts": T0, "channel": "user_prompt_submit", "stable_key": "a|b|c"},
        {"session_id": ME, "ts": T0 + 1, "channel": "session_start", "stable_key": f.stable_key},
    ]
    mem.restore(rows)
    assert mem.told(ME) == {finding_key(f): T0 + 1}
    assert mem.recently_told(f, T0 + 5 * MINUTE_MS)
    assert not mem.recently_told(f, T0 + 11 * MINUTE_MS)  # the ten minutes are over
    assert not mem.recently_told(replace(f, last_evidence_ts=T0 + 2), T0 + MINUTE_MS)  # newer
    assert mem.evict_idle(T0 + 25 * 60 * MINUTE_MS) == 1 and mem.told(ME) == {}


# --- the cap ----------------------------------------------------------------------------------


def test_the_bundle_stays_under_2000_characters_and_tells_only_what_it_shows() -> None:
    long = "very long words " * 200
    findings = [replace(finding(subject=f"s{i}"), suggestion=long, evidence=long) for i in range(6)]
    runs = [
        # (a make target is a check when its name says so, `make test3`, and a failure says
        # what failed: an output with no error in it has no verdict, design §2.21)
        fail(OTHER, f"make test{i} " + "x" * 300, T0 + i, "Exit code 2\nerror: " + long)
        for i in range(6)
    ]
    changes = [change(f"dir/{'d' * 80}/file{i}.py", T0 + 20_000 + i) for i in range(20)]
    peers = [Peer(f"peer-{i:08d}-" + "p" * 40, "codex", T0 + 29 * MINUTE_MS) for i in range(8)]
    b = build_bundle(
        inp(findings=findings, runs=runs, changes=changes, last_event_ts=T0 + 10_000, peers=peers)
    )
    assert len(b.text) < BUNDLE_MAX_CHARS
    assert b.text.startswith(OPEN_TAG) and b.text.endswith(CLOSE_TAG)
    assert b.parts == ("checks", "findings", "changes", "sessions")
    assert len(b.findings) == 3  # at most three, and this session's own come first
    for f in b.findings:
        assert f"{f.kind}:" in b.text
    # A tighter cap drops whole items, never half of one, and records only what is shown.
    small = build_bundle(
        inp(findings=findings, runs=runs, changes=changes, last_event_ts=T0 + 10_000, peers=peers),
        max_chars=700,
    )
    assert len(small.text) < 700
    assert small.findings == () or all(f"{f.kind}:" in small.text for f in small.findings)
    assert len(small.keys) < len(b.keys)


# --- PreCompact: summary instructions ---------------------------------------------------------


def test_compact_instructions_name_what_is_open_whether_or_not_told_this_epoch() -> None:
    f = finding(subject="./build.sh")
    runs = [fail(ME, "./build.sh", T0), fail(OTHER, "npm test", T0 + 1)]
    told = {finding_key(f): T0 + MINUTE_MS}  # told already: the summary must still keep it
    text = compact_instructions(inp(findings=[f], runs=runs, told=told))
    assert text.startswith("tma1, which monitors this session, reports these problems")
    assert f.suggestion in text and "`npm test` failing since" in text
    assert "`./build.sh` fail" not in text  # named by the finding: once
    assert OPEN_TAG not in text  # plain instructions for the summariser, not agent context
    assert len(compact_instructions(inp(findings=[f] * 9, runs=runs), max_chars=400)) < 400
    # Nothing open (or only context pressure, which the compaction answers): nothing to ask.
    assert compact_instructions(inp()) == ""
    assert compact_instructions(inp(findings=[finding(Kind.CONTEXT_PRESSURE.value, "")])) == ""


def test_files_a_standing_external_change_finding_names_are_not_listed_twice() -> None:
    last = T0 + 10_000
    ext = replace(
        finding(Kind.EXTERNAL_MODIFIED_DURING_SESSION.value, ""),
        related_files=(f"{PROJECT}/notes.txt",),
    )
    changes = [change("notes.txt", last + 1), change("other.py", last + 2)]
    b = build_bundle(inp(findings=[ext], last_event_ts=last, changes=changes))
    assert b.parts == ("findings", "changes")
    assert "other.py (modified)" in b.text and "notes.txt (modified)" not in b.text
    only = build_bundle(inp(findings=[ext], last_event_ts=last, changes=changes[:1]))
    assert only.parts == ("findings",)


# --- turn 3: only open checks with a verdict, not stale, blamed only on a break --------------

RUSTC = "error[E0425]: cannot find value `cfg` in this scope\n --> src/main.rs:12:5\n"


def test_a_cargo_check_a_later_cargo_build_passed_is_not_listed() -> None:
    # Held-out recordings: `cargo check` listed as failing an hour after a `cargo build` of
    # the same crate passed (design §2.21).
    runs = [fail(OTHER, "cargo check", T0, RUSTC), ok(OTHER, "cargo build --release", T0 + 60_000)]
    assert open_checks(runs, T0 + 90 * MINUTE_MS) == []
    assert build_bundle(inp(source="startup", runs=runs)).text == ""


def test_a_check_a_later_wider_failure_superseded_is_told_as_that_one() -> None:
    other = "error[E0308]: mismatched types\n --> src/db.rs:40:9\n"
    runs = [fail(OTHER, "cargo check", T0, RUSTC), fail(OTHER, "cargo build", T0 + 1_000, other)]
    assert [c.key for c in open_checks(runs, T0 + 2_000)] == ["cargo build"]


@pytest.mark.parametrize("kind", sorted(NOT_CHECK_FAILURES - {"fixed"}))
def test_runs_with_no_verdict_are_never_listed(kind: str) -> None:
    # The contract with checks/: a failure_kind in NOT_CHECK_FAILURES is no verdict.
    crash = replace(fail(OTHER, "npx vitest run", T0, "Module.createRequire is not a function"),
                    failure_kind=kind)  # fmt: skip
    assert open_checks([crash], T0 + 1_000) == []
    assert build_bundle(inp(source="startup", runs=[crash])).text == ""
