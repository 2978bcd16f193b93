"""`repeated_failed_build`: one check failing 3+ times within 30 minutes in one lane, open."""

from __future__ import annotations

from rulekit import SID, at, bash_fail, bash_masked, bash_ok, bash_refused, window

from tma1.clock import MINUTE_MS
from tma1.engine.anomaly import Channel, Kind, Severity
from tma1.engine.rules.repeated_failed_build import repeated_failed_build
from tma1.engine.window import RuleConfig

CFG = RuleConfig()
LINT = "golangci-lint run --enable-only usestdlibvars"
LINT_OUT = (
    'internal/server/auth_test.go:23:29: "GET" can be replaced by http.MethodGet (usestdlibvars)\n'
    '\treq := httptest.NewRequest("GET", "/", nil)\n'
    "\t                           ^\n"
    "1 issues:\n* usestdlibvars: 1\n"
)


def run(events: list, now: int) -> list:  # type: ignore[type-arg]
    return repeated_failed_build(window(events), now, CFG)


def test_exactly_three_failures_fire_two_do_not() -> None:
    two = [bash_fail(at(1), LINT, LINT_OUT), bash_fail(at(2), LINT, LINT_OUT)]
    assert run(two, at(3)) == []
    [a] = run([*two, bash_fail(at(3), LINT, LINT_OUT)], at(4))
    assert (a.kind, a.severity, a.channel) == (
        Kind.REPEATED_FAILED_BUILD,
        Severity.HIGH,
        Channel.STOP_BLOCK,
    )
    assert a.subject == "golangci-lint run"  # the check's identity (design §2.15)
    assert a.last_evidence_ts == at(3)
    assert a.session_id == SID and a.first_emitted_at == 0
    assert "failed 3 times" in a.evidence


def test_suggestion_quotes_the_repeated_error_line() -> None:
    events = [bash_fail(at(i), LINT, LINT_OUT) for i in (1, 2, 3)]
    [a] = run(events, at(4))
    assert '"GET" can be replaced by http.MethodGet' in a.suggestion
    assert "auth_test.go:23:29" in a.suggestion


def test_the_line_repeated_most_wins_over_a_one_off() -> None:
    odd = "cmd/x.go:1:1: something else entirely (unused)"
    events = [
        bash_fail(at(1), LINT, LINT_OUT),
        bash_fail(at(2), LINT, LINT_OUT),
        bash_fail(at(3), LINT, odd),
    ]
    [a] = run(events, at(4))
    assert "http.MethodGet" in a.suggestion and "something else" not in a.suggestion


def test_thirty_minute_edge() -> None:
    events = [bash_fail(at(0), LINT), bash_fail(at(10), LINT), bash_fail(at(20), LINT)]
    assert len(run(events, at(30))) == 1  # the first failure is exactly 30 min old
    assert run(events, at(30) + 1) == []  # now it is 30 min + 1 ms old: two remain


def test_masked_failures_count() -> None:
    cmd = "npm run test:offline 2>&1 | tail -30"
    out = (
        " FAIL  test/perf.test.ts > Perf > should create record within budget\n"
        "AssertionError: expected undefined to be defined\n"
        " Test Files  1 failed | 50 passed (51)\n"
    )
    events = [bash_masked(at(i), cmd, out) for i in (1, 2, 3)]
    [a] = run(events, at(4))
    assert "(3 of them hidden by a pipe that exited 0)" in a.evidence
    assert "AssertionError: expected undefined to be defined" in a.suggestion


def test_masked_failures_without_a_pipe_never_mention_one() -> None:
    # Codex without its rollout's exit status: `make` printed its error, no pipe ran.
    out = "cc -c app.c\napp.c:3: error: expected ';'\nmake: *** [app.o] Error 1\n"
    events = [bash_masked(at(i), "make", out) for i in (1, 2, 3)]
    [a] = run(events, at(4))
    assert "pipe" not in a.evidence
    assert "(3 of them reported without a failing exit status" in a.evidence


def test_refusals_and_successes_do_not_count() -> None:
    cmd = "rm -rf logs/*.json"
    assert run([bash_refused(at(i), cmd) for i in (1, 2, 3)], at(4)) == []
    assert run([bash_ok(at(i), LINT) for i in (1, 2, 3)], at(4)) == []


def test_one_check_however_filtered_is_one_subject() -> None:
    # Turn 1 grouped by the first 60 characters; design §2.15 groups by the check.
    base = "go test ./internal/monitoring ./internal/server ./internal/build"
    same = [bash_fail(at(i), f"{base} -run TestUpgrade{' -v' * i}") for i in (1, 2, 3)]
    [a] = run(same, at(4))
    assert a.subject == "go test"
    # Three different test filters are three different runs, not one re-run three times.
    assert run([bash_fail(at(i), f"{base} -run Test{i}") for i in (1, 2, 3)], at(4)) == []
    different = [
        bash_fail(at(1), "make test"),
        bash_fail(at(2), "make lint"),
        bash_fail(at(3), "make"),
    ]
    assert run(different, at(4)) == []


def test_two_commands_failing_three_times_each_are_two_findings() -> None:
    events = [bash_fail(at(i), "make test") for i in (1, 2, 3)]
    events += [bash_fail(at(i + 0.5), "npm run build") for i in (1, 2, 3)]
    assert sorted(a.subject for a in run(events, at(4))) == ["make test", "npm run build"]


def test_events_after_now_are_not_seen() -> None:
    events = [bash_fail(at(i), LINT) for i in (1, 2, 3)]
    assert run(events, at(3) - 1) == []


def test_window_of_60_minutes_still_only_counts_30() -> None:
    events = [bash_fail(at(i), LINT) for i in (0, 1, 2)] + [bash_fail(at(40), LINT)]
    assert run(events, at(40) + MINUTE_MS) == []


def test_a_pass_of_the_same_check_ends_the_streak() -> None:
    fails = [bash_fail(at(i), "npm run build 2>&1 | tail -20") for i in (1, 2, 3)]
    assert len(run(fails, at(5))) == 1
    # The build passed since (spelled without the pipe): fixed, nothing to report.
    fixed = [*fails, bash_ok(at(4), "npm run build 2>&1")]
    assert run(fixed, at(5)) == []
    # A success of some other command does not fix the build.
    other = [*fails, bash_ok(at(4), "git status")]
    assert len(run(other, at(5))) == 1
    # After the pass, a new streak needs three failures of its own.
    again = [*fixed, *(bash_fail(at(5 + i), "npm run build") for i in (1, 2))]
    assert run(again, at(8)) == []
    [a] = run([*again, bash_fail(at(8), "npm run build")], at(9))
    assert "failed 3 times" in a.evidence and a.last_evidence_ts == at(8)


def test_a_masked_failure_is_no_pass() -> None:
    cmd = "npm test 2>&1 | tail -5"
    out = " FAIL  test/a.test.ts > A > works\n Tests  1 failed (1)\n"
    events = [bash_fail(at(i), cmd, out) for i in (1, 2)] + [bash_masked(at(3), cmd, out)]
    assert len(run(events, at(4))) == 1


def test_commands_that_only_read_or_move_files_are_no_builds() -> None:
    grep = 'grep -n "update_plan\\|shell\\" src/codex.rs | cat'
    assert run([bash_fail(at(i), grep, "unexpected EOF") for i in (1, 2, 3)], at(4)) == []
    checkout = "git checkout main"
    assert run([bash_fail(at(i), checkout, "error: local changes") for i in (1, 2, 3)], at(4)) == []
