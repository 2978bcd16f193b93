"""What the agent reads: the `<tma1-context>` digest, the Stop reason, and their envelopes.

Pure functions of findings given in delivery order (design §2.6–2.7), each under its
channel's caps. Each item leads with the suggestion, so when a long evidence text must be
cut, the concrete next action survives. A digest is written only for findings that pass
suppression now: nothing passing means an empty answer.

Envelopes: Claude Code's UserPromptSubmit takes plain stdout (the form every version
accepts); Codex, the http transport (envelope "json") and every PostToolUse answer take
`hookSpecificOutput.additionalContext` (plain stdout of a PostToolUse hook never reaches
the model), Gemini CLI under its own event names; Copilot CLI reads only a top-level
`additionalContext`. A Stop block is `hookSpecificOutput` context for Claude Code (a
nudge, with no "stop hook problem" notice) and `{"decision":"block","reason":…}` for
Codex, Gemini and Copilot. docs/hooks.md, "The Stop answer", has what each form shows whom.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from tma1.dialects import agent_event_name
from tma1.engine.anomaly import Anomaly

DIGEST_MAX_FINDINGS = 4
DIGEST_MAX_CHARS = 4_000
STOP_MAX_FINDINGS = 3
STOP_MAX_CHARS = 2_000
POST_TOOL_USE_MAX_FINDINGS = 4
_FILES_SHOWN = 5

# `?envelope=` values whose context always goes out as `hookSpecificOutput` JSON.
JSON_ENVELOPES = frozenset({"codex", "json", "gemini", "copilot"})
# `?envelope=` values whose Stop block is `{"decision":"block","reason":…}`.
DECISION_STOP_ENVELOPES = frozenset({"codex", "gemini", "copilot"})

OPEN_TAG = "<tma1-context>"
CLOSE_TAG = "</tma1-context>"


def clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    if limit <= 1:
        return text[:limit]
    return text[: limit - 1].rstrip() + "…"


def listed(items: Sequence[str], limit: int) -> str:
    """The first `limit` items, comma-separated, and how many more there are."""
    more = len(items) - limit
    return ", ".join(items[:limit]) + (f" (+{more} more)" if more > 0 else "")


def numbered_item(n: int, finding: Anomaly, budget: int, *, files: bool = True) -> str:
    """One numbered item within `budget` characters; the suggestion is cut last. With
    `files`, its related files follow when they fit."""
    head = f"{n}. [{finding.severity}] {finding.kind}: "
    shown = listed(finding.related_files, _FILES_SHOWN) if files else ""
    tail_files = f" Files: {shown}." if shown else ""
    room = max(budget - len(head), 40)
    suggestion = clip(finding.suggestion, max(room * 2 // 3, 30))
    room -= len(suggestion)
    evidence = clip(finding.evidence, max(room - len(" Seen: ") - len(tail_files), 0))
    text = head + suggestion
    if evidence:
        text += " Seen: " + evidence
    if len(text) + len(tail_files) <= budget:
        text += tail_files
    return clip(text, budget)


def _numbered(findings: Sequence[Anomaly], header: str, limit: int) -> str:
    overhead = len(header) + 2 * len(findings)
    budget = max((limit - overhead) // max(len(findings), 1), 60)
    items = [numbered_item(i, f, budget) for i, f in enumerate(findings, 1)]
    body = header + "\n" + "\n".join(items)
    return body[: limit - 1] if len(body) >= limit else body


def digest(findings: Sequence[Anomaly]) -> str:
    """The `<tma1-context>` block, or "" when there is nothing to say."""
    findings = list(findings)[:DIGEST_MAX_FINDINGS]
    if not findings:
        return ""
    noun = "finding" if len(findings) == 1 else "findings"
    header = f"{OPEN_TAG}\ntma1 watched this session and has {len(findings)} {noun} for you:"
    footer = "\n" + CLOSE_TAG
    return _numbered(findings, header, DIGEST_MAX_CHARS - len(footer)) + footer


def stop_reason(findings: Sequence[Anomaly]) -> str:
    findings = list(findings)[:STOP_MAX_FINDINGS]
    if not findings:
        return ""
    header = "tma1: do not stop yet, this is unresolved:"
    if len(findings) > 1:
        header = f"tma1: do not stop yet, {len(findings)} problems are unresolved:"
    return _numbered(findings, header, STOP_MAX_CHARS)


def stop_block_body(reason: str, *, envelope: str | None = None) -> str:
    """The Stop answer that keeps the agent working on `reason` (module docstring)."""
    if envelope in DECISION_STOP_ENVELOPES:
        return json.dumps({"decision": "block", "reason": reason}, ensure_ascii=False)
    return json.dumps(
        {"hookSpecificOutput": {"hookEventName": "Stop", "additionalContext": reason}},
        ensure_ascii=False,
    )


def stop_block_reason(body: str) -> str | None:
    """The reason a Stop answer (either form of `stop_block_body`) carries; None when the
    body is no block (empty, or anything else)."""
    try:
        data = json.loads(body) if body else None
    except ValueError:
        return None
    match data:
        case {"decision": "block", "reason": str(reason)}:
            return reason
        case {"hookSpecificOutput": {"hookEventName": "Stop", "additionalContext": str(ctx)}}:
            return ctx
    return None


def context_body(hook_event_name: str, text: str, *, envelope: str | None) -> str:
    """Wrap context for the agent (see the module docstring for who gets which form)."""
    if not text:
        return ""
    if envelope == "copilot":
        # Copilot CLI 1.0 reads `additionalContext` at the top level of a Claude-format
        # hook's answer; it ignores it inside `hookSpecificOutput` (tried on the binary).
        return json.dumps({"additionalContext": text}, ensure_ascii=False)
    if envelope in JSON_ENVELOPES or hook_event_name != "UserPromptSubmit":
        return json.dumps(
            {
                "hookSpecificOutput": {
                    # Gemini's own names (BeforeAgent, AfterTool); tma1's for the others.
                    "hookEventName": agent_event_name(envelope, hook_event_name),
                    "additionalContext": text,
                }
            },
            ensure_ascii=False,
        )
    return text
