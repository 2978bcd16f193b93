# ruff: noqa: E501  (the session excerpt is kept as the recorded lines)
"""Replay reads Claude Code stream-json output, and derives lanes (design §2.16) from
sidechains and sub-agent transcripts: a sub-agent's hook payloads carry `agent_id` and
`agent_type`, as Claude Code's own hooks do inside a sub-agent.

Fixtures: `claude_stream.jsonl` and `claude_subagents/` are one run of the real Claude
Code 2.1.332 (`claude -p --output-format stream-json --verbose`, a scripted model server
on loopback: two failing builds, then an `Agent` sub-agent that runs the build once),
captured both ways: its stdout and its transcripts (session file + `subagents/agent-<id>
.jsonl` + `.meta.json`); paths rewritten to /home/dev/proj, attachment/API-request lines
and long texts cut.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tma1.cli import main as cli_main
from tma1.events import parse_payload
from tma1.replay import claude_stream, claude_transcript
from tma1.replay.claude_hooklog import BASE_MS
from tma1.replay.claude_stream import FORMAT as CLAUDE_STREAM_JSON
from tma1.replay.claude_transcript import FORMAT as CLAUDE_TRANSCRIPT
from tma1.replay.driver import load, merge_items
from tma1.replay.formats import detect, read_records
from tma1.replay.model import HOOK, ReplayItem

FIX = Path(__file__).parent / "fixtures"
STREAM = FIX / "claude_stream.jsonl"
SESSION = "c638f88c-2aa6-44a1-baf7-955e9006385c"
MAIN = FIX / "claude_subagents" / f"{SESSION}.jsonl"
AGENT = "a9859ef26cdf3c4d6"

# Cut from data/sessions/claude-code/gallifrey-d50e1daf.chat.json (entry indexes of the
# array in the comments; texts cut): a Task call (subagent_type design-review-analyzer)
# and its sidechain, written inline in the session transcript by Claude Code 1.0.102.
GALLIFREY = [
    # entry 556
    '{"parentUuid":"fa0ec8ff-2138-42c0-9baf-a58d9425ac93","isSidechain":false,"cwd":"/Users/hadi.rickit/dev/gallifrey landing","sessionId":"42afe37d-08ff-4e5d-9b62-9de0bf32ba8e","type":"user","message":{"role":"user","content":"The animated word component is there\'s something wrong with the verticality of the vertical spacing  [cut]"},"uuid":"5627adc6-18d7-4ee3-9129-aea525e773e7","timestamp":"2025-09-07T21:54:11.891Z"}',
    # entry 615
    '{"parentUuid":"7725128f-abe4-44cd-b00f-34013abb1b99","isSidechain":false,"cwd":"/Users/hadi.rickit/dev/gallifrey landing","sessionId":"42afe37d-08ff-4e5d-9b62-9de0bf32ba8e","type":"assistant","message":{"id":"msg_01WZbwkpKvB3R6bE1SYZgRu4","role":"assistant","model":"claude-sonnet-4-20250514","content":[{"type":"tool_use","id":"toolu_01X2fAAxhEPmZC1upJ7ry5dG","name":"Task","input":{"subagent_type":"design-review-analyzer","description":"Comprehensive design review of hero section","prompt":"Please provide a comprehensive UX/UI design review of the Gallifrey Consulting landing page hero sec [cut]"}}]},"uuid":"0357a938-f092-48ff-869e-3faf91bc013f","timestamp":"2025-09-07T21:58:11.052Z"}',
    # entry 617
    '{"parentUuid":null,"isSidechain":true,"cwd":"/Users/hadi.rickit/dev/gallifrey landing","sessionId":"42afe37d-08ff-4e5d-9b62-9de0bf32ba8e","type":"user","message":{"role":"user","content":"Please provide a comprehensive UX/UI design review of the Gallifrey Consulting landing page hero sec [cut]"},"uuid":"b105f9c9-f51e-459c-8b13-8b4c3a20917d","timestamp":"2025-09-07T21:58:11.273Z"}',
    # entry 618
    '{"parentUuid":"b105f9c9-f51e-459c-8b13-8b4c3a20917d","isSidechain":true,"cwd":"/Users/hadi.rickit/dev/gallifrey landing","sessionId":"42afe37d-08ff-4e5d-9b62-9de0bf32ba8e","type":"assistant","message":{"id":"msg_01SUCd4EvvgjPuvfeJJcngmw","role":"assistant","model":"claude-sonnet-4-20250514","content":[{"type":"text","text":"I\'ll provide a comprehensive UX/UI design review of the Gall [cut]"}]},"uuid":"f5e62891-26a9-4010-b503-410c10c637dd","timestamp":"2025-09-07T21:58:14.643Z"}',
    # entry 619
    '{"parentUuid":"f5e62891-26a9-4010-b503-410c10c637dd","isSidechain":true,"cwd":"/Users/hadi.rickit/dev/gallifrey landing","sessionId":"42afe37d-08ff-4e5d-9b62-9de0bf32ba8e","type":"assistant","message":{"id":"msg_01SUCd4EvvgjPuvfeJJcngmw","role":"assistant","model":"claude-sonnet-4-20250514","content":[{"type":"tool_use","id":"toolu_01NQBD6HZW6k87yqj6LwWPCi","name":"Read","input":{"file_path":"/Users/hadi.rickit/dev/gallifrey landing/pages/index.tsx"}}]},"uuid":"cd3f71bd-5e0d-42cd-be09-4faa9ab97dd5","timestamp":"2025-09-07T21:58:15.011Z"}',
    # entry 620
    '{"parentUuid":"cd3f71bd-5e0d-42cd-be09-4faa9ab97dd5","isSidechain":true,"cwd":"/Users/hadi.rickit/dev/gallifrey landing","sessionId":"42afe37d-08ff-4e5d-9b62-9de0bf32ba8e","type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_01NQBD6HZW6k87yqj6LwWPCi","type":"tool_result","content":"     1→import { Footer } from \'@/compone [cut]"}]},"uuid":"69f8d304-be39-4cfa-8634-9ad10d0dd691","timestamp":"2025-09-07T21:58:15.106Z"}',
    # entry 621
    '{"parentUuid":"69f8d304-be39-4cfa-8634-9ad10d0dd691","isSidechain":true,"cwd":"/Users/hadi.rickit/dev/gallifrey landing","sessionId":"42afe37d-08ff-4e5d-9b62-9de0bf32ba8e","type":"assistant","message":{"id":"msg_01KaMwD6wN9gmPq896jx1BBF","role":"assistant","model":"claude-sonnet-4-20250514","content":[{"type":"tool_use","id":"toolu_013PVjMn2gBWLFa7B6Gun7KD","name":"Read","input":{"file_path":"/Users/hadi.rickit/dev/gallifrey landing/components/Hero.tsx"}}]},"uuid":"a97b10b2-30cd-4159-ab66-3cca36aab253","timestamp":"2025-09-07T21:58:18.601Z"}',
    # entry 622
    '{"parentUuid":"a97b10b2-30cd-4159-ab66-3cca36aab253","isSidechain":true,"cwd":"/Users/hadi.rickit/dev/gallifrey landing","sessionId":"42afe37d-08ff-4e5d-9b62-9de0bf32ba8e","type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_013PVjMn2gBWLFa7B6Gun7KD","type":"tool_result","content":"     1→import React, { Suspense, useCall [cut]"}]},"uuid":"7c1f7491-45e5-4f3d-8701-d5212704cbd8","timestamp":"2025-09-07T21:58:18.709Z"}',
]


def tool_hooks(items: list[ReplayItem]) -> list[tuple[str, str, str | None, str | None]]:
    """(hook, tool_use_id, agent_id, agent_type) of every tool hook, in replay order."""
    return [
        (p["hook_event_name"], p["tool_use_id"], p.get("agent_id"), p.get("agent_type"))
        for i in items
        if i.kind == HOOK and (p := i.payload) is not None and "tool_use_id" in p
    ]


def test_stream_json_is_told_from_a_transcript_by_content() -> None:
    assert detect(read_records(STREAM)) == CLAUDE_STREAM_JSON
    assert detect(read_records(MAIN)) == CLAUDE_TRANSCRIPT


def test_stream_json_replays_as_the_transcript_of_the_same_run_does() -> None:
    [stream], problems = load([STREAM])
    assert stream.format == CLAUDE_STREAM_JSON and not problems and not stream.problems
    assert stream.synthetic_time is None  # 2.1.x stamps its conversation entries
    from_stream = tool_hooks(merge_items([stream])[0])
    from_transcripts = tool_hooks(merge_items(load([MAIN])[0])[0])
    assert from_stream == from_transcripts
    assert from_stream[-2:] == [
        ("PreToolUse", "toolu_0009", AGENT, "general-purpose"),
        ("PostToolUseFailure", "toolu_0009", AGENT, "general-purpose"),
    ]
    items = merge_items([stream])[0]
    names = [i.payload["hook_event_name"] for i in items if i.kind == HOOK and i.payload]
    assert names[:2] == ["SessionStart", "UserPromptSubmit"] and names[-1] == "Stop"
    assert all(i.session_id == SESSION for i in stream.items)


def test_stream_json_without_timestamps_is_replayed_on_a_stated_synthetic_timeline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Claude Code <= 2.0 printed no timestamps in stream-json.
    old = tmp_path / "old-stream.jsonl"
    lines = [json.loads(x) for x in STREAM.read_text().splitlines()]
    old.write_text(
        "".join(json.dumps({k: v for k, v in o.items() if k != "timestamp"}) + "\n" for o in lines)
    )
    conv = claude_stream.convert(read_records(old))
    assert conv.synthetic_time and "synthetic timeline" in conv.synthetic_time
    stamps = [i.ts for i in sorted(conv.items, key=lambda i: (i.ts, i.seq))]
    assert stamps[0] >= BASE_MS and stamps == sorted(stamps)
    assert tool_hooks(conv.items) == tool_hooks(claude_stream.convert(read_records(STREAM)).items)
    assert cli_main(["replay", str(old)]) == 0
    out = capsys.readouterr().out
    assert "synthetic timeline" in out


def test_sub_agent_transcripts_beside_the_session_file_are_read_with_their_lane() -> None:
    inputs, problems = load([MAIN])  # the session file alone: its subagents/ come along
    assert not problems and [Path(c.path).name for c in inputs] == [
        MAIN.name,
        f"agent-{AGENT}.jsonl",
    ]
    hooks = tool_hooks(merge_items(inputs)[0])
    assert ("PostToolUseFailure", "toolu_0009", AGENT, "general-purpose") in hooks
    assert all(a is None for h, t, a, _ in hooks if t != "toolu_0009")
    # A directory: the .meta.json is read by the converter, not reported as an input.
    inputs, problems = load([FIX / "claude_subagents"])
    assert not problems and all(not c.problems for c in inputs) and len(inputs) == 2


def test_inline_sidechains_get_a_lane_and_the_task_type(tmp_path: Path) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(GALLIFREY) + "\n")
    hooks = tool_hooks(claude_transcript.convert(read_records(f)).items)
    lane = "sidechain-b105f9c9-f51e-459c-8b13-8b4c3a20917d"  # the sidechain's first entry
    assert hooks == [
        ("PreToolUse", "toolu_01X2fAAxhEPmZC1upJ7ry5dG", None, None),  # the Task call
        ("PreToolUse", "toolu_01NQBD6HZW6k87yqj6LwWPCi", lane, "design-review-analyzer"),
        ("PostToolUse", "toolu_01NQBD6HZW6k87yqj6LwWPCi", lane, "design-review-analyzer"),
        ("PreToolUse", "toolu_013PVjMn2gBWLFa7B6Gun7KD", lane, "design-review-analyzer"),
        ("PostToolUse", "toolu_013PVjMn2gBWLFa7B6Gun7KD", lane, "design-review-analyzer"),
    ]


def test_the_lane_reaches_the_stored_event() -> None:
    [stream], _ = load([STREAM])
    [post] = [i for i in stream.items if i.payload and i.payload.get("tool_use_id") == "toolu_0009"
              and i.payload["hook_event_name"] == "PostToolUseFailure"]  # fmt: skip
    assert post.payload is not None
    ev = parse_payload(post.payload, ts=post.ts)
    fields = {"agent_id": getattr(ev, "agent_id", None) or ev.metadata.get("agent_id"),
              "agent_type": getattr(ev, "agent_type", None) or ev.metadata.get("agent_type")}  # fmt: skip
    assert fields == {"agent_id": AGENT, "agent_type": "general-purpose"}
