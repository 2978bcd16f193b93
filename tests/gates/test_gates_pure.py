"""The pure decisions behind the gates, without a database."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tma1.checks import file_of_test_id
from tma1.engine.following import (
    Call,
    EmitRef,
    is_git_commit,
    is_read_of,
    same_file,
    window_of,
)
from tma1.gates.budget import budget_report
from tma1.gates.common import (
    FOLLOW_MIN_EMITS,
    KINDS,
    PRECISION_MIN_LABELS,
    day_label,
    overall_pass,
    overall_status,
    sample_verdict,
    since_for_days,
    split_stable_key,
)
from tma1.gates.follow import followed
from tma1.gates.precision import precision_figures
from tma1.gates.table import status_text
from tma1.server.routes_sessions import session_timeline


def pre(i: int, tool: str, **kw: object) -> Call:
    return Call(i * 1000, i, "PreToolUse", tool, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("/r/a.py", "/r/a.py", True),
        ("/r/a.py", "/s/a.py", False),
        ("a.py", "/r/a.py", True),
        ("./src/a.py", "/r/src/a.py", True),
        ("src/a.py", "/r/xsrc/a.py", False),  # a tail match must start at a separator
        ("C:\\r\\a.py", "C:/r/a.py", True),
        ("", "/r/a.py", False),
    ],
)
def test_same_file(a: str, b: str, same: bool) -> None:
    assert same_file(a, b) is same
    assert same_file(b, a) is same


def test_reads_count_read_tools_and_shell_printing() -> None:
    files = ["/r/app/models.py"]
    assert is_read_of(pre(1, "Read", file_path="/r/app/models.py"), files)
    assert not is_read_of(pre(1, "Edit", file_path="/r/app/models.py"), files)
    assert is_read_of(pre(1, "Bash", command="sed -n 1,80p app/models.py"), files)
    assert is_read_of(pre(1, "shell", command="cat '/r/app/models.py'"), files)
    assert not is_read_of(pre(1, "Bash", command="rm app/models.py"), files)
    # A PostToolUse of a Read is not a tool call.
    assert not is_read_of(Call(1, 1, "PostToolUse", "Read", "/r/app/models.py"), files)


@pytest.mark.parametrize(
    ("command", "commit"),
    [
        ("git commit -m x", True),
        ("git add -A && git commit -am 'wip'", True),
        ("git -C /r commit -m x", True),
        ("git log --grep commit", False),
        ("echo git commitment", False),
    ],
)
def test_git_commit(command: str, commit: bool) -> None:
    assert is_git_commit(pre(1, "Bash", command=command)) is commit


@pytest.mark.parametrize(
    ("test_id", "path"),
    [
        ("tests/test_x.py::test_a", "tests/test_x.py"),
        ("./spec/a_spec.rb:12", "./spec/a_spec.rb"),  # rspec's own id, as it is
        ("./pkg/a_test.go:12", "pkg/a_test.go"),  # a guess: the head, no `./`, no line
        ("src/cart.test.ts", "src/cart.test.ts"),
        ("TestParse", None),
        ("test_x (mod.Class)", None),
    ],
)
def test_test_file_of(test_id: str, path: str | None) -> None:
    assert file_of_test_id(test_id, guess=True) == path


def test_stable_key_subject_may_contain_pipes() -> None:
    key = "repeated_failed_build|high|npm test | tail -30"
    assert split_stable_key(key) == ("repeated_failed_build", "high", "npm test | tail -30")
    assert split_stable_key("context_pressure|medium|") == ("context_pressure", "medium", "")


def test_window_runs_until_the_next_tool_call() -> None:
    calls = [pre(1, "Read"), pre(2, "Read"), Call(2500, 99, "PreCompact"), pre(3, "Read")]
    assert window_of(calls, 2) == calls[:3]  # the compaction before the 3rd call is in
    assert window_of(calls, 1) == calls[:1]
    emit = EmitRef(1, 0, "s", "context_pressure", "")
    assert followed(emit, calls, 2) is True
    assert followed(emit, calls, 1) is False


def test_absence_needs_an_observed_call() -> None:
    emit = EmitRef(1, 0, "s", "repeated_failed_build", "make test")
    assert followed(emit, [], 5) is False
    assert followed(emit, [pre(1, "Read", file_path="/r/Makefile")], 5) is True
    # The SQL layer passes only relevant calls, and says whether any call happened.
    assert followed(EmitRef(1, 0, "s", "repeated_failed_build", "make", acted=True), [], 5)


def test_budget_report_fills_every_day_and_kind() -> None:
    day = 86_400_000
    now = 20 * day + 5
    since = since_for_days(now, 3)
    assert since == 18 * day
    rep = budget_report(
        [("test_stuck", 20, 6), ("test_stuck", 18, 1), ("unknown_kind", 19, 2)],
        since=since,
        now_ms=now,
        days=3,
        budget=5,
    )
    assert rep["day_labels"] == [day_label(18), day_label(19), day_label(20)]
    assert len(rep["per_day"]) == 3 * (len(KINDS) + 1)  # every rule's kind and the unknown one
    assert rep["kinds"]["test_stuck"] == {
        "total": 7,
        "max_per_day": 6,
        "days_over": 1,
        "pass": False,
        "status": "fail",
    }
    assert rep["kinds"]["unknown_kind"]["pass"] is True
    assert rep["pass"] is False


def test_precision_and_overall_pass() -> None:
    assert precision_figures(["tp"] * 7 + ["fp"] * 3)["pass"] is True  # exactly 70 %
    assert precision_figures(["tp"] * 2 + ["fp"])["precision"] == 0.6667
    assert precision_figures([])["pass"] is None
    assert overall_pass([None, True]) is True
    assert overall_pass([True, False, None]) is False
    assert overall_pass([None, None]) is None


def test_below_the_minimum_sample_a_gate_gives_no_verdict() -> None:
    one_fp = precision_figures(["fp"])
    assert (one_fp["pass"], one_fp["status"], one_fp["n"]) == (None, "not_enough_data", 1)
    assert status_text(one_fp) == "not enough data (n = 1)"
    nine = precision_figures(["fp"] * (PRECISION_MIN_LABELS - 1))
    assert nine["status"] == "not_enough_data"
    ten = precision_figures(["fp"] * PRECISION_MIN_LABELS)
    assert (ten["pass"], ten["status"]) == (False, "fail")
    assert status_text(ten) == "FAIL"
    assert status_text(precision_figures([])) == "n/a"
    assert sample_verdict(0.0, 0.3, FOLLOW_MIN_EMITS - 1, FOLLOW_MIN_EMITS)["pass"] is None
    assert sample_verdict(0.0, 0.3, FOLLOW_MIN_EMITS, FOLLOW_MIN_EMITS)["status"] == "fail"
    assert sample_verdict(0.3, 0.3, FOLLOW_MIN_EMITS, FOLLOW_MIN_EMITS)["status"] == "pass"
    assert overall_status(["no_data", "not_enough_data"]) == "not_enough_data"
    assert overall_status(["pass", "not_enough_data", "fail"]) == "fail"
    assert overall_status([]) == "no_data"


def test_timeline_items_carry_their_sub_agent_lane() -> None:
    def row(i: int, **kw: object) -> dict[str, object]:
        base: dict[str, object] = {
            "id": i,
            "ts": i * 10,
            "event_type": "PreToolUse",
            "tool_name": "Read",
            "tool_use_id": f"u{i}",
            "tool_file_path": "/a",
            "tool_command": None,
            "failure_kind": None,
            "tool_error_summary": None,
            "metadata": None,
        }
        return {**base, **kw}

    items = session_timeline(
        [
            row(1),
            row(2, metadata='{"agent_id": "sub-1", "agent_type": "Explore"}'),
            row(3, agent_id="sub-2", agent_type="general"),  # the future column wins
            row(4, metadata="not json"),
            row(5, metadata='{"agent_id": {"odd": 1}}'),
        ]
    )
    lanes = [(i["agent_id"], i["agent_type"]) for i in items]
    assert lanes == [
        (None, None),
        ("sub-1", "Explore"),
        ("sub-2", "general"),
        (None, None),
        (None, None),
    ]


def test_session_timeline_joins_pre_and_post() -> None:
    def row(i: int, et: str, use: str | None = None, **kw: object) -> dict[str, object]:
        base = {
            "id": i,
            "ts": i * 10,
            "event_type": et,
            "tool_name": "Bash",
            "tool_use_id": use,
            "tool_file_path": None,
            "tool_command": "make",
            "failure_kind": None,
            "tool_error_summary": None,
        }
        return {**base, **kw}

    items = session_timeline(
        [
            row(1, "UserPromptSubmit", tool_name=None, tool_command=None),
            row(2, "PreToolUse", "u1"),
            row(3, "PreToolUse", "u2"),
            row(4, "PostToolUseFailure", "u1", failure_kind="exit", tool_error_summary="boom"),
            row(5, "PostToolUse", "u2", failure_kind="masked"),
            row(6, "PostToolUse", None),  # an old log without Pre events
        ]
    )
    assert [i["type"] for i in items] == ["event", "tool", "tool", "tool"]
    assert (items[1]["failed"], items[1]["error"], items[1]["end_ts"]) == (True, "boom", 40)
    assert (items[2]["failed"], items[2]["failure_kind"]) == (True, "masked")
    assert items[3]["failed"] is False and items[3]["end_ts"] == 60


@given(st.integers(min_value=-10_000, max_value=2_900_000))
def test_day_label_is_the_utc_date_of_the_day(day: int) -> None:
    from datetime import UTC, datetime

    from tma1.gates.common import day_label

    expected = datetime.fromtimestamp(day * 86_400, tz=UTC).strftime("%Y-%m-%d")
    assert day_label(day) == expected
