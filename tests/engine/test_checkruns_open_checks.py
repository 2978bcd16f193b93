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


# A chain stops at its first failing step: the step that wrote the error failed, the steps
# before it passed in that very run, the steps after it never ran. Once that step passes
# on its own, what the chain said is no longer true (attio-7c4ca6ea 16:35: the bundle told
# a `lint && format && build && test` chain failing for hours after its Prettier step
# passed, and the lint step was never re-run because it had passed in the chain).
CHAIN = "npm run lint:check && npm run check:format && npm run build && npm run test:offline"
PRETTIER = (
    "> app@1.0.0 lint:check\n> eslint src\n\n✖ 12 problems (0 errors, 12 warnings)\n\n"
    "> app@1.0.0 check:format\n> prettier --check src\n\nChecking formatting...\n"
    "[warn] src/a.ts\n[warn] Code style issues found in the above file. Run Prettier with "
    "--write to fix.\n"
)
RUFF_FMT = (
    "Would reformat: src/app/models.py\n1 file would be reformatted, 40 files left unchanged\n"
)
GO_TESTS = "--- FAIL: TestTotal (0.00s)\nFAIL\tgithub.com/acme/shop/pricing\t0.01s\nFAIL\n"


def test_a_chain_that_failed_at_its_format_step_closes_when_that_step_passes() -> None:
    events = [
        bash_fail(at(0), CHAIN, PRETTIER),
        bash_ok(at(1), "npm run check:format && npm run build 2>&1 | tail -5", "ok"),
    ]
    assert _open(events) == {}
    # The test step never ran in the chain: a later pass of the tests alone is no
    # evidence about the format error.
    tests_only = [events[0], bash_ok(at(1), "npm run test:offline", "Tests  13 passed (13)")]
    assert list(_open(tests_only).values()) == [CHAIN]


def test_other_chains_close_at_their_failing_step_whichever_tool_wrote_it() -> None:
    py = "uv run ruff check . && uv run ruff format --check . && uv run pytest -q"
    go = "go vet ./... && go test ./..."
    cases = [
        (py, RUFF_FMT, "uv run ruff format --check src/app"),  # a covering scope? no: narrower
        (py, RUFF_FMT, "ruff format --check ."),
        (go, GO_TESTS, "go test ./pricing/... -count=1"),
        (go, GO_TESTS, "go test ./..."),
    ]
    closed = [
        not _open([bash_fail(at(0), c, out), bash_ok(at(1), later, "ok")])
        for c, out, later in cases
    ]
    assert closed == [False, True, False, True]


def test_no_step_is_taken_as_passed_where_the_chain_does_not_stop_at_a_failure() -> None:
    # `;` and `||` run on after a failure: the error may be any step's.
    for chain in (
        "npm run lint:check; npm run check:format; npm run test:offline",
        "npm run check:format || npm run lint:check",
    ):
        events = [bash_fail(at(0), chain, PRETTIER), bash_ok(at(1), "npm run check:format", "ok")]
        assert list(_open(events).values()) == [chain]


# --- a failure on a working tree the project no longer has ----------------------------------

SUITE_FAIL = "FAIL test/utils/error-handler.test.ts > maps 404\nTests  7 failed | 733 passed\n"


def test_a_branch_switch_retires_the_failures_before_it() -> None:
    # attio-aaeb53d1 06:43–06:47: the suite failed on the #397 branch's working tree; the
    # agent stashed it and switched to main. What failed was a tree that is gone.
    for switch in (
        "git checkout main",
        "git stash && git checkout fix/issue-397-error-messages",
        "git checkout logs/ && git switch release/2.1",
        "git reset --hard origin/main",
    ):
        events = [bash_fail(at(0), "npm run test:offline", SUITE_FAIL), bash_ok(at(1), switch, "")]
        assert _open(events) == {}, switch
        # A failure after the switch is about the tree in front of the agent.
        later = [*events, bash_fail(at(2), "npm run test:offline", SUITE_FAIL)]
        assert list(_open(later)) == ["npm run test:offline"], switch


def test_what_keeps_the_tree_is_no_switch() -> None:
    failing = bash_fail(at(0), "npm run test:offline", SUITE_FAIL)
    for keeps in (
        "git checkout -b fix/issue-398",  # a new branch keeps the tree
        "git checkout -- src/a.ts",  # one file restored
        "git checkout src/objects/people-write.ts",
        "git checkout logs/",
        "git reset HEAD src/a.ts",
        "git status && git log --oneline -3",
    ):
        assert list(_open([failing, bash_ok(at(1), keeps, "")])) == ["npm run test:offline"], keeps
    # A switch that failed (`error: Your local changes … would be overwritten`) left the tree.
    refused = bash_fail(
        at(1), "git checkout main", "error: Your local changes would be overwritten"
    )
    assert list(_open([failing, refused])) == ["npm run test:offline"]
