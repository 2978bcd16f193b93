"""The hook script for agents beyond Claude Code and Codex: the same `hook.sh`, with the
agent's own `?source=…&envelope=…` query (hookscript.QUERIES holds the first two)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from tma1.adapters.files import FileChange, read_bytes
from tma1.adapters.hookscript import template_text
from tma1.adapters.registration import InstallState, ScriptRegistration
from tma1.config import Settings

QUERIES = {
    "gemini": "?source=gemini&envelope=gemini",
    "copilot": "?source=copilot&envelope=copilot",
}


def render_script(settings: Settings, agent: str) -> str:
    values = {
        "@@AGENT@@": agent,
        "@@HOST@@": shlex.quote(settings.host),
        "@@PORT@@": shlex.quote(str(settings.port)),
        "@@DATA_DIR@@": shlex.quote(str(settings.data_dir.expanduser().absolute())),
        "@@QUERY@@": QUERIES[agent],
    }
    text = template_text()
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    return text


@dataclass
class AgentScriptRegistration(ScriptRegistration):
    def plan_install(self, state: InstallState) -> FileChange:
        return FileChange(
            path=self.path,
            before=read_bytes(self.path),
            after=render_script(self.settings, self.agent).encode("utf-8"),
            what=self.label,
            mode=0o755,
            show_diff=False,
        )
