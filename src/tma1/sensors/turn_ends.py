"""Turn ends only the transcript says (docs/semantics.md, "Active sessions"): the user
interrupted the turn, and the agent sends no hook for it. A turn end is stored with the
usage rows (`tma1_messages`, kind `turn_end`), as a compaction is: both are what only the
transcript says. Shared by the transcript tailer (`tma1.sensors.transcripts`) and replay's
converters.
"""

from __future__ import annotations

from typing import Any

from tma1.events import TURN_END, Usage

# Claude Code's words for a turn the user interrupted (Esc): a user line of its own, or the
# result of the tool call it cut. No `Stop` hook follows.
CLAUDE_INTERRUPTED = "[Request interrupted by user"


def turn_end(ts: int, session_id: str, key: str, model: str | None = None) -> Usage:
    """A turn-end row: the transcript says the turn ended at `ts` with no `Stop` hook."""
    return Usage(ts=ts, session_id=session_id, occupancy=0, kind=TURN_END, model=model,
                 message_id=f"{TURN_END}:{key}")  # fmt: skip


def claude_interrupted(msg: Any) -> bool:
    """A main-chain user message that is Claude Code's interruption marker."""
    content = msg.get("content") if isinstance(msg, dict) else None
    if isinstance(content, str):
        return content.lstrip().startswith(CLAUDE_INTERRUPTED)
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        text = block.get("text") if block.get("type") == "text" else block.get("content")
        if isinstance(text, str) and text.lstrip().startswith(CLAUDE_INTERRUPTED):
            return True
    return False
