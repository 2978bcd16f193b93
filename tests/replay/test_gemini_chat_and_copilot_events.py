"""`tma1 replay` of Gemini CLI chat files and Copilot CLI session logs. The Gemini fixture
was written by the real Gemini CLI
0.61.0 (driven by tests/agents/fakemodel.py: a Read, an Edit, `./build.sh` failing three
times, a final answer)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tma1.replay import gemini_chat
from tma1.replay.driver import replay_paths
from tma1.replay.formats import detect, read_records
from tma1.replay.gemini_chat import FORMAT as GEMINI_CHAT

FIX = Path(__file__).with_name("fixtures") / "gemini_chat.jsonl"


def test_a_gemini_chat_is_detected_by_content(tmp_path: Path) -> None:
    misnamed = tmp_path / "rollout-2025.jsonl"
    shutil.copy(FIX, misnamed)
    assert detect(read_records(misnamed)) == GEMINI_CHAT


def test_the_chat_becomes_the_hooks_gemini_would_have_sent() -> None:
    conv = gemini_chat.convert(read_records(FIX))
    assert conv.problems == []
    got = [(i.hook_event, (i.payload or {}).get("tool_name")) for i in conv.items]
    assert got == [
        ("SessionStart", None),
        ("BeforeAgent", None),
        ("BeforeTool", "read_file"),
        ("AfterTool", "read_file"),
        ("BeforeTool", "replace"),
        ("AfterTool", "replace"),
        *[("BeforeTool", "run_shell_command"), ("AfterTool", "run_shell_command")] * 3,
        ("AfterAgent", None),
    ]
    assert all(i.source == "gemini" and i.envelope == "gemini" for i in conv.items)
    assert [i.ts for i in conv.items] == sorted(i.ts for i in conv.items)
    first = conv.items[1].payload or {}
    assert first["prompt"] == "make the build pass"
    assert first["cwd"].endswith("/proj")  # from Gemini's workspace context message
    build = conv.items[-2].payload or {}
    assert "Exit Code: 1" in build["tool_response"]["llmContent"]


def test_replaying_it_blocks_the_end_of_the_turn() -> None:
    result = replay_paths([FIX])
    assert result.all_problems == []
    stops = [d for d in result.deliveries if d.hook_event == "Stop"]
    assert len(stops) == 1
    body = json.loads(stops[0].body)
    assert body["decision"] == "block" and "./build.sh" in body["reason"]
    assert "repeated_failed_build" in {f["kind"] for f in stops[0].findings}


def test_the_older_single_object_form_is_read_too(tmp_path: Path) -> None:
    lines = [json.loads(x) for x in FIX.read_text().splitlines() if x.strip()]
    header = lines[0]
    msgs: dict[str, dict] = {}
    for rec in lines[1:]:
        for m in (rec.get("$set") or {}).get("messages") or ([rec] if "type" in rec else []):
            msgs[m["id"]] = m
    whole = tmp_path / "session.json"
    whole.write_text(json.dumps({**header, "messages": list(msgs.values())}, indent=2))
    conv = gemini_chat.convert(read_records(whole))
    again = gemini_chat.convert(read_records(FIX))
    assert [i.payload for i in conv.items] == [i.payload for i in again.items]


# --- GitHub Copilot CLI -------------------------------------------------------------------
# The fixture was written by the real Copilot CLI 1.0.102 (offline, the fake model as its
# BYOK provider): a view, an edit, `./build.sh` failing three times, a final answer.

COPILOT = Path(__file__).with_name("fixtures") / "copilot_events.jsonl"


def test_a_copilot_session_log_is_detected_and_becomes_its_hooks(tmp_path: Path) -> None:
    from tma1.replay import copilot_events
    from tma1.replay.copilot_events import FORMAT as COPILOT_EVENTS

    misnamed = tmp_path / "session.jsonl"
    shutil.copy(COPILOT, misnamed)
    assert detect(read_records(misnamed)) == COPILOT_EVENTS
    conv = copilot_events.convert(read_records(COPILOT))
    assert conv.problems == []
    got = [(i.hook_event, (i.payload or {}).get("tool_name")) for i in conv.items]
    assert got == [
        ("SessionStart", None),
        ("UserPromptSubmit", None),
        ("PreToolUse", "view"),
        ("PostToolUse", "view"),
        ("PreToolUse", "edit"),
        ("PostToolUse", "edit"),
        *[("PreToolUse", "bash"), ("PostToolUse", "bash")] * 3,
        ("Stop", None),
        ("SessionEnd", None),
    ]
    assert all(i.source == "copilot" and i.envelope == "copilot" for i in conv.items)
    assert (conv.items[0].payload or {})["cwd"].endswith("/proj")


def test_replaying_the_copilot_log_blocks_the_stop() -> None:
    result = replay_paths([COPILOT])
    assert result.all_problems == []
    (stop,) = [d for d in result.deliveries if d.hook_event == "Stop"]
    body = json.loads(stop.body)
    assert body["decision"] == "block" and "./build.sh" in body["reason"]
    assert "repeated_failed_build" in {f["kind"] for f in stop.findings}
