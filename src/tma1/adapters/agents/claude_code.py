"""Claude Code: the hook script registered in `~/.claude/settings.json`.

tma1's event model is Claude Code's (tma1.events): its payloads need no dialect. Its
command hook's answers are the plain forms (a UserPromptSubmit's context as plain stdout,
a PreCompact's summary instructions); its http transport (`?envelope=json`) takes JSON
only."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tma1.adapters.base import Adapter
from tma1.adapters.files import agent_dir
from tma1.adapters.hookscript import exec_form, script_name, script_path
from tma1.adapters.mcp_registration import ClaudeMcpRegistration, claude_config_path, mcp_command
from tma1.adapters.registration import JsonHooksRegistration, ScriptRegistration
from tma1.adapters.spec import AgentSpec, Envelope, ReplayFormat
from tma1.config import Settings

NAME = "claude-code"
EVENTS = (
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "UserPromptSubmit",
    "Stop",
    "SessionStart",
    "SessionEnd",
    "PreCompact",
    # Sub-agent lanes (design §2.16): the frames around a Task sub-agent's tool calls.
    "SubagentStart",
    "SubagentStop",
)
# Seconds. The script itself gives up after 0.5 s; this only bounds a wedged shell.
TIMEOUT_S = 5
# Seconds. An http hook has no cap of its own but this (Claude Code's default is 600 s):
# it is what bounds a wedged server. The server answers within its 400 ms insert budget.
HTTP_TIMEOUT_S = 1
# Claude Code sends no SessionStart over http ("HTTP hooks are not supported for
# SessionStart"): it stays the command hook under `--transport http`.
COMMAND_ONLY_EVENTS = frozenset({"SessionStart"})
# Where a session begins or ends (/clear is both) the hook keeps its forked, time-capped
# worker: an agent that leaves stdin open there must not hold the hook up. On every other
# event Claude Code closes stdin once the event is written (tests/agents/ run the hooks
# this way against the real binary), and the hook serves it in one process.
BOUNDED_EVENTS = frozenset({"SessionStart", "SessionEnd"})


def settings_path(env: Mapping[str, str] | None = None) -> Path:
    return agent_dir(env, "CLAUDE_CONFIG_DIR", ".claude") / "settings.json"


def http_handler(settings: Settings, token: str) -> dict[str, Any]:
    """Claude Code's native http hook to tma1 (`tma1 install --transport http`).

    `?transport=http` makes the server answer JSON only (Claude Code rejects any other
    body). The URL names the script file too: that is how install recognises its own
    entry, whatever the host or port. The header is written literally, not through
    `allowedEnvVars`: a `$VAR` header works only when every Claude Code process has that
    variable, and a hook without it is refused (403), an error shown on every event.

    The header is a key derived from the token, not the token: Claude Code sends it to
    whatever listens on the port and shows whatever that answers (it cannot check who
    answers), so a stranger on the port could learn this key and post hook events with
    it, but read nothing (docs/hooks.md, "Who is on the other end")."""
    from tma1.auth.hooktoken import http_hook_key
    from tma1.mcp.api import base_url

    return {
        "type": "http",
        "url": f"{base_url(settings)}/api/hooks?transport=http&hook={script_name(NAME)}",
        "headers": {"X-TMA1-Token": http_hook_key(token)},
        "timeout": HTTP_TIMEOUT_S,
    }


def adapter(
    settings: Settings,
    env: Mapping[str, str] | None = None,
    *,
    transport: str = "command",
    token: str | None = None,
    **_: object,
) -> Adapter:
    """`transport="http"` (with the hook token): every event but SessionStart as a native
    http hook; the command hook (the default) stays silent when tma1 is down."""
    script = script_path(settings, NAME)
    bounded = {"type": "command", **exec_form(script), "timeout": TIMEOUT_S}
    handler = {"type": "command", **exec_form(script, stdin_closes=True), "timeout": TIMEOUT_S}
    per_event: dict[str, dict[str, Any]] = {event: bounded for event in BOUNDED_EVENTS}
    notes = [
        "Claude Code picks up settings.json changes by itself; a session started "
        "before this may need /hooks or a restart to see them."
    ]
    if transport == "http":
        if token is None:
            raise ValueError("the http transport needs the hook token")
        per_event = {event: bounded for event in COMMAND_ONLY_EVENTS}
        handler = http_handler(settings, token)
        notes.append(
            "http transport: Claude Code shows a hook error on every event while tma1 is "
            "not running (the command hook stays silent); `tma1 install` without "
            "--transport http goes back to it. SessionStart stays a command hook."
        )
    return Adapter(
        name=NAME,
        title="Claude Code",
        registrations=[
            ScriptRegistration(path=script, settings=settings, agent=NAME),
            JsonHooksRegistration(
                path=settings_path(env),
                events=EVENTS,
                handler=handler,
                marker=script_name(NAME),
                matcher="",
                label="Claude Code hooks",
                per_event=per_event,
                secret=transport == "http",
            ),
            ClaudeMcpRegistration(path=claude_config_path(env), command=mcp_command(settings)),
        ],
        notes=notes,
    )


# Replay: what `claude -p --output-format stream-json --verbose` prints (snake-case
# `session_id`), and transcripts (`sessionId`/`uuid`). Both match common type names, so
# they are asked after the other agents' formats; stream-json first (its lines carry a
# `uuid` too).
_TRANSCRIPT_TYPES = frozenset({"user", "assistant", "system", "summary", "file-history-snapshot"})
_STREAM_TYPES = frozenset({"system", "assistant", "user", "result"})


def _stream_json(value: dict[str, Any]) -> bool:
    t = value.get("type")
    return t in _STREAM_TYPES and "session_id" in value and "sessionId" not in value


def _transcript(value: dict[str, Any]) -> bool:
    t = value.get("type")
    return t in _TRANSCRIPT_TYPES and ("sessionId" in value or "uuid" in value or t == "summary")


SPEC = AgentSpec(
    name=NAME,
    title="Claude Code",
    executable="claude",
    adapter=adapter,
    order=10,
    # Its script sends no `?source=`; "claude" is accepted too.
    sources=("", "claude"),
    script_query="",
    envelope=Envelope(context_form="plain", stop_form="context", compact=True),
    envelopes={"json": Envelope(context_form="hook_specific", stop_form="context")},
    replay=(
        ReplayFormat(
            "claude-stream-json",
            _stream_json,
            "tma1.replay.claude_stream",
            order=40,
            title="Claude Code stream-json output",
            where="claude -p --output-format stream-json --verbose",
        ),
        ReplayFormat(
            "claude-transcript",
            _transcript,
            "tma1.replay.claude_transcript",
            order=41,
            title="Claude Code transcripts",
            where="JSONL or JSON array",
        ),
    ),
)
