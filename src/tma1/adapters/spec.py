"""`AgentSpec`: everything tma1 knows about one agent, declared once, in its own module.

Each module of `tma1.adapters.agents` exports one `SPEC` (found like the rules are:
`tma1.engine.rules`). Install reads its registrations (`adapter`), the hook script its
query, the server its payload dialect (`normalize`: the agent's payload into tma1's event
model, Claude Code's) and its answer envelopes, doctor its command and its own checks,
the transcript sensor the format of its transcript, replay its recorded-session formats.
Adding an agent is one module there plus its replay converter and tests (docs/hooks.md,
"Adding an agent").
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from tma1.adapters.base import Adapter

# The agent's payload (a dict, as decoded) → the same in tma1's (Claude Code's) shape.
Dialect = Callable[[dict[str, Any]], dict[str, Any]]
# A decoded JSON value of a recorded file → True when it looks like this format's record.
Vote = Callable[[dict[str, Any]], bool]


def _as_is(payload: dict[str, Any]) -> dict[str, Any]:
    return payload


@dataclass(frozen=True, slots=True)
class Envelope:
    """How one kind of hook answer wraps what the engine says (`tma1.engine.digest`'s
    `Envelope` protocol): the engine writes the text, the agent's envelope its form.

    - `context`: "plain" — a UserPromptSubmit's context as plain stdout, every other
      event's as `hookSpecificOutput.additionalContext` (Claude Code's command hook);
      "hook_specific" — always `hookSpecificOutput`; "top_level" — a top-level
      `additionalContext` (Copilot CLI ignores it inside `hookSpecificOutput`).
    - `stop`: "context" — the Stop block as `hookSpecificOutput` context (a nudge, no
      "stop hook problem" notice); "decision" — `{"decision":"block","reason":…}`.
    - `event_names`: tma1's event name → the agent's own, where an answer names it.
    - `compact`: a PreCompact's plain stdout reaches the compaction prompt (only Claude
      Code's command hook; docs/hooks.md, "The Stop answer")."""

    context_form: Literal["plain", "hook_specific", "top_level"] = "hook_specific"
    stop_form: Literal["context", "decision"] = "decision"
    event_names: Mapping[str, str] = field(default_factory=dict)
    compact: bool = False

    def context(self, hook_event_name: str, text: str) -> str:
        if not text:
            return ""
        if self.context_form == "top_level":
            return json.dumps({"additionalContext": text}, ensure_ascii=False)
        if self.context_form == "plain" and hook_event_name == "UserPromptSubmit":
            return text
        name = self.event_names.get(hook_event_name, hook_event_name)
        return json.dumps(
            {"hookSpecificOutput": {"hookEventName": name, "additionalContext": text}},
            ensure_ascii=False,
        )

    def stop_block(self, reason: str) -> str:
        if self.stop_form == "decision":
            return json.dumps({"decision": "block", "reason": reason}, ensure_ascii=False)
        return self.context("Stop", reason)


class DoctorLine(NamedTuple):
    """One line of `tma1 doctor` an agent adds about itself (status: ok, warn, FAIL, ?)."""

    status: str
    name: str
    message: str
    fix: str = ""


@dataclass(frozen=True, slots=True)
class ReplayFormat:
    """A recorded-session format of this agent `tma1 replay` reads.

    `vote` tells a record of it apart by content; formats are asked in `order` (lowest
    first) and a record goes to the first that claims it, so a loose format (one that
    matches common type names) takes a high order. `converter` names the module whose
    `convert(records) -> Converted` reads it ("tma1.replay.codex_rollout"): imported only
    by replay, so installing or serving never loads replay's converters. `title` names
    such files in `tma1 replay --help` and its "format not recognised" note ("Codex
    rollouts"); `where` says, in the help, where or how they are made."""

    name: str
    vote: Vote
    converter: str
    order: int = 50
    title: str = ""
    where: str = ""


@dataclass(frozen=True, slots=True)
class AgentSpec:
    name: str  # `--adapter NAME`, the hook script's name, `?source=NAME`
    title: str
    executable: str  # its command: `install --adapter all` and doctor look for it on PATH
    # (settings, env, **options) → the registrations `tma1 install` applies.
    adapter: Callable[..., Adapter]
    envelope: Envelope  # its hook script's answers (`?envelope=NAME`)
    # Its place in lists (install's choices, the docs' table); then by name.
    order: int = 100
    normalize: Dialect = _as_is
    # The agent's own hook events → tma1's, and its tool names → tma1's (Read, Edit,
    # Write, Bash); what `normalize` renames, kept here for the docs and the tests.
    events: Mapping[str, str] = field(default_factory=dict)
    tools: Mapping[str, str] = field(default_factory=dict)
    # Other `?source=` values meaning this agent ("" for the agent whose script sends none).
    sources: tuple[str, ...] = ()
    # Other `?envelope=` values and their forms (Claude Code's http transport: "json").
    envelopes: Mapping[str, Envelope] = field(default_factory=dict)
    # The query its hook script posts with; None: `?source=NAME&envelope=NAME`.
    script_query: str | None = None
    # The format of the transcript its hooks name (`transcript_path`) that the transcript
    # sensor reads: "claude", "codex", or None (told apart by content).
    transcript: str | None = None
    # Whether a PreCompact answered in a plain-text form (a hook posted with no envelope)
    # may carry the summary instructions: False where that was never measured (Codex).
    compact_in_plain_form: bool = True
    # Lines `tma1 doctor` adds once its hooks are installed (Codex: trust), given the env.
    doctor: Callable[[Mapping[str, str] | None], list[DoctorLine]] | None = None
    replay: tuple[ReplayFormat, ...] = ()

    @property
    def query(self) -> str:
        if self.script_query is not None:
            return self.script_query
        return f"?source={self.name}&envelope={self.name}"
