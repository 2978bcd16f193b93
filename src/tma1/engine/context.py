"""The context threshold and context epochs (design §2.12, §2.17). Pure functions.

Threshold: `TMA1_CONTEXT_PRESSURE_THRESHOLD` when set; otherwise half of the model's
context window when it is known, else 100,000 (the seed's "≈ 50 % of Claude Sonnet's 200k
window": the intent is half the window).

The window is known from the recording itself (Codex's `token_count` carries
`model_context_window`, kept on `Usage.context_window`), or from the model's name:
Claude models have 200k, or 1M with the long-context option. The transcript's
`message.model` is the API model id, which does not say whether the 1M beta was on, so
1M is only assumed when the name says so (Claude Code's `[1m]` suffix, `context-1m`) —
or when the session already sent a prompt bigger than 200k, which a 200k model cannot
take. Erring towards the smaller window warns early, never never.
"""

from __future__ import annotations

from tma1.events import Usage

DEFAULT_THRESHOLD = 100_000
CLAUDE_WINDOW = 200_000
CLAUDE_LONG_WINDOW = 1_000_000
# A window outside this range is not believed (a corrupt or foreign number).
_MIN_WINDOW = 8_000
_MAX_WINDOW = 10_000_000


def model_context_window(model: str | None) -> int | None:
    """The context window a model name implies, or None when the name says nothing."""
    if not model:
        return None
    name = model.strip().lower()
    if "claude" not in name and not name.startswith(("opus", "sonnet", "haiku")):
        return None
    if "[1m]" in name or "context-1m" in name or name.endswith("-1m"):
        return CLAUDE_LONG_WINDOW
    return CLAUDE_WINDOW


def context_window(usage: Usage) -> int | None:
    """The window of the model behind `usage`: as recorded, else from its name."""
    recorded = usage.context_window
    if recorded is not None and _MIN_WINDOW <= recorded <= _MAX_WINDOW:
        return recorded
    window = model_context_window(usage.model)
    if window == CLAUDE_WINDOW and usage.occupancy > CLAUDE_WINDOW:
        return CLAUDE_LONG_WINDOW  # a prompt a 200k model could not have taken
    return window


def context_threshold(usage: Usage | None, configured: int | None) -> int:
    """The prompt size at which context_pressure fires for this usage."""
    if configured is not None:
        return configured
    window = context_window(usage) if usage is not None else None
    return window // 2 if window else DEFAULT_THRESHOLD
