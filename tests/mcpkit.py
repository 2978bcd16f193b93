"""Helpers for the MCP tests: a project on disk, scripted agent sessions, and the real
`tma1 mcp` subprocess driven by the SDK's stdio client."""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import anyio
from conftest import LiveServer
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult

T = TypeVar("T")

TOOL_NAMES = {
    "get_anomalies",
    "get_session_state",
    "get_external_changes",
    "get_session_bundle",
    "dismiss_anomaly",
    "confirm_anomaly",
}
FAILING_TEST = "tests/test_calc.py::test_add"
FAILING_OUTPUT = f"Exit code 1\n===== FAILURES =====\nFAILED {FAILING_TEST} - assert 3 == 4\n"


def make_project(root: Path) -> Path:
    """A directory that `project_for` takes as a git top level."""
    (root / ".git").mkdir(parents=True, exist_ok=True)
    (root / "src").mkdir(exist_ok=True)
    return root


def event(session: str, cwd: Path, name: str, **fields: Any) -> dict[str, Any]:
    return {"session_id": session, "hook_event_name": name, "cwd": str(cwd), **fields}


def post(live: LiveServer, payload: Mapping[str, Any], advance_ms: int = 1_000) -> str:
    """Post one hook event as the agent would; returns what the agent was told."""
    live.service.clock.advance(advance_ms)  # type: ignore[attr-defined]
    r = live.hook(dict(payload))
    assert r.status_code == 200, r.text
    return r.text


Agent = tuple[str, Path]  # (session id, cwd)


def post_all(
    live: LiveServer, agents: list[Agent], name: str, advance_ms: int = 1_000, **fields: Any
) -> list[str]:
    """The same event from every agent at the same instant (twin sessions stay twins)."""
    live.service.clock.advance(advance_ms)  # type: ignore[attr-defined]
    answers = []
    for session, cwd in agents:
        r = live.hook(event(session, cwd, name, **fields))
        assert r.status_code == 200, r.text
        answers.append(r.text)
    return answers


def stuck_session(live: LiveServer, *agents: Agent) -> None:
    """Each agent edits src/calc.py, then the same test fails in three runs: test_stuck
    (digest) and repeated_failed_build (Stop block) are due."""
    group = list(agents)
    post_all(live, group, "SessionStart", source="startup")
    for session, cwd in group:  # the edited path differs per project
        edit_in = {"file_path": str(cwd / "src" / "calc.py"), "old_string": "a", "new_string": "b"}
        r = live.hook(event(session, cwd, "PreToolUse", tool_name="Edit", tool_input=edit_in))
        assert r.status_code == 200
    live.service.clock.advance(1_000)  # type: ignore[attr-defined]
    for session, cwd in group:
        edit_in = {"file_path": str(cwd / "src" / "calc.py"), "old_string": "a", "new_string": "b"}
        r = live.hook(
            event(
                session,
                cwd,
                "PostToolUse",
                tool_name="Edit",
                tool_input=edit_in,
                tool_response={"filePath": edit_in["file_path"], "success": True},
            )
        )
        assert r.status_code == 200
    cmd = {"command": "pytest -q tests/test_calc.py"}
    for _ in range(3):
        post_all(live, group, "PreToolUse", tool_name="Bash", tool_input=cmd)
        post_all(
            live,
            group,
            "PostToolUseFailure",
            advance_ms=20_000,
            tool_name="Bash",
            tool_input=cmd,
            error=FAILING_OUTPUT,
        )


def mcp_env(port: int | LiveServer, **extra: str) -> dict[str, str]:
    """`tma1 mcp`'s environment: a LiveServer's port and data dir (the token is there), or
    a bare port (no server, or a stranger: no token either)."""
    env = {"PYTHONUNBUFFERED": "1", "TMA1_HOST": "127.0.0.1"}
    if isinstance(port, LiveServer):
        env["TMA1_DATA_DIR"] = str(port.settings.data_dir)
        port = port.port
    env["TMA1_PORT"] = str(port)
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    env.update(extra)
    return env


def with_mcp(
    cwd: Path,
    env: Mapping[str, str],
    body: Callable[[ClientSession], Awaitable[T]],
    *,
    command: str = sys.executable,
    args: tuple[str, ...] = ("-m", "tma1.cli", "mcp"),
    stderr_to: Path | None = None,
) -> T:
    """Start `tma1 mcp` as a subprocess, initialise a client session, run `body`; its
    stderr goes to `stderr_to` (default: nowhere)."""

    async def main() -> T:
        params = StdioServerParameters(command=command, args=list(args), env=dict(env), cwd=cwd)
        with open(stderr_to or os.devnull, "w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                with anyio.fail_after(60):
                    return await body(session)

    return anyio.run(main)


def text_of(result: CallToolResult) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)
