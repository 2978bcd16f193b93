"""The Stop that matters (design §2.22): `build_broken_after_my_edit` at a Stop.

On held-out recordings (turn 3) tma1 let agents stop with a build they had just broken
(3 of 6 blocked), and twelve other Stops over a failing check were rightly silent. Each
pattern is a scripted session after those recordings (`rulekit`: real payloads through
the real parser). The blocking ones failed on the turn-2 rule (it blocked at a Stop only
on an error located in a file the session edited, with the newest run after that edit);
the silent ones must stay silent.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from rulekit import PROJECT, at, bash_fail, bash_masked, bash_ok, edit, event, src, window

from tma1.checks.outcome import NOT_CHECK_FAILURES
from tma1.engine.anomaly import Anomaly, Channel, Kind, Severity
from tma1.engine.checkruns import failing_at
from tma1.engine.rules import RULES
from tma1.engine.window import RuleConfig
from tma1.events import HookEvent

CFG = RuleConfig()
API = src("src/api/client.ts")
GEN = src("src/generated/types.ts")
TSC_OUT = (
    "> app@1.0.0 build\n> tsc -p tsconfig.json && vite build\n\n"
    "src/generated/types.ts(41,3): error TS2322: Type 'string' is not assignable to type "
    "'number'.\n\nFound 1 error in src/generated/types.ts:41\n"
)


def stop(ts: int, message: str) -> HookEvent:
    return event("Stop", ts, stop_hook_active=False, last_assistant_message=message)


def at_stop(
    events: list[HookEvent], message: str, when: float = 20, *, whole: bool = True
) -> list[Anomaly]:
    """What the build/test rules say at a Stop carrying `message`: the stop-block findings.
    `whole`: the scripted session begins with its first event (the window holds its first
    edit); else it began an hour before the window."""
    start = events[0].ts if whole and events else at(-60)
    w = window([*events, stop(at(when), message)], start=start)
    kinds = (Kind.BUILD_BROKEN_AFTER_MY_EDIT, Kind.REPEATED_FAILED_BUILD, Kind.TEST_STUCK)
    found = [a for k in kinds for a in RULES[k.value](w, at(when), CFG)]
    return [a for a in found if a.channel == Channel.STOP_BLOCK]


def build_kinds(found: list[Anomaly]) -> list[str]:
    return [a.kind for a in found]


# --- fresh breaks: block whatever the failure count --------------------------------------


def test_a_build_failing_twice_after_the_edit_blocks_at_the_first_stop() -> None:
    # Held-out pattern 1: `npm run build` failed twice on a type error in regenerated
    # types; the agent wrote "successfully implemented" and stopped. tma1 blocked only at
    # the third failure (repeated_failed_build): the error is in a file it never edited.
    events = [
        edit(at(0), API),
        bash_ok(at(1), "npm run gen:types", "wrote src/generated/types.ts"),
        bash_fail(at(2), "npm run build", TSC_OUT),
        bash_fail(at(4), "npm run build 2>&1 | tail -20", TSC_OUT),
    ]
    [a] = at_stop(events, "I have successfully implemented the typed client.")
    assert (a.kind, a.severity, a.subject) == (
        Kind.BUILD_BROKEN_AFTER_MY_EDIT,
        Severity.HIGH,
        "npm run build",
    )
    assert "you are stopping with it failing" in a.evidence
    assert (
        "error TS2322" in a.suggestion and "re-run `npm run build 2>&1 | tail -20`" in a.suggestion
    )
    # One failure is enough ("whatever the failure count").
    assert build_kinds(at_stop(events[:3], "Done.")) == [Kind.BUILD_BROKEN_AFTER_MY_EDIT]


MAKE_TAIL = (
    "cc -O2 -o bin/server obj/main.o obj/net.o -lpthread\n"
    "/usr/bin/ld: obj/net.o: in function `serve':\n"
    "net.c:(.text+0x1a4): undefined reference to `tls_accept'\n"
    "collect2: error: ld returned 1 exit status\n"
    "make[2]: *** [Makefile:31: bin/server] Error 1\n"
    "make[1]: *** [Makefile:12: all] Error 2\n"
)


def test_a_piped_make_ending_in_error_blocks_a_status_working_stop() -> None:
    # Held-out pattern 2: `make -j4 2>&1 | tail -30` ended in `make[2]: *** [...] Error 1`
    # (a masked failure, design §2.8) and the agent said "Status: Working".
    events = [
        edit(at(0), src("src/tls.c")),
        bash_masked(at(2), "make -j4 2>&1 | tail -30", MAKE_TAIL),
    ]
    [a] = at_stop(events, "Status: Working. The TLS listener is wired in.")
    assert (a.kind, a.subject) == (Kind.BUILD_BROKEN_AFTER_MY_EDIT, "make")
    assert "ld returned 1 exit status" in a.suggestion


# --- unverified fixes ---------------------------------------------------------------------

SCRIPT_OUT = (
    "building web bundle…\n"
    "src/widgets/chart.ts:14:7 - error TS2304: Cannot find name 'Series'.\n"
    "build failed\n"
)


def test_a_fix_never_rerun_blocks_even_when_a_narrower_build_passed() -> None:
    # Held-out pattern 3: a project build script failed with errors in the agent's new
    # file; the agent rewrote the file, ran a narrower build that passed, and stopped.
    chart = src("src/widgets/chart.ts")
    events = [
        edit(at(0), chart, tool="Write"),
        bash_fail(at(1), "./scripts/build.sh", SCRIPT_OUT),
        edit(at(3), chart, tool="Write"),
        bash_ok(at(4), "npx tsc --noEmit src/widgets/chart.ts", ""),
    ]
    [a] = at_stop(events, "Rewrote the chart widget; it type-checks now.")
    assert (a.severity, a.subject) == (Severity.HIGH, "script scripts/build.sh")
    assert a.suggestion.startswith("Re-run `./scripts/build.sh`: it failed at ")
    assert a.suggestion.endswith("on errors in src/widgets/chart.ts, which you changed since.")
    assert a.related_files == (chart,)


def test_an_unverified_fix_blocks_once() -> None:
    chart = src("src/widgets/chart.ts")
    events = [
        edit(at(0), chart),
        bash_fail(at(1), "./scripts/build.sh", SCRIPT_OUT),
        edit(at(3), chart),
        stop(at(5), "Fixed the chart."),
        event("UserPromptSubmit", at(8), prompt="and the legend?"),
        edit(at(9), chart),
    ]
    # The Stop at 5 had this to say (blocked or not); the next one does not say it again.
    assert at_stop(events[:4], "Fixed the chart.", when=5)
    assert at_stop(events, "Legend added.") == []


# --- stays silent ---------------------------------------------------------------------------


def test_silent_when_the_final_message_says_it_still_fails() -> None:
    events = [edit(at(0), API), bash_fail(at(2), "npm run build", TSC_OUT)]
    said = "The build still fails on a type error in the generated types; I need the schema."
    assert at_stop(events, said) == []
    why = "`npm run build` fails because the generated types are stale: run the generator."
    assert at_stop(events, why) == []


@pytest.mark.parametrize("kind", sorted(NOT_CHECK_FAILURES - {"fixed"}))
def test_silent_when_the_newest_run_is_no_verdict(kind: str) -> None:
    # The contract with checks/: every failure_kind in NOT_CHECK_FAILURES (invocation
    # errors, coverage-only exits, interruptions, runs with no verdict: the runner crashed
    # on its environment, the sandbox refused) is no failure of the check.
    out = f"{API}:3:1 TypeError: Module.createRequire is not a function"
    crashes = [
        replace(bash_fail(at(i), "npx vitest run", out), failure_kind=kind) for i in (2, 3, 4)
    ]
    # Nor do three of them make a loop (repeated_failed_build) or a stuck test.
    assert at_stop([edit(at(0), API), *crashes], "Implemented and tested.") == []


def test_silent_when_the_runner_is_missing_or_the_sandbox_refuses() -> None:
    # No verdict as the parser classifies it today: the runner not found; a sandbox
    # "Permission denied" with no output of the check.
    missing = bash_fail(at(2), "npx vitest run", "sh: 1: vitest: not found", code=127)
    refused = bash_fail(at(2), "./scripts/build.sh", "bash: ./scripts/build.sh: Permission denied")
    for run in (missing, refused):
        assert run.failure_kind != "exit"
        assert at_stop([edit(at(0), API), run], "All done.") == []


def test_silent_when_the_rerun_after_the_fix_had_no_verdict() -> None:
    # The agent fixed the file and tried again; the sandbox refused the re-run. A block
    # cannot make it pass (the turn-2 rule blocked here: the failure named the file).
    chart = src("src/widgets/chart.ts")
    events = [
        edit(at(0), chart),
        bash_fail(at(1), "./scripts/build.sh", SCRIPT_OUT),
        bash_fail(at(3), "./scripts/build.sh", "bash: ./scripts/build.sh: Permission denied"),
    ]
    assert at_stop(events, "Fixed the chart types.") == []
    assert at_stop(events[:2], "Fixed the chart types.")  # without the re-run: it blocks


def test_silent_when_the_failure_was_there_before_the_first_edit() -> None:
    # Named pre-existing by the agent, or provably so: the same errors before any edit.
    before = bash_fail(at(0), "npm run build", TSC_OUT)
    events = [before, edit(at(1), API), bash_fail(at(3), "npm run build", TSC_OUT)]
    assert at_stop(events, "Added retries to the client.") == []
    fresh = [events[0], events[1], bash_fail(at(3), "npm run build", SCRIPT_OUT)]
    assert build_kinds(at_stop(fresh, "Added retries.")) == [Kind.BUILD_BROKEN_AFTER_MY_EDIT]
    named = "Done. The build's type error in src/generated/types.ts is pre-existing, not mine."
    assert at_stop(events[1:], named) == []


GO_TEST = "go test -v ./internal/monitoring -short"
GO_TEST_OUT = (
    "=== RUN   TestMonitorAlerting\n"
    "    monitor_test.go:331: Alerting tests require more complex setup\n"
    "--- SKIP: TestMonitorAlerting (0.00s)\n"
    "FAIL\nFAIL\tgithub.com/acme/app/internal/monitoring\t3.173s\nFAIL\n"
)


def test_silent_when_another_session_left_the_same_failure_before_this_one_began() -> None:
    # templar c056cf62 21:12: `go test ./internal/monitoring` failed as it had in the
    # previous session (5e052a87, 18:49 and 19:24); the new session never edited
    # monitoring. The project's checks open at the session's start (other sessions' runs,
    # `SessionWindow.failing_at_start`) make it pre-existing (design §2.22).
    old_run = replace(
        bash_fail(at(-120), "go test -short ./internal/monitoring", GO_TEST_OUT), session_id="prev"
    )
    at_start = failing_at([old_run], at(-60), PROJECT)
    assert at_start == {
        "go test": frozenset({"FAIL", "FAIL github.com/acme/app/internal/monitoring #.#s"})
    }  # the skipped test's log line is no error
    # The package passed in this session before its edit: whatever fails now is news,
    # unless it is what the project already had failing when the session began.
    events = [
        bash_ok(at(0), GO_TEST, "ok  \tgithub.com/acme/app/internal/monitoring\t1.2s\n"),
        edit(at(1), API),
        bash_fail(at(2), GO_TEST, GO_TEST_OUT),
    ]

    def stop_with(failing: dict[str, frozenset[str]]) -> list[Anomaly]:
        w = window([*events, stop(at(20), "Fixed the lint warnings.")], start=at(0))
        w.failing_at_start = failing
        return RULES[Kind.BUILD_BROKEN_AFTER_MY_EDIT.value](w, at(20), CFG)

    assert stop_with(at_start) == []
    # Nothing was failing when it began: the same run is a fresh break, and blocks.
    assert build_kinds(stop_with({})) == [Kind.BUILD_BROKEN_AFTER_MY_EDIT]
    # Open at the start with other errors: the new ones are the session's.
    other = {"go test": frozenset({"FAIL github.com/acme/app/internal/server #.#s"})}
    assert build_kinds(stop_with(other)) == [Kind.BUILD_BROKEN_AFTER_MY_EDIT]


PYTEST_OUT = (
    "src/pricing.py:31: in total\n    return sum(i.price for i in items) * rate\n"
    "E   TypeError: unsupported operand type(s) for *: 'int' and 'NoneType'\n"
    "FAILED tests/test_pricing.py::test_total - TypeError: unsupported operand\n"
    "1 failed, 12 passed in 0.40s\n"
)


def test_silent_when_the_failing_test_passed_when_rerun_alone() -> None:
    pricing = src("src/pricing.py")
    events = [
        edit(at(0), pricing),
        bash_fail(at(2), "pytest -q", PYTEST_OUT),
        bash_ok(at(4), "pytest -q tests/test_pricing.py::test_total", "1 passed in 0.05s"),
    ]
    assert at_stop(events, "Pricing fixed; tests pass.") == []
    assert at_stop(events[:2], "Pricing fixed; tests pass.")  # not re-run: it blocks


def test_silent_when_it_stopped_over_the_same_errors_before() -> None:
    # templar-373740ff.chat.json (session 5e052a87): `go test -short ./internal/monitoring`
    # failed the same way before the 19:19 Stop and again at 19:24; the 19:49 Stop must not
    # block on it (the window no longer held the first failures, 18:46). Once is enough.
    pkg_fail = "FAIL\tgithub.com/conneroisu/templar/internal/monitoring\t3.136s\n"
    events = [
        bash_ok(at(-1), "go test -short ./internal/monitoring", "ok"),
        edit(at(0), src("internal/server/server.go")),
        bash_fail(at(1), "go test -short ./internal/monitoring", pkg_fail),
        stop(at(2), "CI is green again."),
        edit(at(4), src("internal/plugins/integration_test.go")),
        bash_fail(at(5), "go test -short ./internal/monitoring", pkg_fail.replace("3.136", "3.2")),
    ]
    assert at_stop(events[:3], "CI is green again.", when=2)  # the first Stop: blocked
    assert at_stop(events, "Done.") == []
    other = bash_fail(at(5), "go test -short ./internal/monitoring", "--- FAIL: TestAlertManager\n")
    assert at_stop([*events[:5], other], "Done.")  # new errors: a fresh break


# --- a window that does not reach back to the session's first edit ---------------------------


def test_no_fresh_break_when_the_window_cannot_tell_it_was_already_failing() -> None:
    # templar-373740ff.chat.json (session 5e052a87), the 19:49 Stop: `go test -short
    # ./internal/monitoring` first failed at 18:46, before the rules' 60-minute window; the
    # session had edited since before it. Nothing in the window shows the package passing:
    # "not already failing before the first edit" cannot be checked, so no block.
    pkg_fail = (
        "--- FAIL: TestAlertManager (0.01s)\n"
        "FAIL\tgithub.com/x/templar/internal/monitoring\t3.136s\n"
    )
    events = [
        edit(at(0), src("internal/server/server.go")),
        bash_fail(at(1), "go test -short ./internal/monitoring", pkg_fail),
    ]
    assert at_stop(events, "Done.", whole=False) == []
    # The whole session in view, and the failure is in code it edited: a fresh break.
    in_edit = "--- FAIL: TestServe (0.01s)\n    server.go:88: nil handler\n" + pkg_fail
    assert at_stop([events[0], bash_fail(at(1), events[1].tool_command or "", in_edit)], "Done.")
    # It does not: a package first seen failing, in code the session never touched.
    assert at_stop(events, "Done.", whole=True) == []
    # A pass in the window shows the check worked here: its failure after the edit is new.
    passed = [bash_ok(at(-1), "go test -short ./internal/monitoring", "ok"), *events]
    [a] = at_stop(passed, "Done.", whole=False)
    assert a.extra["stop"] == "fresh"


def test_an_unverified_fix_still_blocks_when_the_window_starts_mid_session() -> None:
    server = src("internal/server/server.go")
    out = "internal/server/server.go:12:2: undefined: handler\n"
    events = [
        bash_fail(at(1), "go build ./...", out),
        edit(at(2), server),
    ]
    [a] = at_stop(events, "Fixed the handler.", whole=False)
    assert a.extra["stop"] == "unverified"


# --- a test suite never seen working (design §2.22: pre-existing) ----------------------------

SPEC_OUT = (
    "Running 16 tests using 4 workers\n"
    "  1) [chromium] › tests/design.spec.ts:10:11 › Typography › uses font-heading for H1\n"
    "    Error: Timed out 5000ms waiting for expect(locator).toHaveClass(expected)\n"
    "      at tests/design.spec.ts:21:27\n"
    "  1 failed\n  15 passed (41.2s)\n"
)
PYTEST_OTHER = (
    "tests/test_reports.py:40: in test_monthly\n    assert totals == {'jan': 3}\n"
    "E   AssertionError: assert {'jan': 2} == {'jan': 3}\n"
    "FAILED tests/test_reports.py::test_monthly - AssertionError\n1 failed, 30 passed in 2.1s\n"
)


GO_MON_OUT = (
    "=== RUN   TestMonitorHealthChecks\n"
    'level=INFO msg="Health monitor started" component=monitor\n'
    "--- PASS: TestMonitorHealthChecks (0.20s)\n"
    "=== RUN   TestAlertDelivery\n    alerts_test.go:88: expected 2 alerts, got 0\n"
    "--- FAIL: TestAlertDelivery (0.01s)\n"
    "FAIL\nFAIL\tgithub.com/acme/app/internal/monitoring\t3.173s\nFAIL\n"
)


@pytest.mark.parametrize(
    ("edited", "command", "output"),
    [
        # gallifrey-d50e1daf 21:40: lint fixes in components, then a Playwright spec the
        # session never touched failed on typography asserts (its first run).
        ("components/Search.tsx", "npx playwright test tests/design.spec.ts", SPEC_OUT),
        ("src/billing.py", "pytest -q", PYTEST_OTHER),
        ("src/billing.py", "python -m pytest tests/test_reports.py -x", PYTEST_OTHER),
        # templar c056cf62: a passing test's log names `monitor`, the module the session
        # edited elsewhere; only the error lines speak of the failure.
        ("internal/performance/monitor.go", "go test -v ./internal/monitoring", GO_MON_OUT),
    ],
)
def test_silent_when_a_never_seen_working_suite_fails_in_code_the_session_did_not_touch(
    edited: str, command: str, output: str
) -> None:
    events = [edit(at(0), src(edited)), bash_fail(at(2), command, output)]
    assert at_stop(events, "Done: the lint warnings are fixed.") == []
    # Seen working before the edit: the failure is news, and the session's.
    baseline = bash_ok(at(-1), command, "16 passed (40.1s)\n")
    [a] = at_stop([baseline, *events], "Done: the lint warnings are fixed.")
    assert a.extra["stop"] == "fresh"


def test_a_first_test_run_failing_in_an_edited_file_or_on_a_compile_error_still_blocks() -> None:
    # The failure points into what the session edited: its break, baseline or not.
    billing = src("src/billing.py")
    in_edit = PYTEST_OTHER.replace(
        "E   AssertionError", "src/billing.py:12: in total\nE   AssertionError"
    )
    events = [edit(at(0), billing), bash_fail(at(2), "pytest -q", in_edit)]
    assert build_kinds(at_stop(events, "Done.")) == [Kind.BUILD_BROKEN_AFTER_MY_EDIT]
    # A test run that does not compile is a broken build, even in a file the session did
    # not edit (a caller of the function it changed).
    go_out = (
        "# github.com/acme/app/internal/api\n"
        "internal/api/handler.go:41:17: not enough arguments in call to store.Save\n"
        "FAIL\tgithub.com/acme/app/internal/api [build failed]\n"
    )
    events = [
        edit(at(0), src("internal/store/store.go")),
        bash_fail(at(2), "go test ./...", go_out),
    ]
    assert build_kinds(at_stop(events, "Done.")) == [Kind.BUILD_BROKEN_AFTER_MY_EDIT]


def test_a_first_test_run_failing_in_a_test_of_an_edited_module_still_blocks() -> None:
    # An assertion fails in the test file only (no frame in the code), but the test is the
    # edited module's: the session changed what it tests.
    out = (
        "tests/test_pricing.py:40: in test_total\n    assert total(items) == 30\n"
        "E   assert 27 == 30\nFAILED tests/test_pricing.py::test_total - assert 27 == 30\n"
        "1 failed, 30 passed in 2.1s\n"
    )
    events = [edit(at(0), src("src/shop/pricing.py")), bash_fail(at(2), "pytest -q", out)]
    assert build_kinds(at_stop(events, "Done.")) == [Kind.BUILD_BROKEN_AFTER_MY_EDIT]
    vitest = (
        " FAIL  src/cart.test.ts > cart > sums the lines\n"
        "AssertionError: expected 27 to be 30\n Test Files  1 failed | 9 passed (10)\n"
    )
    events = [edit(at(0), src("src/cart.ts")), bash_fail(at(2), "npx vitest run", vitest)]
    assert build_kinds(at_stop(events, "Done.")) == [Kind.BUILD_BROKEN_AFTER_MY_EDIT]
