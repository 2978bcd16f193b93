"""Seed a real store with hook events (through the real payload parser) and emit rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tma1.engine.anomaly import SEVERITY_RANK, Channel, stable_key
from tma1.engine.rules import SPECS
from tma1.events import HookEvent, parse_payload
from tma1.store import Store

# Per kind, the channel and severity of a typical emit, as its rule's spec declares them: a
# Stop block where it can block, at its highest severity.
CHANNEL = {
    kind: (
        Channel.STOP_BLOCK if Channel.STOP_BLOCK in spec.channels else Channel.USER_PROMPT_SUBMIT
    ).value
    for kind, spec in SPECS.items()
}
SEVERITY = {
    kind: min(spec.severity.levels, key=SEVERITY_RANK.__getitem__) for kind, spec in SPECS.items()
}


@dataclass
class Session:
    """Events of one session, one second apart, written with `flush()`."""

    store: Store
    session_id: str
    ts: int
    cwd: str = "/repo"
    step_ms: int = 1000
    source: str = "claude-code"
    events: list[HookEvent] = field(default_factory=list)
    _n: int = 0

    def _tick(self) -> int:
        self.ts += self.step_ms
        return self.ts

    def hook(self, name: str, **extra: Any) -> Session:
        payload = {"session_id": self.session_id, "hook_event_name": name, "cwd": self.cwd}
        payload.update(extra)
        self.events.append(parse_payload(payload, ts=self._tick(), source=self.source))
        return self

    def call(
        self, tool: str, *, result: Any = None, fail: str | None = None, **tool_input: Any
    ) -> Session:
        """A PreToolUse + its PostToolUse (or PostToolUseFailure with `fail` as error)."""
        self._n += 1
        use_id = f"{self.session_id}-t{self._n}"
        self.hook("PreToolUse", tool_name=tool, tool_input=tool_input, tool_use_id=use_id)
        if fail is not None:
            self.hook(
                "PostToolUseFailure",
                tool_name=tool,
                tool_input=tool_input,
                tool_use_id=use_id,
                error=fail,
            )
        else:
            self.hook(
                "PostToolUse",
                tool_name=tool,
                tool_input=tool_input,
                tool_use_id=use_id,
                tool_response=result if result is not None else {"stdout": "ok"},
            )
        return self

    def read(self, path: str) -> Session:
        return self.call("Read", file_path=path)

    def edit(self, path: str) -> Session:
        return self.call("Edit", file_path=path, old_string="a", new_string="b")

    def bash(self, command: str, fail: str | None = None) -> Session:
        return self.call("Bash", command=command, fail=fail)

    def emit(
        self,
        kind: str,
        subject: str = "",
        related: list[str] | None = None,
        *,
        evidence: str | None = None,
        severity: str | None = None,
    ) -> Session:
        """An emit row at the current time (the agent was told now)."""
        sev = severity or SEVERITY[kind]
        self.store.insert_emits(
            [
                emit_row(
                    ts=self._tick(),
                    session_id=self.session_id,
                    kind=kind,
                    severity=sev,
                    subject=subject,
                    related=related or [],
                    evidence=evidence,
                )
            ]
        )
        return self

    def flush(self) -> Session:
        self.store.insert_events(self.events)
        self.events = []
        return self


def emit_row(
    *,
    ts: int,
    session_id: str,
    kind: str,
    severity: str | None = None,
    subject: str = "",
    related: list[str] | None = None,
    evidence: str | None = None,
) -> dict[str, Any]:
    sev = severity or SEVERITY[kind]
    return {
        "ts": ts,
        "session_id": session_id,
        "kind": kind,
        "severity": sev,
        "channel": CHANNEL[kind]
        if sev == "high" or kind != "build_broken_after_my_edit"
        else ("user_prompt_submit"),
        "evidence": evidence or f"{kind} on {subject or 'session'}",
        "suggestion": f"look at {subject or 'the session'}",
        "related_files": related or [],
        "first_emitted_at": ts,
        "stable_key": stable_key(kind, sev, subject),
    }
