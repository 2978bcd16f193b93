"""Codex CLI: the hook script registered in `~/.codex/hooks.json` ($CODEX_HOME), and
whether Codex trusts it (`trust_state`).

Codex runs a hook only once the user has trusted it. The TUI asks at start-up ("Hooks need
review … Trust all and continue") and records each trusted handler in
`$CODEX_HOME/config.toml`:

    [hooks.state."<hooks.json, canonical path>:<event, snake_case>:<group>:<handler>"]
    trusted_hash = "sha256:<hex>"

where the hash is SHA-256 of the compact, key-sorted JSON of the handler's identity:
`{"event_name": <event>, "hooks": [{"async": …, "command": …, "timeout": …, "type":
"command"}], "matcher": …}` (matcher only where Codex honours one; the timeout as Codex
applies it). A handler whose
identity changed since (another data dir, port or timeout) is untrusted again;
`codex exec` skips untrusted hooks without a word. Measured on Codex 0.171.0 (the hashes
in tests/adapters/test_codex_trust.py are the ones it wrote). tma1 never writes trust:
it only reads it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tma1.adapters.base import Adapter
from tma1.adapters.files import agent_dir
from tma1.adapters.hookscript import script_name, script_path, shell_handler
from tma1.adapters.mcp_registration import CodexMcpRegistration, codex_config_path, mcp_command
from tma1.adapters.registration import JsonHooksRegistration, ScriptRegistration
from tma1.adapters.spec import AgentSpec, DoctorLine, Envelope, ReplayFormat
from tma1.config import Settings

NAME = "codex"
# The Codex events tma1 reads (docs/agent-protocols.md; Codex 0.171's hooks schema has
# these and PermissionRequest, PreModelRequest, Interrupt, which tma1 does not use).
# Codex has no failure event: a failed shell call is a PostToolUse whose exit status is
# in the rollout (design §2.18). SessionEnd ends the session's attribution slack (design
# §2.10); PreCompact/PostCompact start a context epoch (§2.17); SubagentStart/Stop frame
# sub-agent lanes (§2.16).
EVENTS = (
    "SessionStart",
    "PreToolUse",
    "PostToolUse",
    "UserPromptSubmit",
    "Stop",
    "PreCompact",
    "PostCompact",
    "SessionEnd",
    "SubagentStart",
    "SubagentStop",
)
TIMEOUT_S = 5


def hooks_path(env: Mapping[str, str] | None = None) -> Path:
    return agent_dir(env, "CODEX_HOME", ".codex") / "hooks.json"


def adapter(settings: Settings, env: Mapping[str, str] | None = None, **_: object) -> Adapter:
    script = script_path(settings, NAME)
    return Adapter(
        name=NAME,
        title="Codex",
        registrations=[
            ScriptRegistration(path=script, settings=settings, agent=NAME),
            JsonHooksRegistration(
                path=hooks_path(env),
                events=EVENTS,
                handler=shell_handler(script, TIMEOUT_S),
                marker=script_name(NAME),
                # Codex honours matchers only on tool events; no matcher = every tool.
                matcher=None,
                label="Codex hooks",
            ),
            CodexMcpRegistration(path=codex_config_path(env), command=mcp_command(settings)),
        ],
        notes=[TRUST_NOTE],
        # The line `tma1 install` prints on the trust state, and its fix.
        status=lambda: _TRUST_SAYS[trust_state(hooks_path(env).parent)],
    )


TRUST_NOTE = (
    "Codex runs these hooks only once you trust them: start `codex` (the interactive "
    'TUI) once and choose "Trust all and continue" when it shows "Hooks need review". '
    "`codex exec` never asks: it skips untrusted hooks silently. Codex asks again after "
    "any change to tma1's entries (a reinstall with another data dir). "
    "Older Codex versions also need `[features] codex_hooks = true` in config.toml."
)

TrustState = Literal["trusted", "untrusted", "stale", "disabled", "absent"]

# Events whose matcher Codex ignores: their identity carries none.
_NO_MATCHER = frozenset({"user_prompt_submit", "stop"})
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")
_DEFAULT_TIMEOUT_S = 600
# Codex runs a SessionEnd hook for 1 s unless told otherwise, and never longer than 3 s:
# the identity it hashes carries that timeout (measured on 0.171: 5 → 3, none → 1, 1 → 1).
_SESSION_END_TIMEOUT_S = (1, 3)


def event_label(event: str) -> str:
    """Codex's name of a hook event in trust keys: `PreToolUse` → `pre_tool_use`."""
    return _CAMEL.sub("_", event).lower()


def trust_hash(event: str, group: Mapping[str, Any], handler: Mapping[str, Any]) -> str:
    """The `trusted_hash` Codex records when the user trusts `handler` (in `group`, on
    `event`), so a recorded hash that differs means the handler changed since."""
    label = event_label(event)
    given = handler.get("timeout")
    timeout = given if isinstance(given, int) and not isinstance(given, bool) else None
    if label == "session_end":
        default, cap = _SESSION_END_TIMEOUT_S
        timeout = min(default if timeout is None else timeout, cap)
    elif timeout is None:
        timeout = _DEFAULT_TIMEOUT_S
    normalized: dict[str, Any] = {
        "async": bool(handler.get("async", False)),
        "command": handler.get("command"),
        "timeout": max(1, timeout),
        "type": "command",
    }
    if isinstance(handler.get("statusMessage"), str):
        normalized["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": label, "hooks": [normalized]}
    matcher = group.get("matcher")
    if isinstance(matcher, str) and label not in _NO_MATCHER:
        identity["matcher"] = matcher
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class HookTrust:
    """One of tma1's handlers in hooks.json and what Codex's config.toml says of it."""

    event: str
    key: str  # the `[hooks.state."…"]` key
    state: Literal["trusted", "untrusted", "stale", "disabled"]


def hook_trust(codex_home: str | os.PathLike[str]) -> list[HookTrust]:
    """Each tma1 handler in `codex_home`/hooks.json with its trust state (pure: reads
    hooks.json and config.toml, writes nothing). [] when there is none (or the files
    cannot be read)."""
    home = Path(codex_home)
    hooks_file = home / "hooks.json"
    try:
        doc = json.loads(hooks_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    hooks = doc.get("hooks") if isinstance(doc, dict) else None
    if not isinstance(hooks, dict):
        return []
    try:
        config = tomllib.loads((home / "config.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    hooks_cfg = config.get("hooks")
    states = hooks_cfg.get("state") if isinstance(hooks_cfg, dict) else None
    states = states if isinstance(states, dict) else {}
    where = os.path.realpath(hooks_file)  # Codex keys by the canonical path
    marker = script_name(NAME)
    out: list[HookTrust] = []
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            continue
        for g, group in enumerate(groups):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list):
                continue
            for h, handler in enumerate(handlers):
                if not isinstance(handler, dict) or marker not in str(handler.get("command", "")):
                    continue
                key = f"{where}:{event_label(event)}:{g}:{h}"
                record = states.get(key)
                record = record if isinstance(record, dict) else {}
                recorded = record.get("trusted_hash")
                state: Literal["trusted", "untrusted", "stale", "disabled"]
                if not isinstance(recorded, str):
                    state = "untrusted"
                elif recorded != trust_hash(event, group, handler):
                    state = "stale"
                elif record.get("enabled") is False:
                    state = "disabled"
                else:
                    state = "trusted"
                out.append(HookTrust(event=event, key=key, state=state))
    return out


def trust_state(codex_home: str | os.PathLike[str]) -> TrustState:
    """Whether Codex will run tma1's hooks from `codex_home` (`$CODEX_HOME`, ~/.codex):

    - "absent": hooks.json holds no tma1 handler (not installed, or unreadable);
    - "untrusted": at least one of them was never trusted (a fresh install, or an event
      a newer tma1 added);
    - "stale": trusted once, changed since (Codex skips it until trusted again);
    - "disabled": trusted, but switched off in Codex (`enabled = false`);
    - "trusted": every one will run.

    The fix for "untrusted" and "stale" is `TRUST_NOTE`. Reads only; never writes trust.
    """
    states = {t.state for t in hook_trust(codex_home)}
    worst_first: tuple[TrustState, ...] = ("untrusted", "stale", "disabled")
    return next((s for s in worst_first if s in states), "trusted" if states else "absent")


_TRUST_SAYS: dict[TrustState, str] = {
    "trusted": "Codex trusts tma1's hooks: they run in `codex` and `codex exec`.",
    "untrusted": "Codex has not trusted tma1's hooks yet: until you do (see the note "
    "below), Codex runs none of them.",
    "stale": "tma1's hooks changed since Codex trusted them: until you trust them again "
    "(see the note below), Codex runs none of them.",
    "disabled": "tma1's hooks are turned off in Codex (`enabled = false` under "
    "[hooks.state] in config.toml): turn them on in /hooks.",
    "absent": "tma1's hooks are not in Codex's hooks.json.",
}


def check_trust(env: Mapping[str, str] | None = None) -> list[DoctorLine]:
    """`tma1 doctor`'s line on trust: Codex runs a new or changed hook only once the user
    trusted it (/hooks)."""
    name = "codex trust"
    try:
        state = trust_state(hooks_path(env).parent)
    except Exception as exc:
        return [DoctorLine("?", name, f"cannot tell whether Codex trusts the hooks ({exc})")]
    if state == "trusted":
        return [DoctorLine("ok", name, "Codex trusts tma1's hooks")]
    problems = {
        "untrusted": "Codex has not trusted tma1's hooks yet: it runs none of them",
        "stale": "tma1's hooks changed since Codex trusted them: it runs none of them",
        "disabled": "tma1's hooks are switched off in Codex",
    }
    if state in problems:
        return [DoctorLine("FAIL", name, problems[state], " ".join(TRUST_NOTE.split()))]
    return [DoctorLine("?", name, f"cannot tell whether Codex trusts the hooks ({state})")]


_ROLLOUT_TYPES = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
)
# The legacy rollout: a header line, then bare response items and `record_type` lines.
_LEGACY_ITEMS = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
    }
)


def _rollout(value: dict[str, Any]) -> bool:
    t = value.get("type")
    return (
        (t in _ROLLOUT_TYPES and "payload" in value)
        or "record_type" in value
        or ("instructions" in value and "id" in value)
        or (t in _LEGACY_ITEMS and ("call_id" in value or "role" in value))
    )


SPEC = AgentSpec(
    name=NAME,
    title="Codex",
    executable="codex",
    adapter=adapter,
    order=20,
    envelope=Envelope(context_form="hook_specific", stop_form="decision"),
    # Its PreCompact answer was never measured: no summary instructions in plain text.
    compact_in_plain_form=False,
    # Its `transcript_path` is the rollout (token counts, and the exit status of a shell
    # call, tma1.sensors.codex_exit).
    transcript="codex",
    doctor=check_trust,
    replay=(
        ReplayFormat(
            "codex-rollout", _rollout, "tma1.replay.codex_rollout", order=30, title="Codex rollouts"
        ),
    ),
)
