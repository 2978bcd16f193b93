"""Recorded-session builders shared by the replay tests (tests/replay/) and the
evaluation script's test (tests/scripts/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIX = Path(__file__).parent / "replay" / "fixtures"
T0 = "2025-02-03T10:{m:02d}:{s:02d}.000Z"


class Transcript:
    """Writes a Claude Code transcript (JSONL) line by line."""

    def __init__(self, sid: str = "drv-1", cwd: str = "/work/drv") -> None:
        self.sid, self.cwd = sid, cwd
        self.rows: list[dict[str, Any]] = []
        self.n = 0

    def _add(self, etype: str, secs: int, message: dict[str, Any], **extra: Any) -> None:
        self.n += 1
        self.rows.append(
            {"type": etype, "uuid": f"u{self.n}", "sessionId": self.sid, "cwd": self.cwd,
             "isSidechain": False, "timestamp": T0.format(m=secs // 60, s=secs % 60),
             "message": message, **extra}
        )  # fmt: skip

    def prompt(self, secs: int, text: str) -> None:
        self._add("user", secs, {"role": "user", "content": text})

    def say(self, secs: int, text: str, *, occupancy: int | None = None) -> None:
        msg: dict[str, Any] = {"id": f"m{self.n}", "role": "assistant",
                               "content": [{"type": "text", "text": text}]}  # fmt: skip
        if occupancy is not None:
            msg["usage"] = {"input_tokens": 10, "cache_read_input_tokens": occupancy - 10,
                            "cache_creation_input_tokens": 0, "output_tokens": 5}  # fmt: skip
        self._add("assistant", secs, msg)

    def bash(self, secs: int, command: str, output: str, *, error: bool) -> None:
        tid = f"t{self.n}"
        use = {"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": command}}
        self._add("assistant", secs, {"id": f"m{self.n}", "role": "assistant", "content": [use]})
        result = {"type": "tool_result", "tool_use_id": tid, "is_error": error, "content": output}
        self._add("user", secs + 2, {"role": "user", "content": [result]})

    def write(self, path: Path) -> Path:
        path.write_text("".join(json.dumps(r) + "\n" for r in self.rows))
        return path


def failing_build_session(path: Path) -> Path:
    t = Transcript()
    t.prompt(0, "make it build")
    for k in range(3):
        t.bash(
            10 + 40 * k, "go build ./...", "Exit code 1\n./main.go:7:2: undefined: x", error=True
        )
    t.say(200, "I could not fix it.")
    return t.write(path)
