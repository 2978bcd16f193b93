"""`build_broken_after_my_edit`: an open check whose newest failure has an error location in
a file the session edited (design §2.15; turn 1: any failure naming the file within ±10 min)."""

from __future__ import annotations

from rulekit import (
    at,
    bash_fail,
    bash_masked,
    bash_ok,
    bash_refused,
    edit,
    edit_result,
    src,
    window,
)

from tma1.engine.anomaly import Channel, Kind, Severity
from tma1.engine.rules.build_broken_after_my_edit import build_broken_after_my_edit
from tma1.engine.window import RuleConfig

CFG = RuleConfig()
PLUGINS = src("internal/config/plugins.go")
VALIDATION = src("internal/config/validation.go")
BUILD = "go build -o templar main.go"
GO_OUT = (
    "# example.com/templar/internal/config\n"
    'internal/config/plugins.go:4:2: "fmt" imported and not used\n'
    'internal/config/plugins.go:5:2: "strings" imported and not used\n'
)


def run(events: list, now: int) -> list:  # type: ignore[type-arg]
    return build_broken_after_my_edit(window(events), now, CFG)


def test_failure_naming_the_edited_file_is_medium_with_file_and_line() -> None:
    [a] = run([edit(at(0), PLUGINS), bash_fail(at(2), BUILD, GO_OUT)], at(3))
    assert (a.kind, a.severity, a.channel) == (
        Kind.BUILD_BROKEN_AFTER_MY_EDIT,
        Severity.MEDIUM,
        Channel.USER_PROMPT_SUBMIT,
    )
    assert a.subject == "go build"  # the check's identity (design §2.15)
    assert a.related_files == (PLUGINS,)
    assert a.last_evidence_ts == at(2)
    assert "internal/config/plugins.go:4" in a.suggestion
    assert '"fmt" imported and not used' in a.suggestion
    assert "failed 1 time" in a.evidence and "internal/config/plugins.go" in a.evidence


def test_exactly_three_failures_is_high_and_blocks_stop() -> None:
    two = [edit(at(0), PLUGINS), bash_fail(at(1), BUILD, GO_OUT), bash_fail(at(2), BUILD, GO_OUT)]
    [medium] = run(two, at(3))
    assert (medium.severity, medium.channel) == (Severity.MEDIUM, Channel.USER_PROMPT_SUBMIT)
    [high] = run([*two, bash_fail(at(3), BUILD, GO_OUT)], at(4))
    assert (high.severity, high.channel) == (Severity.HIGH, Channel.STOP_BLOCK)
    assert "failed 3 times" in high.evidence
    # The climb is a new finding for suppression: a different stable key.
    assert medium.subject == high.subject
    assert medium.stable_key != high.stable_key


def test_failure_not_naming_the_file_does_not_count() -> None:
    out = "cmd/serve.go:72:4: undefined: NewEnhancedError"
    assert run([edit(at(0), PLUGINS), bash_fail(at(1), BUILD, out)], at(2)) == []


def test_basename_must_be_a_whole_name() -> None:
    main = src("main.go")
    out = "internal/domain.go:3:1: syntax error"
    assert run([edit(at(0), main), bash_fail(at(1), "go vet ./...", out)], at(2)) == []
    # Design §2.15: only error locations name a file; the command naming it
    # (`go build -o templar main.go`) while the errors are in plugins.go does not...
    assert run([edit(at(0), main), bash_fail(at(1), BUILD, GO_OUT)], at(2)) == []
    # ...nor when the tool never ran.
    test_file = src("test/deal.test.ts")
    missing = bash_fail(at(1), "npm test test/deal.test.ts", "sh: vitest: command not found")
    assert run([edit(at(0), test_file), missing], at(2)) == []


def test_a_path_naming_another_directory_is_another_file() -> None:
    config = src("internal/config/config.go")
    other = "cmd/config.go:142:23: undefined: config.ValidateConfigWithDetails"
    assert run([edit(at(0), config), bash_fail(at(1), "go build", other)], at(2)) == []
    own = 'internal/config/config.go:26:2: "strings" imported and not used'
    [a] = run([edit(at(0), config), bash_fail(at(1), "go build", other + "\n" + own)], at(2))
    assert "internal/config/config.go:26" in a.suggestion
    assert "imported and not used" in a.suggestion  # the quote is about this file


def test_file_plumbing_failures_are_not_broken_builds() -> None:
    path = src("src/utils/error-messages.ts")
    out = (
        "error: Your local changes to the following files would be overwritten by merge:\n"
        "\tsrc/utils/error-messages.ts\nAborting"
    )
    assert run([edit(at(0), path), bash_fail(at(1), "git stash pop", out)], at(2)) == []


def test_docs_and_config_are_not_source() -> None:
    for rel in (
        "README.md",
        "package.json",
        "notes.txt",
        ".github/ci.yml",
        "pyproject.toml",
        "Cargo.lock",
        "data.csv",
        "docs/index.rst",
        "conf.yaml",
    ):
        path = src(rel)
        name = rel.rsplit("/", 1)[-1]
        out = f"{name}:3: error: bad"
        assert run([edit(at(0), path), bash_fail(at(1), "make", out)], at(2)) == [], rel


def test_any_failure_in_the_30_minutes_after_the_first_edit_counts() -> None:
    # Turn 1 wanted the failure within ±10 min of an edit; design §2.15: an open check
    # failing after the first edit, within the rule's 30 minutes.
    events = [edit(at(0), PLUGINS), bash_fail(at(10), BUILD, GO_OUT)]
    assert len(run(events, at(11))) == 1
    late = [edit(at(0), PLUGINS), bash_fail(at(25), BUILD, GO_OUT)]
    assert len(run(late, at(26))) == 1
    before = [bash_fail(at(0), BUILD, GO_OUT), edit(at(1), PLUGINS)]
    assert run(before, at(2)) == []  # the failure that prompted the edit


def test_an_edit_after_the_newest_failure_holds_the_finding() -> None:
    # Edits at 0 and 15, failure at 12: the agent is fixing it (pattern 7), nothing to say
    # until the check runs again.
    events = [edit(at(0), PLUGINS), bash_fail(at(12), BUILD, GO_OUT), edit(at(15), PLUGINS)]
    assert run(events, at(16)) == []
    again = [*events, bash_fail(at(17), BUILD, GO_OUT)]
    assert len(run(again, at(18))) == 1


def test_one_finding_per_command_names_every_file_most_recent_failure_first() -> None:
    out_both = GO_OUT + "internal/config/validation.go:375:6: validateConfig redeclared\n"
    out_validation = "internal/config/validation.go:381:6: validateServerConfig redeclared\n"
    lint = "golangci-lint run --enable-only unused"
    lint_out = "internal/config/plugins.go:9:6: func helper is unused (unused)"
    events = [
        edit(at(0), PLUGINS),
        edit(at(0.5), VALIDATION),
        bash_fail(at(1), BUILD, out_both),
        bash_fail(at(2), BUILD, out_validation),
        bash_fail(at(3), lint, lint_out),
    ]
    found = {a.subject: a for a in run(events, at(4))}
    assert set(found) == {"go build", "golangci-lint run"}
    # The newest failure of the check says where it fails now (design §2.15).
    assert found["go build"].related_files == (VALIDATION,)
    assert "internal/config/validation.go:381" in found["go build"].suggestion
    assert found["golangci-lint run"].related_files == (PLUGINS,)
    both = [*events[:2], bash_fail(at(2), BUILD, out_both)]
    [a] = run(both, at(3))
    assert set(a.related_files) == {PLUGINS, VALIDATION}


def test_masked_failures_count_and_refusals_do_not() -> None:
    tsc = "npm run build 2>&1 | head -50"
    path = src("src/objects/people-write.ts")
    out = (
        "> attio-mcp@0.2.0 build\n> tsc\n\n"
        "src/objects/people-write.ts(158,9): error TS2322: Type 'X' is not assignable "
        "to type 'string'.\n"
    )
    masked = [edit(at(0), path), *(bash_masked(at(i), tsc, out) for i in (1, 2, 3))]
    [a] = run(masked, at(4))
    assert a.severity == Severity.HIGH
    assert "src/objects/people-write.ts:158" in a.suggestion
    refused = [edit(at(0), path), *(bash_refused(at(i), "rm people-write.ts") for i in (1, 2, 3))]
    assert run(refused, at(4)) == []


def test_successful_runs_are_not_failures() -> None:
    events = [edit(at(0), PLUGINS), bash_ok(at(1), BUILD, "built main.go")]
    assert run(events, at(2)) == []


def test_edit_that_failed_to_apply_is_no_edit() -> None:
    events = [
        edit(at(0), PLUGINS, tuid="e1"),
        edit_result(at(0.1), PLUGINS, ok=False, tuid="e1"),
        bash_fail(at(1), BUILD, GO_OUT),
    ]
    assert run(events, at(2)) == []


def test_python_traceback_suggestion_names_file_and_line() -> None:
    path = src("app/models.py")
    out = (
        "Traceback (most recent call last):\n"
        '  File "/nonexistent/tma1-rule-tests/proj/app/main.py", line 3, in <module>\n'
        "    from app.models import User\n"
        '  File "/nonexistent/tma1-rule-tests/proj/app/models.py", line 27, in <module>\n'
        "    class User(Base):\n"
        "NameError: name 'Base' is not defined\n"
    )
    # A check script importing the app (`python -m app.main` runs the program: no check).
    [a] = run([edit(at(0), path), bash_fail(at(1), "python scripts/check_imports.py", out)], at(2))
    assert 'models.py", line 27' in a.suggestion
    assert "NameError: name 'Base' is not defined" in a.suggestion


def test_events_after_now_are_not_seen() -> None:
    events = [edit(at(0), PLUGINS), bash_fail(at(2), BUILD, GO_OUT)]
    assert run(events, at(2) - 1) == []


def test_edits_older_than_the_window_give_no_finding_even_with_failures_later() -> None:
    events = [edit(at(0), PLUGINS), bash_fail(at(35), BUILD, GO_OUT)]
    assert run(events, at(36)) == []


def test_npm_echo_of_the_script_is_not_the_output_naming_the_file() -> None:
    test_file = src("test/deal.test.ts")
    out = "> app@1.0.0 test\n> vitest test/deal.test.ts\n\nsh: vitest: command not found"
    fail = bash_fail(at(1), "npm test test/deal.test.ts", out)
    assert run([edit(at(0), test_file), fail], at(2)) == []


def test_among_files_of_one_failure_the_one_the_output_points_into_comes_first() -> None:
    defaults, handlers = src("src/config/defaults.ts"), src("src/handlers/shared.ts")
    cmd = "npx tsc --noEmit src/config/defaults.ts src/handlers/shared.ts"
    out = "src/handlers/shared.ts(125,7): error TS2698: Spread types may only be created."
    events = [edit(at(0), defaults), edit(at(0.5), handlers), bash_fail(at(1), cmd, out)]
    [a] = run(events, at(2))
    # Only the file the errors are in (the command naming both is no error location).
    assert a.related_files == (handlers,)
    assert a.suggestion.startswith("Fix src/handlers/shared.ts:125 ")


def test_long_commands_group_by_check_but_the_suggestion_shows_the_command_run() -> None:
    cmd = "go test ./internal/http ./internal/websocket ./internal/security -run TestUpgrade"
    [a] = run([edit(at(0), PLUGINS), bash_fail(at(1), cmd, GO_OUT)], at(2))
    assert a.subject == "go test"
    assert a.suggestion.endswith(f"then re-run `{cmd}`.")


def test_a_build_that_passed_since_is_not_broken() -> None:
    events = [edit(at(0), PLUGINS), *(bash_fail(at(i), BUILD, GO_OUT) for i in (1, 2, 3))]
    assert len(run(events, at(5))) == 1
    assert run([*events, bash_ok(at(4), BUILD, "")], at(5)) == []
    # Another command passing (`git status`) fixes nothing.
    assert len(run([*events, bash_ok(at(4), "git status")], at(5))) == 1


def test_a_file_named_only_by_a_non_build_step_of_the_command_is_not_blamed() -> None:
    script = src("check-defaults.js")
    cmd = 'npm run build 2>&1 | tail -5 && echo "---" && node check-defaults.js'
    out = "src/utils/matcher.ts(5,30): error TS2307: Cannot find module 'string-similarity'."
    assert run([edit(at(0), script), bash_fail(at(1), cmd, out)], at(2)) == []
