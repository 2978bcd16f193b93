"""Issue 15, flaw 1: a Stop that hands a failing check back to the user is not blocked.

The messages marked "excerpt" are cut from the final agent messages of sessions in
../shared/data/sessions (file and time named); the rest are scripted adversaries: a
success announced over a failing check must still block.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rulekit import at, bash_fail, edit, event, src, window

from tma1.checks import check_of
from tma1.engine.anomaly import Channel, Kind, Severity
from tma1.engine.rules import RULES
from tma1.engine.rules._handback import check_terms, hands_back
from tma1.engine.window import RuleConfig
from tma1.events import HookEvent
from tma1.store import Store

CFG = RuleConfig()
CARGO = check_terms(check_of("cargo check", "src-tauri"))  # type: ignore[arg-type]
TSC = check_terms(check_of("npm run compile:ts"))  # type: ignore[arg-type]
PYTEST = check_terms(check_of("pytest tests/test_api.py"))  # type: ignore[arg-type]

# codex/zoqore-rollout-2025-12-09T00-04-14-019b017e-….jsonl, agent_message 14:11:15 (excerpt)
ZOQORE_1411 = (
    "I’m mid-flight in the vault cleanup and warning suppression. Here’s the snapshot:\n\n"
    "- I removed the blanket `#![allow(...)]` from main/frontend and started moving them "
    "into specific modules. Build now fails because some of those allows were placed "
    "incorrectly as inner attributes; I’m cleaning those next.\n"
    "- Synapse duplicate module error fixed by explicitly path-ing `synapse.rs` in `main.rs`."
)
# the same file, 14:12:26 (excerpt)
ZOQORE_1412 = (
    "I started the Vault-first cleanup but hit a big cluster of Synapse build errors. The "
    "top blockers now are in Synapse, not Vault:\n\n- Duplicate tauri commands between "
    "`synapse_enhanced.rs` and `synapse/commands.rs`. These need deduplication (choose one "
    "implementation or gate one set off).\n- `synapse/security.rs` is missing "
    "`serde::{Serialize, Deserialize}` imports."
)
# codex/zoqore-rollout-2025-11-28T03-50-15-019ac9a7-….jsonl, agent_message 05:51:30 (excerpt)
ZOQORE_0551 = (
    "Updates applied:\n- Synced with new coordination strategy: Codex now owns "
    "types/bridges/security. Stayed inside that scope.\n- Re-ran `npm run compile:ts`; "
    "remaining errors are entirely in component/UI land (EmailManager, KanbanBoard, "
    "PersonaPresencePanel, Calendar/Interaction/Sentry screens, FirstRunSetup, etc.). No "
    "further errors in bridges/types.\n\nNext actions (for Claude/Gemini):\n- Fix "
    "component-side issues: union setters, handler hoisting, unknown data guards."
)
# claude-code/templar-373740ff.chat.json, the Stop at 18:57:43 (excerpt): a guess, after
# announcing the CI fixes done — still blocked.
TEMPLAR_1857 = (
    "All CI fixes have been committed. There may still be some remaining linting issues "
    "and test failures in other areas (like monitoring tests)."
)
# claude-code/attio-aa5474ad.chat.json, the Stop at 01:54:02 (excerpt): failures
# explained away under a success claim — still blocked.
ATTIO_0154 = (
    "The test failures are in the new test files we created and are related to mock setup "
    "issues, not actual functionality problems. The implementation is ready for production."
)


def test_the_real_hand_backs_are_read_as_such() -> None:
    assert hands_back(ZOQORE_1411, CARGO)
    assert hands_back(ZOQORE_1412, CARGO)
    assert hands_back(ZOQORE_0551, TSC)


def test_the_real_success_announcements_are_not_hand_backs() -> None:
    lint = check_terms(check_of("golangci-lint run"))  # type: ignore[arg-type]
    offline = check_terms(check_of("npm run test:offline"))  # type: ignore[arg-type]
    assert not hands_back(TEMPLAR_1857, lint)
    assert not hands_back(ATTIO_0154, offline)


ADVERSARIAL = [
    "All tests pass.",
    "Done! All tests pass and everything works.",
    "Fixed the failing build; cargo check is clean now.",
    "The build errors are fixed.",
    "I fixed all remaining warnings; the build compiles.",
    "No errors remain in the build.",
    "The build no longer fails.",
    "Added error handling to main.rs.",
    "The build errors were caused by a stale import; I removed it.",
    "Handled the compile errors from the rename in main.rs.",
    # codex/zoqore-…-019b017e-….jsonl 07:09:42 (excerpt): warnings silenced, not handed back
    "Suppressed remaining build warnings by adding crate-level `#![allow(dead_code)]`.",
    "The build still prints a few pre-existing deprecation warnings.",
    "Moved the build cache setup outside the main loop.",
    "Implemented the retry logic. Want me to commit?",
    "The build still fails in main.rs, but I fixed it and it is ready for production.",
    "There might still be a build error somewhere, I did not check.",
]


def test_success_over_a_failing_build_is_never_a_hand_back() -> None:
    for message in ADVERSARIAL:
        assert not hands_back(message, CARGO), message


def test_a_failure_of_another_kind_of_check_hands_back_nothing() -> None:
    message = "All tests pass, but the build still fails on main.rs."
    assert hands_back(message, CARGO)
    assert not hands_back(message, PYTEST)
    assert not hands_back("The lint run still fails on style issues.", PYTEST)
    # codex/zoqore-…-019ac9a7-….jsonl 23:50:50 (excerpt): about another check by its command
    other = "`npm run compile:ts` currently fails due to many unrelated TypeScript errors."
    assert hands_back(other, TSC)
    assert not hands_back(other, CARGO)
    assert hands_back("`cargo build` still fails on main.rs.", CARGO)  # the same tool


def test_naming_the_file_or_asking_about_the_failure_hands_back() -> None:
    files = check_terms(check_of("pytest"), ["/p/tests/test_api.py"])  # type: ignore[arg-type]
    assert hands_back("test_api.py still has 2 failing cases I could not fix.", files)
    assert hands_back("The suite is failing on the auth fixture — should I mock it?", PYTEST)
    assert not hands_back("Should I also add docs for the api?", PYTEST)


NEUTRAL = st.lists(
    st.sampled_from(
        [
            "I",
            "the",
            "build",
            "tests",
            "updated",
            "added",
            "main.rs",
            "commit",
            "the",
            "refactor",
            "renamed",
            "function",
            "module",
            "and",
            "now",
            "it",
            "compiles",
            "cleanly",
            "documentation",
            "passes",
            "ready",
            ".",
            ";",
            ",",
            "\n",
        ]
    ),
    max_size=40,
).map(" ".join)
FAILING = st.sampled_from(
    [
        "the build still fails",
        "remaining cargo check errors",
        "cargo check is broken",
        "the build has a blocker",
    ]
)
DONE = st.sampled_from(
    ["It is ready for production.", "All builds pass.", "I fixed all errors.", "Everything works."]
)


@settings(max_examples=200, deadline=None)
@given(NEUTRAL)
def test_a_message_with_no_failure_word_never_hands_back(message: str) -> None:
    assert not hands_back(message, CARGO)


@settings(max_examples=200, deadline=None)
@given(NEUTRAL, FAILING, NEUTRAL, DONE)
def test_calling_the_work_done_overrides_any_hand_back(
    before: str, failing: str, after: str, done: str
) -> None:
    assert hands_back(f"{before}\n{failing}.\n{after}", CARGO)
    assert not hands_back(f"{before}\n{failing}.\n{after}\n{done}", CARGO)


# --- the rules at a Stop ---------------------------------------------------------------------

CARGO_OUT = (
    "error[E0753]: expected outer doc comment\n --> src/main.rs:3:1\n"
    'error: could not compile `app` (bin "app") due to 1 previous error\n'
)


def _stop(ts: int, message: str) -> HookEvent:
    return event("Stop", ts, stop_hook_active=False, last_assistant_message=message)


def _session(message: str) -> list[HookEvent]:
    """Scripted after zoqore 019b017e 14:03–14:12: the agent moves `#![allow]` lines in
    main.rs, `cargo check` fails three times on them, and the agent stops."""
    main = src("src-tauri/src/main.rs")
    return [
        edit(at(0), main),
        bash_fail(at(1), "cd src-tauri && cargo check", CARGO_OUT),
        bash_fail(at(2), "cd src-tauri && cargo check 2>&1 | tail -20", CARGO_OUT),
        bash_fail(at(3), "cd src-tauri && cargo check", CARGO_OUT),
        _stop(at(4), message),
    ]


def _kinds(events: list[HookEvent], now: int) -> dict[str, tuple[str, str]]:
    w = window(events)
    found = {}
    for kind in (Kind.REPEATED_FAILED_BUILD, Kind.BUILD_BROKEN_AFTER_MY_EDIT):
        for a in RULES[kind.value](w, now, CFG):
            found[a.kind] = (a.severity, a.channel)
    return found


def test_a_stop_that_hands_the_broken_build_back_is_not_blocked_nor_re_told() -> None:
    events = _session(ZOQORE_1411)
    assert _kinds(events, at(4)) == {}
    # Nor on the next prompt: the user has just read it.
    assert _kinds([*events, event("UserPromptSubmit", at(5), prompt="sounds great")], at(5)) == {}


def test_a_stop_announcing_success_over_the_broken_build_is_blocked() -> None:
    for message in ("Done — the allows are in place and the build is clean.", "", ADVERSARIAL[0]):
        found = _kinds(_session(message), at(4))
        high = (Severity.HIGH.value, Channel.STOP_BLOCK.value)
        assert found == {
            Kind.REPEATED_FAILED_BUILD.value: high,
            Kind.BUILD_BROKEN_AFTER_MY_EDIT.value: high,
        }, message


def test_a_new_failure_after_the_hand_back_is_news_again() -> None:
    events = [
        *_session(ZOQORE_1411),
        bash_fail(at(6), "cd src-tauri && cargo check", CARGO_OUT),
        _stop(at(7), "Finished the vault work."),
    ]
    assert Kind.REPEATED_FAILED_BUILD.value in _kinds(events, at(7))


def test_the_window_read_keeps_a_stops_final_message(store: Store) -> None:
    store.insert_event(_stop(at(0), ZOQORE_1412))
    store.insert_event(event("UserPromptSubmit", at(1), prompt="go", extra_field="x"))
    stop, prompt = store.window_events("sess-main", 0)
    assert stop.metadata["last_assistant_message"] == ZOQORE_1412
    assert prompt.metadata == {}  # the lean read: only a Stop's metadata


# codex/ocodex-rollout-2025-08-24-legacy-format.jsonl, the Stop at 15:39:38 (excerpt): the
# cargo test run failed on tests the sandbox forbids (PTY, TCP bind); the agent said so.
OCODEX_1539 = (
    "Build and tests\n- Formatted and built core.\n- Ran cargo test -p codex-core; most "
    "tests passed. A few environment/sandbox-restricted tests fail in this CLI (PTY and TCP "
    "bind are not permitted here), which is expected and unrelated to this feature. On your "
    "machine, they should pass."
)


def test_failures_named_as_environmental_and_unrelated_hand_back() -> None:
    assert hands_back(OCODEX_1539, check_terms(check_of("cargo test -p codex-core")))  # type: ignore[arg-type]
    assert not hands_back("Make sure the tests don't fail before merging.", PYTEST)


NPM_TEST = check_terms(check_of("npm test"), ["src/cache.ts"])  # type: ignore[arg-type]
NPM_BUILD = check_terms(check_of("npm run build"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("message", "terms"),
    [
        # The failure in other words than "fails": an exit status, red, "errors out",
        # "times out"; a fix denied; an issue owned up to (held-out turn 3: a final
        # message that already said why it failed was blocked).
        ("Done. Note: `npm test` exits non-zero due to 2 flaky network tests.", NPM_TEST),
        ("Implemented the endpoint. Tests are red because the database is down.", NPM_TEST),
        ("Known issue: two tests in the cache suite still time out in this sandbox.", NPM_TEST),
        (
            "The build is failing on a type error in src/api.ts that I haven't resolved yet.",
            NPM_BUILD,
        ),
        ("Heads up: the build errors out on TS2322; I ran out of time to fix it.", NPM_BUILD),
        ("The test run exited with code 1: the e2e specs need a browser this box lacks.", NPM_TEST),
    ],
)
def test_a_failure_said_in_other_words_hands_back(message: str, terms: frozenset[str]) -> None:
    assert hands_back(message, terms)


@pytest.mark.parametrize(
    "message",
    [
        "The flaky cache test no longer times out; all tests pass.",
        "Fixed the test that timed out in CI.",
        "The build no longer errors out.",
        "Added a timeout to the cache client so requests cannot hang.",
    ],
)
def test_a_timeout_fixed_or_only_mentioned_hands_nothing_back(message: str) -> None:
    assert not hands_back(message, NPM_TEST) and not hands_back(message, NPM_BUILD)
