"""Helpers for the tests that run `tma1 install` / `uninstall` as a subprocess into a
temporary $HOME (tests/commands/, tests/adapters/)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import tma1_cmd

USER_SETTINGS = """{
  "model": "opus",
  "permissions": {
    "allow": ["Bash(ls:*)"]
  },
  "hooks": {
    "Stop": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "notify-send done"
          }
        ]
      }
    ],
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          {
            "type": "command",
            "command": "~/bin/guard.sh",
            "timeout": 30
          }
        ]
      }
    ]
  },
  "unknownFutureKey": {"nested": [1, 2.5, null, true]}
}
"""


def env_for(home: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TMA1_") and k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME")
    }
    env["HOME"] = str(home)
    env.update(extra)
    return env


def tma1(home: Path, *args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        tma1_cmd(*args),
        env=env_for(home, **extra_env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under root with its bytes (None for directories)."""
    out: dict[str, bytes | None] = {}
    for p in sorted(root.rglob("*")):
        out[str(p.relative_to(root))] = None if p.is_dir() else p.read_bytes()
    return out


def write_settings(home: Path, text: str) -> Path:
    path = home / ".claude" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
