# ruff: noqa: E501  (the Codex excerpt is kept as the recorded lines)
"""A replayed Stop carries the agent's final message, as Claude Code 2.1 and Codex 0.171
send it in the Stop payload (`last_assistant_message`, ../shared/data/real-agents)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import require_sessions

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


# Codex 0.171.0's rollout of the `./build.sh` run (../shared/data/real-agents/
# codex-0.171.0.rollout-buildsh.jsonl, lines 1 and 36–41, trimmed to the fields read). The
# live Stop payload carried "The build still fails; I am stopping here."
CODEX_171 = [
    '{"timestamp":"2026-12-01T14:20:49.900Z","type":"session_meta","payload":{"id":"01a231fa-cb28-7181-ad5a-15a511f5ac94","cwd":"/home/dev/src/proj-codex-buildsh","cli_version":"0.171.0"}}',
    '{"timestamp":"2026-12-01T14:20:49.950Z","type":"event_msg","payload":{"type":"user_message","message":"fix the build"}}',
    '{"timestamp":"2026-12-01T14:20:51.092Z","ordinal":36,"type":"event_msg","payload":{"type":"item_completed","thread_id":"01a231fa-cb28-7181-ad5a-15a511f5ac94","turn_id":"01a231fa-cb53-7901-835e-524332d70185","item":{"type":"AgentMessage","id":"msg_139975fb708d48028c1b","content":[{"type":"Text","text":"The build still fails; I am stopping here."}]},"started_at_ms":1796134851092,"completed_at_ms":1796134851092}}',
    '{"timestamp":"2026-12-01T14:20:51.094Z","ordinal":37,"type":"response_item","payload":{"type":"message","status":"completed","id":"msg_139975fb708d48028c1b","role":"assistant","content":[{"type":"output_text","text":"The build still fails; I am stopping here."}]}}',
    '{"timestamp":"2026-12-01T14:20:51.118Z","ordinal":40,"type":"event_msg","payload":{"type":"task_complete","turn_id":"01a231fa-cb53-7901-835e-524332d70185","last_agent_message":"The build still fails; I am stopping here."}}',
]  # fmt: skip


def test_a_codex_171_stop_carries_the_final_agent_message_from_any_record(
    tmp_path: Path,
) -> None:
    path = tmp_path / "rollout.jsonl"
    final = "The build still fails; I am stopping here."
    path.write_text("\n".join(CODEX_171))
    assert _stops(codex_rollout.convert(read_records(path))) == [final]
    # With only the item_completed record (no message item, a task_complete without it),
    # the Stop still carries it: the handed-back reading of the Stop depends on it.
    only_item = [*CODEX_171[:3], CODEX_171[4].replace(f',"last_agent_message":"{final}"', "")]
    path.write_text("\n".join(only_item))
    assert _stops(codex_rollout.convert(read_records(path))) == [final]


def test_every_codex_turns_final_message_reaches_its_replayed_stop() -> None:
    """Over the corpus: each `task_complete.last_agent_message` is a Stop's message."""
    root = require_sessions()
    rollouts = sorted((root / "codex").glob("*.jsonl"))
    batch3 = root.parent / "sessions-batch3" / "codex"
    rollouts += sorted(batch3.rglob("*.jsonl")) if batch3.is_dir() else []
    checked = 0
    for path in rollouts:
        finals = [
            p["last_agent_message"].strip()
            for line in path.read_text(encoding="utf-8").splitlines()
            if '"task_complete"' in line
            and isinstance(p := json.loads(line).get("payload"), dict)
            and isinstance(p.get("last_agent_message"), str)
            and p["last_agent_message"].strip()
        ]
        stops = {s.strip() for s in _stops(codex_rollout.convert(read_records(path))) if s}  # type: ignore[union-attr]
        assert [f for f in finals if f not in stops] == [], path.name
        checked += len(finals)
    assert checked >= 20
