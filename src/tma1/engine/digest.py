"""What the agent reads: the `<tma1-context>` digest, the Stop reason, and their envelopes.

Pure functions of findings (design §2.6–2.7):

- **Digest** (UserPromptSubmit, and PostToolUse context): at most `DIGEST_MAX_FINDINGS`
  findings, high before medium and newest evidence first (the caller passes them in
  delivery order), under `DIGEST_MAX_CHARS`. Each item leads with the suggestion, so when a
  long evidence text must be cut, the concrete next action survives.
- **Stop reason**: at most `STOP_MAX_FINDINGS`, under `STOP_MAX_CHARS`, naming each
  finding's suggestion.
- **Envelopes**: Claude Code adds plain stdout of a UserPromptSubmit hook to the model's
  context, so the digest goes out as plain text there (the simplest form every Claude Code
  version accepts). Codex (`?envelope=codex`), Claude Code's http hooks (`?transport=http`,
  envelope "json": JSON only) and every PostToolUse/PostToolUseFailure answer use
  `{"hookSpecificOutput":{"hookEventName":…,"additionalContext":…}}` — plain stdout of a
  PostToolUse hook is not shown to the model. Gemini CLI (`?envelope=gemini`) gets that
  JSON form under its own event names; Copilot CLI (`?envelope=copilot`) gets
  `{"additionalContext":…}`, the only form it reads. A Stop block is
  `{"hookSpecificOutput":{"hookEventName":"Stop","additionalContext":…}}` for Claude Code
  (the model goes on working with the reason as context, and the user sees no "stop hook
  problem" notice: the block is a nudge, not an error) and `{"decision":"block",
  "reason":…}` for Codex (`?envelope=codex`; it reaches the model as a hook prompt), Gemini
  CLI (AfterAgent: the reason is the next user message) and Copilot CLI (the reason is the
  next prompt). docs/hooks.md, "The Stop answer", has what each form shows whom.

When is a digest "something new" (design §2.7)? A digest is written only for findings that
pass suppression at this UserPromptSubmit; nothing passing means an empty answer. New
external file changes count as new because suppression lets an
`external_modified_during_session` finding through inside its 10-minute window whenever
its newest change is newer than the last time it was delivered (see `suppression.py`).
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


def digest(findings: Sequence[Anomaly], *, max_chars: int = DIGEST_MAX_CHARS) -> str:
    """The `<tma1-context>` block, or "" when there is nothing to say."""
    findings = list(findings)[:DIGEST_MAX_FINDINGS]
    if not findings:
        return ""
    noun = "finding" if len(findings) == 1 else "findings"
    header = f"{OPEN_TAG}\ntma1 watched this session and has {len(findings)} {noun} for you:"
    footer = "\n" + CLOSE_TAG
    return _numbered(findings, header, max_chars - len(footer)) + footer


def stop_reason(findings: Sequence[Anomaly], *, max_chars: int = STOP_MAX_CHARS) -> str:
    findings = list(findings)[:STOP_MAX_FINDINGS]
    if not findings:
        return ""
    header = "tma1: do not stop yet, this is unresolved:"
    if len(findings) > 1:
        header = f"tma1: do not stop yet, {len(findings)} problems are unresolved:"
    return _numbered(findings, header, max_chars)


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
    if not isinstance(data, dict):
        return None
    if data.get("decision") == "block" and isinstance(data.get("reason"), str):
        return str(data["reason"])
    out = data.get("hookSpecificOutput")
    if isinstance(out, dict) and out.get("hookEventName") == "Stop":
        ctx = out.get("additionalContext")
        return ctx if isinstance(ctx, str) else None
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
