"""What the agent reads: the `<tma1-context>` digest and the Stop reason.

Pure functions of findings given in delivery order (design §2.6–2.7), each under its
channel's caps. Each item leads with the suggestion, so when a long evidence text must be
cut, the concrete next action survives. A digest is written only for findings that pass
suppression now: nothing passing means an empty answer.

The engine writes the text; the form it reaches the agent in (plain stdout, JSON
`hookSpecificOutput`, a `{"decision":"block"}` Stop) is the agent's, handed in as an
`Envelope` (each agent's `AgentSpec.envelope`, tma1.adapters.spec). docs/hooks.md, "The
Stop answer", has what each form shows whom.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Protocol

from tma1.engine.anomaly import Anomaly

DIGEST_MAX_FINDINGS = 4
DIGEST_MAX_CHARS = 4_000
STOP_MAX_FINDINGS = 3
STOP_MAX_CHARS = 2_000
POST_TOOL_USE_MAX_FINDINGS = 4
_FILES_SHOWN = 5

OPEN_TAG = "<tma1-context>"
CLOSE_TAG = "</tma1-context>"


class Envelope(Protocol):
    """The form of one agent's answers: `context` wraps context for a hook event ("" for
    no text), `stop_block` a Stop block's reason; `compact` says whether a PreCompact may
    be answered with summary instructions (plain stdout that reaches the summariser)."""

    @property
    def compact(self) -> bool: ...

    def context(self, hook_event_name: str, text: str) -> str: ...

    def stop_block(self, reason: str) -> str: ...


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


def stop_block_reason(body: str) -> str | None:
    """The reason a Stop answer (in either form an `Envelope.stop_block` writes) carries;
    None when the body is no block (empty, or anything else)."""
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
