"""A replayed Stop carries the agent's final message, as Claude Code 2.1 and Codex 0.171
send it in the Stop payload (`last_assistant_message`, ../shared/data/real-agents)."""

from __future__ import annotations

import json
from pathlib import Path

from tma1.replay import claude_transcript, codex_rollout
from tma1.replay.formats import read_records

FIX = Path(__file__).parent / "fixtures"


def _stops(conv: object) -> list[object]:
    return [
        i.payload.get("last_assistant_message")  # type: ignore[attr-defined]
        for i in conv.items  # type: ignore[attr-defined]
        if i.hook_event == "Stop"
    ]


def test_a_claude_transcript_stop_carries_the_turns_last_assistant_text() -> None:
    conv = claude_transcript.convert(read_records(FIX / "claude_transcript.jsonl"))
    assert _stops(conv) == ["The build passes now."]


def test_a_codex_rollout_stop_carries_the_turns_last_agent_message() -> None:
    assert _stops(codex_rollout.convert(read_records(FIX / "codex_rollout.jsonl"))) == ["Fixed."]
    assert _stops(codex_rollout.convert(read_records(FIX / "codex_legacy.jsonl"))) == ["Added."]


def test_a_turn_without_assistant_text_sends_no_message(tmp_path: Path) -> None:
    """Each turn's message is its own: a second turn with only a tool call says nothing."""
    rows = [
        {"type": "user", "uuid": "u1", "sessionId": "s", "timestamp": "2025-01-01T10:00:00Z",
         "message": {"role": "user", "content": "first"}},
        {"type": "assistant", "uuid": "a1", "sessionId": "s", "timestamp": "2025-01-01T10:00:01Z",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "Build fails."}]}},
        {"type": "user", "uuid": "u2", "sessionId": "s", "timestamp": "2025-01-01T10:01:00Z",
         "message": {"role": "user", "content": "second"}},
        {"type": "assistant", "uuid": "a2", "sessionId": "s", "timestamp": "2025-01-01T10:01:01Z",
         "message": {"role": "assistant", "content": [
             {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/x"}}]}},
    ]  # fmt: skip
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    assert _stops(claude_transcript.convert(read_records(path))) == ["Build fails.", None]


def test_a_turn_ending_on_an_api_error_sends_no_stop(tmp_path: Path) -> None:
    """claude-code/big3-09e1018a.chat.json (session e165f9ba, 21:53:05): the turn ends on
    Claude Code's synthetic "Session limit reached ∙ resets 2am" (`isApiErrorMessage`,
    `error: rate_limit`). A current Claude Code fires StopFailure then, not Stop: a hook
    tma1 does not install, and nothing could block it (the model is not there)."""
    rows = [
        {"type": "user", "uuid": "u1", "sessionId": "s", "timestamp": "2025-11-22T21:42:00Z",
         "message": {"role": "user", "content": "fix the tests"}},
        {"type": "assistant", "uuid": "a1", "sessionId": "s", "timestamp": "2025-11-22T21:53:05Z",
         "error": "rate_limit", "isApiErrorMessage": True,
         "message": {"id": "x", "model": "<synthetic>", "role": "assistant", "content": [
             {"type": "text", "text": "Session limit reached ∙ resets 2am"}]}},
    ]  # fmt: skip
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    ends = [
        (i.hook_event, i.payload.get("error"))
        for i in claude_transcript.convert(read_records(path)).items
        if i.hook_event in ("Stop", "StopFailure") and i.payload
    ]
    assert ends == []
