"""A scripted live session (real server, ManualClock) → `export` → `replay` gives the very
same deliveries the live server gave: same times, same hook events, same bodies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import LiveServer

from tma1.clock import ManualClock
from tma1.events import FileChange, Usage
from tma1.replay.driver import replay_paths
from tma1.replay.export import export_session

SECOND = 1_000
MINUTE = 60_000


class Script:
    """Drives one live server; remembers every non-empty answer."""

    def __init__(self, live: LiveServer, clock: ManualClock) -> None:
        self.live, self.clock = live, clock
        self.delivered: list[tuple[int, str, str, str]] = []
        self.n = 0

    def hook(self, payload: dict[str, Any], *, codex: bool = False) -> str:
        params = {"source": "codex", "envelope": "codex"} if codex else None
        r = self.live.hook(payload, params=params)
        assert r.status_code == 200
        if r.text:
            self.delivered.append(
                (self.clock.now_ms(), payload["session_id"], payload["hook_event_name"], r.text)
            )
        return r.text

    def tool(
        self,
        sid: str,
        cwd: str,
        name: str,
        tool_input: dict[str, Any],
        *,
        error: str | None = None,
        response: Any = None,
        codex: bool = False,
    ) -> None:
        self.n += 1
        tid = f"tu-{self.n}"
        base = {"session_id": sid, "cwd": cwd, "tool_name": name, "tool_input": tool_input,
                "tool_use_id": tid}  # fmt: skip
        self.hook({**base, "hook_event_name": "PreToolUse"}, codex=codex)
        self.clock.advance(2 * SECOND)
        if error is not None:
            self.hook({**base, "hook_event_name": "PostToolUseFailure", "error": error})
        else:
            self.hook(
                {**base, "hook_event_name": "PostToolUse", "tool_response": response or {}},
                codex=codex,
            )
        self.clock.advance(3 * SECOND)

    def change(self, project: str, path: str) -> None:
        self.live.store.insert_change(
            FileChange(ts=self.clock.now_ms(), project=project, path=path, change="modified")
        )
        self.live.service.delivery.invalidate_project(project)

    def usage(self, sid: str, occupancy: int) -> None:
        self.live.store.insert_usages(
            [
                Usage(
                    ts=self.clock.now_ms(),
                    session_id=sid,
                    occupancy=occupancy,
                    input_tokens=10,
                    cache_read_tokens=occupancy - 10,
                    model="claude-sonnet-4",
                    message_id=f"msg-{self.clock.now_ms()}",
                )
            ]
        )
        self.live.service.delivery.invalidate(sid)


def test_export_then_replay_gives_the_live_deliveries(
    live: LiveServer, clock: ManualClock, tmp_path: Path
) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    cwd, main_go = str(proj), str(proj / "main.go")
    s = Script(live, clock)
    claude, codex = "rt-claude", "rt-codex"

    s.hook({"session_id": claude, "hook_event_name": "SessionStart", "cwd": cwd,
            "source": "startup"})  # fmt: skip
    s.hook({"session_id": claude, "hook_event_name": "UserPromptSubmit", "cwd": cwd,
            "prompt": "fix the build"})  # fmt: skip
    s.hook({"session_id": codex, "hook_event_name": "SessionStart", "cwd": cwd}, codex=True)
    s.tool(claude, cwd, "Read", {"file_path": main_go}, response={"type": "text"})
    clock.advance(10 * SECOND)
    s.change(cwd, main_go)  # someone else saves main.go
    clock.advance(10 * SECOND)
    s.tool(claude, cwd, "Edit", {"file_path": main_go, "old_string": "a", "new_string": "b"},
           response={"filePath": main_go})  # fmt: skip
    # A Codex agent works in the same project meanwhile, and fails the same way 3 times.
    for _ in range(3):
        s.tool(codex, cwd, "Bash", {"command": "cargo build"}, codex=True,
               response="Exit code: 101\nOutput:\nerror[E0425]: cannot find value `x`")  # fmt: skip
        clock.advance(20 * SECOND)
    s.hook({"session_id": codex, "hook_event_name": "Stop", "cwd": cwd,
            "stop_hook_active": False}, codex=True)  # fmt: skip
    for _ in range(3):
        s.tool(claude, cwd, "Bash", {"command": "go build ./..."},
               error="Exit code 1\n./main.go:3:1: syntax error: unexpected x")  # fmt: skip
        clock.advance(20 * SECOND)
    s.usage(claude, 150_000)
    clock.advance(SECOND)
    s.hook({"session_id": claude, "hook_event_name": "UserPromptSubmit", "cwd": cwd,
            "prompt": "status?"})  # fmt: skip
    clock.advance(SECOND)
    s.hook({"session_id": claude, "hook_event_name": "Stop", "cwd": cwd,
            "stop_hook_active": False})  # fmt: skip
    s.hook({"session_id": claude, "hook_event_name": "Stop", "cwd": cwd,
            "stop_hook_active": True})  # fmt: skip
    s.tool(claude, cwd, "Bash", {"command": "go build ./..."},
           response={"stdout": "", "stderr": "", "interrupted": False})  # fmt: skip
    clock.advance(11 * MINUTE)
    s.tool(claude, cwd, "Bash", {"command": "go build ./..."},
           error="Exit code 1\n./main.go:9:1: syntax error: again")  # fmt: skip
    s.hook({"session_id": claude, "hook_event_name": "UserPromptSubmit", "cwd": cwd,
            "prompt": "and now?"})  # fmt: skip
    s.hook({"session_id": claude, "hook_event_name": "Stop", "cwd": cwd,
            "stop_hook_active": False})  # fmt: skip

    # The script is only a test if the live server said something on each channel.
    hooks_answered = {(sid, hook) for _, sid, hook, _ in s.delivered}
    assert (claude, "UserPromptSubmit") in hooks_answered
    assert (claude, "Stop") in hooks_answered
    assert (codex, "Stop") in hooks_answered

    log = tmp_path / "sessions.jsonl"
    with log.open("w") as fh:
        for sid in (claude, codex):
            for rec in export_session(live.store, sid):
                fh.write(json.dumps(rec) + "\n")

    result = replay_paths([log])
    assert result.all_problems == []
    assert result.duplicates_dropped == 1  # the file change is in both exports
    replayed = [(d.ts, d.session_id, d.hook_event, d.body) for d in result.deliveries]
    assert replayed == s.delivered
    # The findings of each delivery come from the emit log, as live. (A session bundle that
    # tells only project state — here the other session active — re-tells no finding.)
    for d in result.deliveries:
        assert d.findings or d.hook_event == "SessionStart", d
    assert sum(result.summary["emits_per_kind"].values()) == len(result.emits)
    # Every rule that can fire on this script did, so the bodies compared carry them all.
    assert {"stale_file_view", "external_modified_during_session", "repeated_failed_build",
            "context_pressure"} <= set(result.summary["emits_per_kind"])  # fmt: skip
