"""The scripted agent: plays Claude Code by running the installed hook script with each
event's JSON on stdin, really writing files, and appending usage lines to its transcript."""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tma1.demo.output import DemoError, Out
from tma1.engine.digest import stop_block_reason

_FINDING = re.compile(r"\[(high|medium|low)\] ([a-z_]+):")


@dataclass
class Told:
    step: int
    how: str  # "digest" | "Stop block"
    kinds: list[str]


@dataclass
class DemoAgent:
    command: list[str]  # spawned as Claude Code's exec form does: no shell
    env: dict[str, str]
    project: Path
    transcript: Path
    out: Out
    session_id: str = field(default_factory=lambda: f"demo-{uuid.uuid4()}")
    step: int = 0
    told: list[Told] = field(default_factory=list)
    hook_ms: list[float] = field(default_factory=list)

    # -- plumbing --

    def hook(self, event: str, **fields: Any) -> str:
        payload = {
            "session_id": self.session_id,
            "transcript_path": str(self.transcript),
            "cwd": str(self.project),
            "permission_mode": "default",
            "hook_event_name": event,
            **fields,
        }
        t0 = time.perf_counter()
        r = subprocess.run(
            self.command,
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.project,
            timeout=30,
        )
        self.hook_ms.append((time.perf_counter() - t0) * 1000)
        if r.returncode != 0:  # the script promises exit 0 whatever happens
            raise DemoError(f"the hook script exited {r.returncode}: {r.stderr.strip()}")
        return r.stdout

    def usage(self, occupancy: int, text: str) -> None:
        """One assistant API response in the transcript, as Claude Code writes it."""
        msg_id = f"msg_{uuid.uuid4().hex[:24]}"
        line = {
            "type": "assistant",
            "uuid": str(uuid.uuid4()),
            "parentUuid": None,
            "sessionId": self.session_id,
            "timestamp": datetime.now(UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "isSidechain": False,
            "cwd": str(self.project),
            "requestId": f"req_{uuid.uuid4().hex[:24]}",
            "message": {
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": text}],
                "usage": {
                    "input_tokens": 6,
                    "cache_read_input_tokens": occupancy - 1_206,
                    "cache_creation_input_tokens": 1_200,
                    "output_tokens": 180,
                },
            },
        }
        with self.transcript.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")

    def say(self, what: str, detail: str = "") -> None:
        self.step += 1
        tail = f"  {self.out.dim(detail)}" if detail else ""
        self.out.line(f"  {self.step:>2}  {what}{tail}")

    def note(self, text: str) -> None:
        self.out.line(f"       {self.out.dim(text)}")

    def show(self, body: str, how: str) -> None:
        if not body:
            return
        shown = body
        if how == "Stop block":
            shown = f"Stop blocked; the agent reads:\n{stop_block_reason(body) or body}"
        self.out.told(shown, how)
        kinds = [m.group(2) for m in _FINDING.finditer(body)]
        self.told.append(Told(step=self.step, how=how, kinds=kinds))

    # -- the agent's moves --

    def session_start(self) -> None:
        self.say("SessionStart", "a new Claude Code session in the project")
        self.hook("SessionStart", source="startup")

    def prompt(self, text: str) -> str:
        self.say(f'UserPromptSubmit  "{text}"')
        body = self.hook("UserPromptSubmit", prompt=text)
        self.show(body, "digest before its next turn")
        if not body:
            self.note("(nothing new to say: the hook printed nothing)")
        return body

    def _tool(
        self, tool: str, tool_input: dict[str, Any], run: Callable[[], Any], failed: bool = False
    ) -> None:
        """PreToolUse, `run()` (the tool's effect and response), then its Post event."""
        tid = f"toolu_{uuid.uuid4().hex[:20]}"
        base = {"tool_name": tool, "tool_input": tool_input, "tool_use_id": tid}
        self.hook("PreToolUse", **base)
        response = run()
        if failed:
            self.hook("PostToolUseFailure", error=response, is_interrupt=False, **base)
        else:
            self.hook("PostToolUse", tool_response=response, **base)

    def read(self, name: str) -> None:
        path = self.project / name
        self.say(f"Read {name}")

        def run() -> dict[str, Any]:
            content = path.read_text()
            lines = content.count("\n")
            return {
                "type": "text",
                "file": {
                    "filePath": str(path),
                    "content": content,
                    "numLines": lines,
                    "startLine": 1,
                    "totalLines": lines,
                },
            }

        self._tool("Read", {"file_path": str(path)}, run)

    def edit(self, name: str, old: str, new: str, note: str = "") -> None:
        path = self.project / name
        self.say(f"Edit {name}", note)

        def run() -> dict[str, Any]:
            text = path.read_text()
            path.write_text(text.replace(old, new, 1))  # a real write, seen by the watcher
            return {"filePath": str(path), "oldString": old, "newString": new}

        self._tool("Edit", {"file_path": str(path), "old_string": old, "new_string": new}, run)

    def bash(self, command: str, result: str, *, failed: bool, note: str = "") -> None:
        self.say(f"Bash  {command}", note)
        response = {"stdout": result, "stderr": "", "interrupted": False, "isImage": False}
        tool_input = {"command": command, "description": "Run the tests"}
        self._tool("Bash", tool_input, lambda: result if failed else response, failed)

    def stop(self, *, active: bool = False) -> str:
        label = "Stop" + ("  (stop_hook_active: true)" if active else "")
        self.say(label, "the agent wants to end its turn")
        body = self.hook("Stop", stop_hook_active=active, last_assistant_message="Done.")
        if body:
            self.show(body, "Stop block")
        elif active:
            self.note("(loop guard: silent while a block is acted on)")
        else:
            self.note("(nothing unresolved: the turn may end)")
        return body
