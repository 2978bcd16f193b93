"""`test_stuck`: one test id in 3+ failing outputs within 30 minutes."""

from __future__ import annotations

from rulekit import PROJECT, at, bash_fail, bash_masked, bash_ok, bash_refused, window

from tma1.engine.anomaly import Channel, Kind, Severity
from tma1.engine.rules.test_stuck import test_stuck as rule
from tma1.engine.window import RuleConfig

CFG = RuleConfig()
PYTEST = "pytest -q tests/test_billing.py"
PYTEST_OUT = (
    "F.                                                                       [100%]\n"
    "=================================== FAILURES ===================================\n"
    "________________________________ test_invoice_total ____________________________\n"
    "    def test_invoice_total():\n"
    ">       assert total([1, 2]) == 4\n"
    "E       assert 3 == 4\n"
    "tests/test_billing.py:12: AssertionError\n"
    "=========================== short test summary info ============================\n"
    "FAILED tests/test_billing.py::test_invoice_total - assert 3 == 4\n"
    "1 failed, 1 passed in 0.03s\n"
)
TID = "tests/test_billing.py::test_invoice_total"


def run(events: list, now: int) -> list:  # type: ignore[type-arg]
    return rule(window(events), now, CFG)


def test_three_failing_runs_of_one_test_fire_two_do_not() -> None:
    two = [bash_fail(at(1), PYTEST, PYTEST_OUT), bash_fail(at(2), PYTEST, PYTEST_OUT)]
    assert run(two, at(3)) == []
    [a] = run([*two, bash_fail(at(3), PYTEST, PYTEST_OUT)], at(4))
    assert (a.kind, a.severity, a.channel) == (
        Kind.TEST_STUCK,
        Severity.MEDIUM,
        Channel.USER_PROMPT_SUBMIT,
    )
    assert a.subject == TID
    assert a.last_evidence_ts == at(3)
    assert a.related_files == (f"{PROJECT}/tests/test_billing.py",)
    assert "3 runs" in a.evidence
    assert "assert 3 == 4" in a.suggestion


def test_one_output_naming_a_test_twice_counts_once() -> None:
    twice = PYTEST_OUT + f"{TID} FAILED\n"
    events = [bash_fail(at(1), PYTEST, twice), bash_fail(at(2), PYTEST, twice)]
    assert run(events, at(3)) == []


def test_different_commands_running_the_same_test_add_up() -> None:
    events = [
        bash_fail(at(1), PYTEST, PYTEST_OUT),
        bash_fail(at(2), "pytest -q -x", PYTEST_OUT),
        bash_fail(at(3), "python -m pytest tests", PYTEST_OUT),
    ]
    [a] = run(events, at(4))
    # Three spellings of one check (design §2.15): `pytest`, counted as one.
    assert "3 runs of `pytest`" in a.evidence


def test_masked_failures_count() -> None:
    cmd = "go test ./internal/services 2>&1 | tail -20"
    out = (
        "--- FAIL: TestServeService_Serve (0.10s)\n"
        "    serve_test.go:40: expected server to start\n"
        "FAIL\n"
        "FAIL\texample.com/app/internal/services\t0.123s\n"
    )
    [a] = run([bash_masked(at(i), cmd, out) for i in (1, 2, 3)], at(4))
    assert a.subject == "TestServeService_Serve"
    assert a.related_files == ()


def test_refusals_never_count() -> None:
    assert run([bash_refused(at(i), PYTEST) for i in (1, 2, 3)], at(4)) == []


def test_thirty_minute_edge() -> None:
    events = [bash_fail(at(m), PYTEST, PYTEST_OUT) for m in (0, 10, 20)]
    assert len(run(events, at(30))) == 1
    assert run(events, at(30) + 1) == []


def test_each_stuck_test_is_its_own_finding() -> None:
    out = "FAILED tests/a.py::test_x - boom\nFAILED tests/b.py::test_y - bang\n"
    only_x = "FAILED tests/a.py::test_x - boom\n"
    events = [bash_fail(at(1), PYTEST, out), bash_fail(at(2), PYTEST, out)]
    events.append(bash_fail(at(3), PYTEST, only_x))
    assert [a.subject for a in run(events, at(4))] == ["tests/a.py::test_x"]
    events.append(bash_fail(at(3.5), PYTEST, out))
    assert sorted(a.subject for a in run(events, at(4))) == [
        "tests/a.py::test_x",
        "tests/b.py::test_y",
    ]


def test_bare_fail_is_no_test_id() -> None:
    events = [bash_fail(at(i), "make test", "FAIL\nmake: *** [test] Error 1") for i in (1, 2, 3)]
    assert run(events, at(4)) == []


def test_a_passing_run_of_the_same_command_unsticks_the_test() -> None:
    events = [bash_fail(at(i), PYTEST, PYTEST_OUT) for i in (1, 2, 3)]
    assert len(run(events, at(5))) == 1
    assert run([*events, bash_ok(at(4), PYTEST, "2 passed in 0.02s")], at(5)) == []


def test_the_test_file_passing_without_the_name_filter_ends_it() -> None:
    # attio-mcp-server (claude-code/attio-7c4ca6ea.chat.json, 2025-08-06 16:34–16:43): one
    # test failed in three `-t` runs; the whole file then passed (13 of 13), yet at 16:47
    # test_stuck said "no run has passed it since".
    cmd = "pytest tests/test_billing.py -k test_invoice_total"
    events = [bash_fail(at(n), cmd, PYTEST_OUT) for n in (1, 2, 3)]
    assert run(events, at(4))
    passed = bash_ok(at(5), "pytest -q tests/test_billing.py", "2 passed in 0.03s")
    assert run([*events, passed], at(6)) == []
