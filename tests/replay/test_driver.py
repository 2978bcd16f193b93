"""`tma1 replay` end to end: recorded sessions through the real engine (real SQLite, real
Service.handle_hook), the CLI as a subprocess, and replay → export → replay via the CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import tma1_cmd
from replaykit import FIX, Transcript, failing_build_session

from tma1.engine.digest import stop_block_reason
from tma1.replay.driver import replay_paths


def test_replay_blocks_the_stop_after_three_identical_failures(tmp_path: Path) -> None:
    result = replay_paths([failing_build_session(tmp_path / "s.jsonl")])
    assert result.all_problems == []
    assert result.events_fed == 1 + 1 + 6 + 1  # start, prompt, 3×(pre+post), stop
    stops = [d for d in result.deliveries if d.hook_event == "Stop"]
    assert len(stops) == 1
    stop = stops[0]
    assert stop.channel == "stop_block" and stop.session_id == "drv-1"
    assert "go build" in (stop_block_reason(stop.body) or "")
    assert "repeated_failed_build" in {f["kind"] for f in stop.findings}
    assert stop.ts == 1_738_576_800_000 + 200_000  # the end of the turn, replayed time
    summary = result.summary
    assert summary["emits_per_kind"]["repeated_failed_build"] == 1
    day = [r for r in summary["budget"]["per_day"] if r["kind"] == "repeated_failed_build"]
    assert day == [
        {"day": "2025-02-03", "kind": "repeated_failed_build", "count": 1, "over_budget": False}
    ]
    assert summary["follow_rate"]["kinds"]["repeated_failed_build"]["emits"] == 1


def test_threshold_decides_when_context_pressure_is_said(tmp_path: Path) -> None:
    t = Transcript(sid="drv-ctx")
    t.prompt(0, "read everything")
    t.say(5, "done reading", occupancy=60_000)
    t.prompt(60, "now summarise")
    path = t.write(tmp_path / "ctx.jsonl")

    quiet = replay_paths([path])
    assert quiet.deliveries == []
    loud = replay_paths([path], threshold=50_000)
    digests = [d for d in loud.deliveries if d.hook_event == "UserPromptSubmit"]
    assert len(digests) == 1
    assert "<tma1-context>" in digests[0].body
    assert [f["kind"] for f in digests[0].findings] == ["context_pressure"]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(tma1_cmd(*args), capture_output=True, text=True, timeout=300)


def test_cli_json_over_every_fixture_format(tmp_path: Path) -> None:
    proc = run_cli("replay", "--json", str(FIX))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    formats = {Path(i["path"]).name: i["format"] for i in doc["inputs"]}
    assert formats == {
        "claude_transcript.jsonl": "claude-transcript",
        "claude_transcript_array.json": "claude-transcript",
        "claude_stream.jsonl": "claude-stream-json",
        # One run of claude: its session transcript and its sub-agent's (the .meta.json
        # beside it is read by the converter, not an input).
        "c638f88c-2aa6-44a1-baf7-955e9006385c.jsonl": "claude-transcript",
        "agent-a9859ef26cdf3c4d6.jsonl": "claude-transcript",
        "codex_legacy.jsonl": "codex-rollout",
        "codex_rollout.jsonl": "codex-rollout",
        "copilot_events.jsonl": "copilot-events",
        "eventlog.jsonl": "eventlog",
        "gemini_chat.jsonl": "gemini-chat",
        "hooklog_post.json": "claude-hooklog",
        "hooklog_pre.json": "claude-hooklog",
    }
    # The same transcript as JSONL and as a JSON array: the second copy is dropped.
    assert doc["duplicates_dropped"] > 0
    synthetic = {Path(i["path"]).name for i in doc["inputs"] if i["synthetic_time"]}
    assert synthetic == {"codex_legacy.jsonl", "hooklog_post.json", "hooklog_pre.json"}
    # Unreadable parts: reported with file and line, on stderr and in the JSON; no crash.
    assert f"{FIX / 'claude_transcript.jsonl'}:19: not JSON" in proc.stderr
    assert f"{FIX / 'codex_rollout.jsonl'}:16: not JSON" in proc.stderr
    assert any(p.startswith(f"{FIX / 'eventlog.jsonl'}:7: ") for p in doc["problems"])
    assert {n["kind"] for n in doc["notes"]} >= {"modified_since_read", "validation_rejected"}
    assert doc["events"] > 30
    assert set(doc["summary"]) >= {"emits_per_kind", "budget", "follow_rate"}


def test_cli_text_output_names_each_delivery_and_the_summary(tmp_path: Path) -> None:
    path = failing_build_session(tmp_path / "s.jsonl")
    proc = run_cli("replay", str(path))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "deliveries: 1" in out
    assert "2025-02-03T10:03:20.000Z  drv-1  Stop → stop_block" in out
    assert "[high] repeated_failed_build" in out
    assert "emits per kind" in out and "budget (≤ 5 emits per kind per UTC day)" in out
    assert "follow-rate (a follow action within 5 tool calls" in out
    # Bodies are one line unless asked for in full.
    full = run_cli("replay", "--bodies", str(path)).stdout
    assert (
        '  | {"hookSpecificOutput": {"hookEventName": "Stop", "additionalContext": '
        '"tma1: do not stop yet' in full
    )
    assert len(full.splitlines()) >= len(out.splitlines())


def test_cli_states_the_synthetic_timeline_of_hook_logs() -> None:
    proc = run_cli("replay", str(FIX / "hooklog_pre.json"), str(FIX / "hooklog_post.json"))
    assert proc.returncode == 0, proc.stderr
    assert "hook payload log without timestamps: synthetic timeline from 2025-01-01" in (
        proc.stdout
    )
    assert f"{FIX / 'hooklog_pre.json'}:18: not a hook payload" in proc.stderr


def test_replay_db_then_export_then_replay_gives_the_same_deliveries(tmp_path: Path) -> None:
    path = failing_build_session(tmp_path / "s.jsonl")
    db = tmp_path / "kept.db"
    first = run_cli("replay", "--json", "--db", str(db), str(path))
    assert first.returncode == 0, first.stderr
    assert db.exists()
    again = run_cli("replay", "--db", str(db), str(path))
    assert again.returncode == 2 and "exists" in again.stderr

    out = tmp_path / "export.jsonl"
    exp = run_cli("export", "--session", "drv-1", "--database-url", f"sqlite:///{db}",
                  "--out", str(out))  # fmt: skip
    assert exp.returncode == 0, exp.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["hook_event_name"] for r in records if "hook_event_name" in r} == {
        "SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUseFailure", "Stop"
    }  # fmt: skip
    second = run_cli("replay", "--json", str(out))
    assert second.returncode == 0, second.stderr

    def deliveries(doc: str) -> list[tuple[int, str, str]]:
        return [(d["ts"], d["hook_event"], d["body"]) for d in json.loads(doc)["deliveries"]]

    assert deliveries(second.stdout) == deliveries(first.stdout) != []

    missing = run_cli("export", "--session", "nope", "--database-url", f"sqlite:///{db}")
    assert missing.returncode == 1 and "no session 'nope'" in missing.stderr


@pytest.mark.parametrize("content", ["", "{broken", "[1, 2", '{"a": 1}\n'])
def test_unusable_inputs_are_reported_and_nothing_crashes(tmp_path: Path, content: str) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    proc = run_cli("replay", str(bad), str(tmp_path / "missing.jsonl"))
    assert proc.returncode == 1  # nothing could be replayed
    assert "Traceback" not in proc.stderr
    assert f"{tmp_path / 'missing.jsonl'}: no such file or directory" in proc.stderr
    assert str(bad) in proc.stderr
