"""Issue 15, flaw 4: a check is open until a *covering* run passes (design §2.15).

Excerpt from claude-code/big3-09e1018a.chat.json (session e165f9ba, 21:42–21:53): the
whole `pnpm test --run` suite fails three times, then one of its files is re-run alone
and the output (grepped for "Error:") exits 0. That narrow run says nothing of the other
failing files; the suite is still open.
"""

from __future__ import annotations

from rulekit import at, bash_fail, bash_ok, window

from tma1.engine.checkruns import check_runs

SUITE_OUT = (
    "FAIL test/MultiAgentApiService.test.ts [ test/MultiAgentApiService.test.ts ]\n"
    "FAIL test/agent/persistence-property-tests.test.ts\n"
    "Test Files  3 failed | 41 passed (44)\n"
)


def _open(events: list) -> dict[str, str]:  # type: ignore[type-arg]
    runs = check_runs(window(events), at(10))
    return {ident: r.event.tool_command or "" for ident, r in runs.open_failures.items()}


def test_a_narrow_pass_does_not_close_the_failing_suite() -> None:
    events = [
        bash_fail(at(0), "pnpm test --run 2>&1 | tail -100", SUITE_OUT),
        bash_fail(at(1), 'pnpm test --run 2>&1 | grep -E "FAIL test/" | head -20', SUITE_OUT),
        bash_ok(
            at(2),
            'pnpm test test/MultiAgentApiService.test.ts --run 2>&1 | grep -A 5 "Error:"',
            "",
        ),
    ]
    assert list(_open(events).values()) == [
        'pnpm test --run 2>&1 | grep -E "FAIL test/" | head -20'
    ]


def test_a_covering_pass_closes_it_and_the_newest_open_failure_stands_for_the_check() -> None:
    suite_fail = bash_fail(at(0), "pnpm test --run", SUITE_OUT)
    assert _open([suite_fail, bash_ok(at(1), "pnpm test --run", "Test Files  44 passed")]) == {}
    narrow_fail = bash_fail(at(2), "pnpm test test/a.test.ts --run", "FAIL test/a.test.ts")
    other_pass = bash_ok(at(3), "pnpm test test/b.test.ts --run", "Test Files  1 passed")
    assert list(_open([suite_fail, narrow_fail, other_pass]).values()) == [
        "pnpm test test/a.test.ts --run"
    ]


# attio-aa5474ad (session 278a2245, 01:27): `npm run build … && node …` failed on the
# build's TS2307; `npm run build` passed at 01:35; the next session's bundle still quoted
# the TS2307 as the chained check's failure.
BUILD_TS = (
    "src/utils/value-matcher.ts(5,30): error TS2307: Cannot find module 'string-similarity' "
    "or its corresponding type declarations.\n"
)


def test_a_chained_run_that_failed_on_the_build_closes_when_the_build_passes() -> None:
    chained = "npm run build 2>&1 | tail -5 && npm run test:offline"
    events = [
        bash_fail(at(0), chained, BUILD_TS),
        bash_ok(at(2), "npm run build 2>&1", "> tsc\n"),
    ]
    assert _open(events) == {}
    # Before the build passed, the chained check was open with the build's error.
    assert list(_open(events[:1]).values()) == [chained]


def test_a_chained_run_that_failed_in_its_tests_stays_open_when_the_build_passes() -> None:
    chained = "npm run build && npm run test:offline"
    tests_out = "FAIL test/config/deal-defaults.test.ts > applies defaults\nTests  1 failed\n"
    events = [
        bash_fail(at(0), chained, tests_out),
        bash_ok(at(2), "npm run build", "> tsc\n"),
    ]
    assert list(_open(events).values()) == [chained]
