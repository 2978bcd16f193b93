"""`tma1 mcp` as a real subprocess: what it writes to stderr (the agent's MCP log)."""

from __future__ import annotations

from pathlib import Path

from conftest import LiveServer
from mcp import ClientSession
from mcpkit import event, make_project, mcp_env, post, with_mcp


def test_requests_to_the_server_are_not_logged_one_by_one(
    live: LiveServer, tmp_path: Path
) -> None:
    """Issue 28.12: httpx logged each request to the server at INFO."""
    proj = make_project(tmp_path / "proj")
    post(live, event("s1", proj, "SessionStart", source="startup"))
    err = tmp_path / "mcp-stderr.log"

    async def body(s: ClientSession) -> int:
        for _ in range(3):
            await s.call_tool("get_session_state", {})
        return len((await s.list_tools()).tools)

    assert with_mcp(proj, mcp_env(live.port), body, stderr_to=err) == 6
    log = err.read_text()
    assert "tma1 mcp: asking" in log  # it does log, at INFO
    assert "HTTP Request" not in log and "httpx" not in log, log
