"""Payload → HookEvent: derived fields and every failure marker of design §2.8."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tma1.events import (
    TOOL_INPUT_CAP,
    TOOL_RESULT_CAP,
    PayloadError,
    cap_text,
    capped_text,
    command_prefix,
    is_refusal,
    is_refused_response,
    parse_payload,
    patch_files,
    project_for,
    to_text,
)

BASE = {"session_id": "s1", "cwd": "/nowhere/proj"}


def post(tool_response: Any, command: str = "go build ./...", **extra: Any) -> dict[str, Any]:
    return {
        **BASE,
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_response": tool_response,
        **extra,
    }


# (name, payload, expected event_type, expected failure_kind). A failing check whose output
# says nothing about the code (none, or no failure in it) has no verdict (design §2.21).
FAILURE_TABLE: list[tuple[str, dict[str, Any], str, str | None]] = [
    (
        "native PostToolUseFailure",
        {
            **BASE,
            "hook_event_name": "PostToolUseFailure",
            "tool_name": "Bash",
            "tool_input": {"command": "go test ./..."},
            "error": "Exit code 1\n--- FAIL: TestX",
        },
        "PostToolUseFailure",
        "exit",
    ),
    (
        "older non-zero status text",
        {
            **BASE,
            "hook_event_name": "PostToolUseFailure",
            "tool_name": "Bash",
            "tool_input": {"command": "make"},
            "error": "Command exited with non-zero status code 2",
        },
        "PostToolUseFailure",
        "no_verdict",
    ),
    ("is_error true", post({"stdout": "", "is_error": True}), "PostToolUseFailure", "exit"),
    ("isError true", post({"stdout": "", "isError": True}), "PostToolUseFailure", "exit"),
    ("success false", post({"success": False}), "PostToolUseFailure", "no_verdict"),
    (
        "interrupted true",
        post({"stdout": "", "stderr": "", "interrupted": True}),
        "PostToolUseFailure",
        "no_verdict",
    ),
    ("non-empty error", post({"stdout": "", "error": "boom"}), "PostToolUseFailure", "no_verdict"),
    ("code non-zero", post({"code": 2}), "PostToolUseFailure", "no_verdict"),
    ("exitCode non-zero", post({"exitCode": 1}), "PostToolUseFailure", "no_verdict"),
    ("exit_code non-zero string", post({"exit_code": "127"}), "PostToolUseFailure", "no_verdict"),
    (
        "codex Exit code: N",
        post("Exit code: 1\nWall time: 0.2 seconds\nOutput:\nerror"),
        "PostToolUseFailure",
        "exit",
    ),
    (
        "codex Process exited with code N",
        post("Process exited with code 2\nOutput:\nno such file"),
        "PostToolUseFailure",
        "exit",
    ),
    (
        "masked vitest failure",
        post(
            {"stdout": " FAIL  src/a.test.ts > adds\n Tests  1 failed | 3 passed", "stderr": ""},
            command="npm test 2>&1 | tail -30",
        ),
        "PostToolUse",
        "masked",
    ),
    (
        "masked pytest failure",
        post(
            {"stdout": "FAILED tests/test_x.py::test_y - assert 1 == 2\n1 failed", "stderr": ""},
            command="pytest -q | grep FAIL",
        ),
        "PostToolUse",
        "masked",
    ),
    (
        "masked go failure",
        post(
            {"stdout": "--- FAIL: TestX (0.00s)\nFAIL\tpkg/x\t0.1s"},
            command="go test ./... 2>&1 | head",
        ),
        "PostToolUse",
        "masked",
    ),
    (
        "masked compiler error",
        post({"stdout": "src/a.ts(3,5): error TS2322: nope"}, command="npx tsc --noEmit | head"),
        "PostToolUse",
        "masked",
    ),
]

SUCCESS_TABLE: list[tuple[str, dict[str, Any]]] = [
    ("plain success", post({"stdout": "ok", "stderr": "", "interrupted": False, "isImage": False})),
    (
        "grep no match with returnCodeInterpretation",
        post(
            {
                "stdout": "",
                "stderr": "",
                "interrupted": False,
                "returnCodeInterpretation": "No matches found",
            },
            command="grep -r foo .",
        ),
    ),
    ("exit code zero", post({"exitCode": 0, "stdout": "fine"})),
    ("codex exit code 0", post("Exit code: 0\nOutput:\nall good")),
    (
        "grep over a log is not a test run",
        post({"stdout": "FAIL src/a.test.ts\n2 failed"}, command="grep FAIL build.log"),
    ),
    ("zero failed is no failure", post({"stdout": "10 passed, 0 failed"}, command="pytest -q")),
    ("empty error string", post({"stdout": "x", "error": ""})),
]

REFUSALS: list[tuple[str, dict[str, Any]]] = [
    (
        "blocked by hook",
        {
            **BASE,
            "hook_event_name": "PostToolUseFailure",
            "tool_name": "Bash",
            "tool_input": {"command": "rm -rf /"},
            "error": "Bash operation blocked by hook:\n- nope",
        },
    ),
    ("user refused", post({"error": "The user doesn't want to proceed with this tool use."})),
    ("validation rejection", post("<tool_use_error>String to replace not found</tool_use_error>")),
    (
        "pre-tool hook error",
        {
            **BASE,
            "hook_event_name": "PostToolUseFailure",
            "tool_name": "Edit",
            "tool_input": {"file_path": "/x.go"},
            "error": "PreToolUse:Edit hook error: denied",
        },
    ),
]


@pytest.mark.parametrize(
    ("name", "payload", "event_type", "kind"), FAILURE_TABLE, ids=[row[0] for row in FAILURE_TABLE]
)
def test_failure_markers(
    name: str, payload: dict[str, Any], event_type: str, kind: str | None
) -> None:
    ev = parse_payload(payload, ts=1)
    assert ev.event_type == event_type
    assert ev.failure_kind == kind
    assert ev.tool_success is False
    assert ev.is_failure and not ev.is_success
    # The tool's own error line; an output that is only the agent's framing (`Command
    # exited with non-zero status code 2`) has none (design §2.21).
    if kind != "no_verdict":
        assert ev.tool_error_summary
    assert not (ev.tool_error_summary or "").startswith(("Exit code", "Command exited", "Process"))


@pytest.mark.parametrize(("name", "payload"), SUCCESS_TABLE, ids=[r[0] for r in SUCCESS_TABLE])
def test_successes_stay_successes(name: str, payload: dict[str, Any]) -> None:
    ev = parse_payload(payload, ts=1)
    assert ev.event_type == "PostToolUse"
    assert ev.failure_kind is None
    assert ev.tool_success is True and ev.is_success and not ev.is_failure


@pytest.mark.parametrize(("name", "payload"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refusals_are_not_failures(name: str, payload: dict[str, Any]) -> None:
    ev = parse_payload(payload, ts=1)
    assert not ev.is_failure
    assert not ev.is_success  # nor a success that would resolve a finding
    assert ev.event_type == "PostToolUse"


def test_test_ids_come_from_failures_only() -> None:
    fail = parse_payload(
        post(
            {"stdout": "--- FAIL: TestA (0s)\n--- FAIL: TestA (0s)"}, command="go test ./... | cat"
        ),
        ts=1,
    )
    assert fail.test_ids == ["TestA"]
    ok = parse_payload(post({"stdout": "--- FAIL: TestA (0s)"}, command="cat notes.txt"), ts=1)
    assert ok.test_ids == []


def test_command_prefix_collapses_whitespace_and_cuts_at_60() -> None:
    cmd = "go   build \n  ./...   " + "x" * 100
    assert command_prefix(cmd) == ("go build ./... " + "x" * 100)[:60]
    ev = parse_payload(post({"stdout": ""}, command=cmd), ts=1)
    assert ev.tool_command_prefix is not None and len(ev.tool_command_prefix) == 60


def test_file_paths_for_each_tool() -> None:
    for tool, key in (
        ("Read", "file_path"),
        ("Edit", "file_path"),
        ("Write", "file_path"),
        ("MultiEdit", "file_path"),
        ("NotebookEdit", "notebook_path"),
    ):
        ev = parse_payload(
            {
                **BASE,
                "hook_event_name": "PreToolUse",
                "tool_name": tool,
                "tool_input": {key: "/p/a.py"},
            },
            ts=1,
        )
        assert ev.tool_file_path == "/p/a.py" and ev.tool_files == ["/p/a.py"]


def test_apply_patch_touches_several_files() -> None:
    patch = (
        "*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n"
        "*** Add File: src/b.py\n+new\n*** Delete File: /abs/c.py\n*** End Patch\n"
    )
    ev = parse_payload(
        {
            **BASE,
            "hook_event_name": "PreToolUse",
            "tool_name": "apply_patch",
            "tool_input": {"command": patch},
        },
        ts=1,
        source="codex",
    )
    assert ev.tool_files == ["/nowhere/proj/src/a.py", "/nowhere/proj/src/b.py", "/abs/c.py"]
    assert ev.tool_file_path == "/nowhere/proj/src/a.py"
    assert ev.agent_source == "codex"
    assert patch_files("no patch here", "/x") == []


def test_codex_argv_command() -> None:
    ev = parse_payload(
        {
            **BASE,
            "hook_event_name": "PreToolUse",
            "tool_name": "shell",
            "tool_input": {"command": ["bash", "-lc", "cargo test --all"]},
        },
        ts=1,
    )
    assert ev.tool_command == "cargo test --all"
    ev2 = parse_payload(
        {
            **BASE,
            "hook_event_name": "PreToolUse",
            "tool_name": "shell",
            "tool_input": {"command": ["ls", "-la", "my dir"]},
        },
        ts=1,
    )
    assert ev2.tool_command == "ls -la 'my dir'"


def test_caps_are_utf8_safe() -> None:
    big = "é" * TOOL_RESULT_CAP  # 2 bytes per character
    ev = parse_payload(post({"stdout": big}), ts=1)
    assert ev.tool_result is not None
    assert len(ev.tool_result.encode()) <= TOOL_RESULT_CAP
    assert ev.tool_result.endswith("[truncated]")
    ev2 = parse_payload(
        {
            **BASE,
            "hook_event_name": "PreToolUse",
            "tool_name": "Write",
            "tool_input": {"file_path": "/a", "content": "ü" * TOOL_INPUT_CAP},
        },
        ts=1,
    )
    assert ev2.tool_input is not None and len(ev2.tool_input.encode()) <= TOOL_INPUT_CAP
    assert cap_text("abc", 10) == "abc"


def test_unknown_fields_go_to_capped_metadata_and_stop_flag_survives() -> None:
    ev = parse_payload(
        {
            **BASE,
            "hook_event_name": "Stop",
            "stop_hook_active": True,
            "last_assistant_message": "x" * 20_000,
            "effort": "high",
        },
        ts=1,
    )
    assert ev.stop_hook_active is True
    assert ev.metadata["effort"] == "high"
    assert ev.metadata.get("_truncated") is True
    assert len(str(ev.metadata["last_assistant_message"])) < 5_000


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ([1, 2], "not_object"),
        ("text", "not_object"),
        ({"hook_event_name": "Stop"}, "missing_session_id"),
        ({"session_id": "  ", "hook_event_name": "Stop"}, "missing_session_id"),
        ({"session_id": "s"}, "missing_hook_event_name"),
        ({"session_id": 5, "hook_event_name": "Stop"}, "bad_field_type"),
        ({"session_id": "s", "hook_event_name": "Stop", "cwd": ["x"]}, "bad_field_type"),
        ({"session_id": "s", "hook_event_name": "PreToolUse", "tool_input": [1]}, "bad_field_type"),
        ({"session_id": "s", "hook_event_name": "Stop", "duration_ms": "slow"}, "bad_field_type"),
    ],
)
def test_payload_errors_name_a_reason(payload: Any, reason: str) -> None:
    with pytest.raises(PayloadError) as info:
        parse_payload(payload, ts=1)
    assert info.value.reason == reason


def test_project_is_git_toplevel_never_a_basename(tmp_path: Any) -> None:
    (tmp_path / "a" / "app" / ".git").mkdir(parents=True)
    (tmp_path / "a" / "app" / "src").mkdir()
    (tmp_path / "b" / "app").mkdir(parents=True)
    assert project_for(str(tmp_path / "a" / "app" / "src")) == str(tmp_path / "a" / "app")
    assert project_for(str(tmp_path / "b" / "app")) == str(tmp_path / "b" / "app")


# --- capping without encoding what is cut anyway ---------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=60),
    lambda inner: (
        st.lists(inner, max_size=6)
        | st.dictionaries(st.text(max_size=5) | st.integers().map(str), inner, max_size=6)
    ),
    max_leaves=30,
)


@settings(max_examples=3000, deadline=None)
@given(_JSON, st.integers(min_value=0, max_value=120))
def test_capped_text_is_the_cap_of_the_whole_text(value: Any, limit: int) -> None:
    assert capped_text(value, limit) == cap_text(to_text(value), limit)


# Strings made of refusal markers, their pieces, JSON's escaped characters and the tails
# of its escape sequences, so markers land inside, across and beyond the 400-character head.
_MARKERISH = st.lists(
    st.sampled_from(
        ["operation blocked by hook", "hook error", "hook", " error", "doesn't want to proceed",
         "user doesn't want", "<tool_use_error>", "<tool_use_", "error>", '"', "\\", "\n",
         "\x01", "u00e9", "user", "é", "x" * 90, " ", "n", "t"]
    ),
    max_size=8,
).map("".join)  # fmt: skip
_REFUSALISH = st.recursive(
    st.none() | st.booleans() | st.integers() | _MARKERISH,
    lambda inner: (
        st.lists(inner, max_size=6)
        | st.dictionaries(_MARKERISH | st.integers().map(str), inner, max_size=6)
    ),
    max_leaves=25,
)


@settings(max_examples=3000, deadline=None)
@given(st.one_of(_REFUSALISH, _JSON))
@example(["x" * 388 + "hook error"])  # the marker ends at the head's last characters
@example(["x" * 389 + "hook error"])  # … and one past them
@example({"x" * 380: "", "hook error": 1})
def test_a_response_is_refused_exactly_when_the_head_of_its_text_says_so(value: Any) -> None:
    expected = is_refusal(value if isinstance(value, str) else to_text(value))
    assert is_refused_response(value) == expected


def test_a_huge_read_result_is_capped_like_the_whole_text() -> None:
    content = "line of a big file é\n" * 20_000
    p = {
        "session_id": "s",
        "hook_event_name": "PostToolUse",
        "tool_name": "Read",
        "tool_input": {"file_path": "/r/big.txt", "note": "x" * 50_000},
        "tool_response": {"type": "text", "file": {"filePath": "/r/big.txt", "content": content}},
    }
    ev = parse_payload(p, ts=1)
    whole = to_text(p["tool_response"])
    assert ev.tool_result == cap_text(whole, TOOL_RESULT_CAP)
    assert ev.tool_input == cap_text(to_text(p["tool_input"]), TOOL_INPUT_CAP)
    assert ev.tool_result is not None and ev.tool_result.endswith("…[truncated]")


def _reference_cap(text: str, limit: int) -> str:
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    marker = "…[truncated]"
    return data[: max(0, limit - len(marker.encode()))].decode("utf-8", "ignore") + marker


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab é€𝄞\ud800")), max_size=80), st.integers(0, 90))
def test_cap_text_cuts_at_the_byte_limit_like_encoding_everything(text: str, limit: int) -> None:
    assert cap_text(text, limit) == _reference_cap(text, limit)
