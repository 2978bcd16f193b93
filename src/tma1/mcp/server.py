"""The MCP tools. Each one is a thin call to the running tma1's HTTP API.

The server shares the daemon's live state by asking it, never by opening the database:
`get_anomalies` reads the side-effect-free preview (it never advances suppression and never
writes the emit log), and verdicts go through the same label endpoint the dashboard uses.
Every tool answers; failures become an error result (`isError`) with text the agent can act
on, never an exception that ends the session.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal
from urllib.parse import quote

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from tma1 import __version__
from tma1.clock import epoch_ms
from tma1.mcp import render
from tma1.mcp.api import Tma1Api, Tma1Error, Tma1NotFound

log = logging.getLogger("tma1.mcp")

RECENT_EMITS = 10

# Codex shows only the first line of a server's instructions: it must say on its own what
# tma1 is and when to call it (the rest adds detail).
INSTRUCTIONS = (
    "tma1 watches this coding session for trouble (stale file views, builds you broke, "
    "repeated failing commands, stuck tests, files changed outside, context pressure): "
    "call get_anomalies when something feels off and before you finish.\n"
    "get_session_state gives counts, recent failures and edits; get_external_changes, what "
    "changed outside before you edit it; get_session_bundle, after a compaction or resume, "
    "what is still open. If a finding is wrong, dismiss_anomaly(id, reason); "
    "if it helped, confirm_anomaly(id). Tools act on the newest session in this working "
    "directory unless you pass session_id."
)

SessionArg = Annotated[
    str | None,
    Field(
        description="The agent session to ask about. Default: the newest session whose "
        "project contains this MCP server's working directory.",
        max_length=200,
    ),
]


def _ok(text: str, data: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


class Tools:
    """The tool bodies, separate from registration so tests can call them directly."""

    def __init__(self, api: Tma1Api, *, cwd: str, pinned_session: str | None = None) -> None:
        self.api = api
        self.cwd = cwd
        self.pinned_session = pinned_session

    async def guard(
        self, name: str, body: Callable[[], Awaitable[CallToolResult]]
    ) -> CallToolResult:
        try:
            return await body()
        except Tma1Error as exc:
            log.info("%s: %s", name, exc)
            return _error(str(exc))
        except Exception as exc:  # a bug here must not end the agent's MCP session
            log.exception("%s failed", name)
            return _error(f"tma1 mcp failed inside {name}: {type(exc).__name__}: {exc}")

    async def resolve(self, session_id: str | None) -> dict[str, Any]:
        """{session_id, project, resolved_from}; the argument, the pin, or the cwd's newest."""
        if session_id and session_id.strip():
            return {"session_id": session_id.strip(), "project": None, "resolved_from": "argument"}
        if self.pinned_session:
            return {"session_id": self.pinned_session, "project": None, "resolved_from": "pinned"}
        try:
            found = await self.api.get("/api/agent/resolve", {"cwd": self.cwd})
        except Tma1NotFound as exc:
            raise Tma1Error(f"{exc} Or pass session_id explicitly.") from None
        return {
            "session_id": found["session_id"],
            "project": found.get("project"),
            "resolved_from": f"newest session in a project containing {self.cwd}",
        }

    async def _session_get(self, sid: str, what: str, params: dict[str, Any] | None = None) -> Any:
        """`GET /api/agent/sessions/{sid}/{what}`; a 404 names the unknown session."""
        try:
            return await self.api.get(f"/api/agent/sessions/{quote(sid, safe='')}/{what}", params)
        except Tma1NotFound as exc:
            raise Tma1Error(f"{exc} (session {sid!r} is unknown to tma1)") from None

    # --- tools ---------------------------------------------------------------------------

    async def get_anomalies(self, session_id: str | None) -> CallToolResult:
        session = await self.resolve(session_id)
        sid = session["session_id"]
        preview = await self.api.get("/api/anomalies/preview", {"session_id": sid})
        findings = [f for f in preview.get("findings") or [] if isinstance(f, dict)]
        if not findings and session["resolved_from"] in ("argument", "pinned"):
            # The preview of a session nobody has seen is empty too: say which it is.
            await self._session_get(sid, "state")
        note = None
        emits: list[dict[str, Any]] = []
        try:
            listed = await self.api.get("/api/anomalies", {"session_id": sid, "limit": 200})
            emits = [e for e in render.emit_rows(listed) if e.get("session_id") in (None, sid)]
        except Tma1Error as exc:  # the findings stand on their own; ids are a convenience
            note = str(exc)
        emits.sort(key=lambda e: epoch_ms(e.get("ts")) or 0, reverse=True)
        findings = render.attach_emit_ids(findings, emits, sid)
        recent = emits[:RECENT_EMITS]
        now = epoch_ms(preview.get("now")) or None
        project = session.get("project") or preview.get("project")
        data = {
            "session_id": sid,
            "project": project,
            "resolved_from": session["resolved_from"],
            "now": preview.get("now"),
            "findings": findings,
            "recent_emits": recent,
        }
        if note:
            data["emit_log_error"] = note
        text = render.render_anomalies(sid, project, now, findings, recent, note)
        return _ok(text, data)

    async def get_session_state(self, session_id: str | None) -> CallToolResult:
        session = await self.resolve(session_id)
        state = await self._session_get(session["session_id"], "state")
        state["resolved_from"] = session["resolved_from"]
        return _ok(render.render_state(state), state)

    async def get_external_changes(
        self, session_id: str | None, since: str | None
    ) -> CallToolResult:
        session = await self.resolve(session_id)
        payload = await self._session_get(
            session["session_id"], "external-changes", {"since": since}
        )
        payload["resolved_from"] = session["resolved_from"]
        return _ok(render.render_changes(payload), payload)

    async def get_session_bundle(self, session_id: str | None, source: str) -> CallToolResult:
        session = await self.resolve(session_id)
        bundle = await self._session_get(session["session_id"], "bundle", {"source": source})
        bundle["resolved_from"] = session["resolved_from"]
        return _ok(render.render_bundle(bundle), bundle)

    async def label(self, emit_id: int, label: str, note: str | None) -> CallToolResult:
        try:
            body = {"label": label, "source": "agent"}
            if note:
                body["note"] = note
            answer = await self.api.request("POST", f"/api/anomalies/{emit_id}/label", json=body)
        except Tma1NotFound as exc:
            raise Tma1Error(
                f"{exc} — emit {emit_id} is not in the emit log; get_anomalies lists the ids "
                "of findings delivered to you."
            ) from None
        verdict = "a true positive" if label == "tp" else "a false positive"
        text = (
            f"Recorded your verdict: emit {emit_id} is {verdict}"
            + (f" ({note})" if note else "")
            + ". It counts as an agent label in the precision gate; a human label on the "
            "same emit takes precedence."
        )
        data = {"emit_id": emit_id, "label": label, "source": "agent", "note": note}
        if isinstance(answer, dict):
            data["server"] = answer
        return _ok(text, data)


def build_server(api: Tma1Api, *, cwd: str, pinned_session: str | None = None) -> MCPServer:
    tools = Tools(api, cwd=cwd, pinned_session=pinned_session)
    server: MCPServer = MCPServer(
        "tma1",
        version=__version__,
        instructions=INSTRUCTIONS,
        log_level="WARNING",
    )
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    verdict = ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )

    @server.tool(
        description="What tma1 finds wrong in this session right now — the findings the "
        "next hook would deliver — with evidence, suggestion, related files, since when each "
        "is outstanding, and emit ids for findings already delivered. Read-only: asking never "
        "changes what the hooks will tell you.",
        annotations=read_only,
    )
    async def get_anomalies(session_id: SessionArg = None) -> CallToolResult:
        return await tools.guard("get_anomalies", lambda: tools.get_anomalies(session_id))

    @server.tool(
        description="This session in numbers: tool calls per tool, failures in the last 30 "
        "minutes, recently edited files, context occupancy against tma1's pressure threshold.",
        annotations=read_only,
    )
    async def get_session_state(session_id: SessionArg = None) -> CallToolResult:
        return await tools.guard("get_session_state", lambda: tools.get_session_state(session_id))

    @server.tool(
        description="Files in this project changed behind this session since a time "
        "(default: the session's start), with who changed them: another agent session's id, "
        "or null when no session we know did (an editor, git, a person).",
        annotations=read_only,
    )
    async def get_external_changes(
        session_id: SessionArg = None,
        since: Annotated[
            str | None,
            Field(
                description="Epoch milliseconds or ISO-8601 with a time zone "
                "(2026-01-31T12:00:00Z). Default: the session's start.",
                max_length=64,
            ),
        ] = None,
    ) -> CallToolResult:
        return await tools.guard(
            "get_external_changes", lambda: tools.get_external_changes(session_id, since)
        )

    @server.tool(
        description="The session bundle: what tma1 would tell this session if it started, "
        "resumed or was compacted now — checks failing in the project and who broke them, "
        "this session's unresolved findings, files changed outside since its last event, "
        "other sessions active on the project. Read-only: a preview that emits nothing and "
        "never changes what the hooks will tell you.",
        annotations=read_only,
    )
    async def get_session_bundle(
        session_id: SessionArg = None,
        source: Annotated[
            Literal["startup", "resume", "clear", "compact"],
            Field(description="Which SessionStart to preview (default: resume)"),
        ] = "resume",
    ) -> CallToolResult:
        return await tools.guard(
            "get_session_bundle", lambda: tools.get_session_bundle(session_id, source)
        )

    @server.tool(
        description="Say a delivered finding was wrong (a false positive). `id` is the emit "
        "id from get_anomalies; `reason` says why, in a sentence. Stored as an agent label.",
        annotations=verdict,
    )
    async def dismiss_anomaly(
        id: Annotated[int, Field(ge=1, description="Emit id from get_anomalies")],
        reason: Annotated[str, Field(min_length=1, max_length=2000, description="Why it is wrong")],
    ) -> CallToolResult:
        return await tools.guard("dismiss_anomaly", lambda: tools.label(id, "fp", reason))

    @server.tool(
        description="Say a delivered finding was right and useful (a true positive). `id` is "
        "the emit id from get_anomalies. Stored as an agent label.",
        annotations=verdict,
    )
    async def confirm_anomaly(
        id: Annotated[int, Field(ge=1, description="Emit id from get_anomalies")],
        note: Annotated[
            str | None, Field(max_length=2000, description="Optional: what it helped with")
        ] = None,
    ) -> CallToolResult:
        return await tools.guard("confirm_anomaly", lambda: tools.label(id, "tp", note))

    return server
