"""Helpers shared by the engine tests: real hook payloads, and a scripted rule.

The scripted rule stands in for "a rule that currently sees these findings", so the
suppression/delivery tests control exactly what the detector proposes while every other
part (store, window loading, resolution checks, emit log, HTTP) stays real.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tma1.engine.anomaly import Anomaly, Channel, Kind, Severity
from tma1.engine.window import RuleConfig, SessionWindow
from tma1.events import HookEvent, parse_payload
from tma1.store import Store

PROJECT = "/nonexistent/tma1-engine-tests/proj"


def payload(sid: str, hook: str, **kw: Any) -> dict[str, Any]:
    return {"session_id": sid, "hook_event_name": hook, "cwd": PROJECT, **kw}


def bash_fail(sid: str, cmd: str, output: str = "Exit code 2\nerror: it broke") -> dict[str, Any]:
    return payload(
        sid,
        "PostToolUseFailure",
        tool_name="Bash",
        tool_input={"command": cmd},
        error=output,
        tool_use_id=f"fail-{cmd}",
    )


def bash_ok(sid: str, cmd: str, stdout: str = "ok") -> dict[str, Any]:
    return payload(
        sid,
        "PostToolUse",
        tool_name="Bash",
        tool_input={"command": cmd},
        tool_response={"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False},
    )


def read(sid: str, path: str, hook: str = "PreToolUse") -> dict[str, Any]:
    return payload(sid, hook, tool_name="Read", tool_input={"file_path": path})


def stop(sid: str, active: bool = False) -> dict[str, Any]:
    return payload(sid, "Stop", stop_hook_active=active)


def prompt(sid: str, text: str = "go on") -> dict[str, Any]:
    return payload(sid, "UserPromptSubmit", prompt=text)


def store_event(store: Store, data: dict[str, Any], ts: int) -> HookEvent:
    ev = parse_payload(data, ts=ts)
    store.insert_event(ev)
    return ev


def finding(
    kind: str,
    *,
    subject: str = "",
    severity: str | None = None,
    channel: str | None = None,
    last_evidence_ts: int = 0,
    related_files: tuple[str, ...] = (),
    session_id: str = "",
) -> Anomaly:
    default_sev, default_ch = {
        Kind.STALE_FILE_VIEW: (Severity.HIGH, Channel.USER_PROMPT_SUBMIT),
        Kind.BUILD_BROKEN_AFTER_MY_EDIT: (Severity.HIGH, Channel.STOP_BLOCK),
        Kind.REPEATED_FAILED_BUILD: (Severity.HIGH, Channel.STOP_BLOCK),
        Kind.TEST_STUCK: (Severity.MEDIUM, Channel.USER_PROMPT_SUBMIT),
        Kind.EXTERNAL_MODIFIED_DURING_SESSION: (Severity.MEDIUM, Channel.USER_PROMPT_SUBMIT),
        Kind.CONTEXT_PRESSURE: (Severity.MEDIUM, Channel.USER_PROMPT_SUBMIT),
    }.get(Kind(kind), (Severity.MEDIUM, Channel.USER_PROMPT_SUBMIT))
    return Anomaly(
        kind=kind,
        severity=severity or default_sev.value,
        channel=channel or default_ch.value,
        evidence=f"{kind} evidence about {subject or 'the session'}",
        suggestion=f"Do the one thing that fixes {kind} {subject}".strip(),
        related_files=related_files,
        subject=subject,
        last_evidence_ts=last_evidence_ts,
        session_id=session_id,
    )


@dataclass
class Scripted:
    """A rule whose findings the test sets; records every window it was given."""

    findings: list[Anomaly] = field(default_factory=list)
    calls: list[tuple[SessionWindow, int]] = field(default_factory=list)

    def __call__(self, window: SessionWindow, now: int, config: RuleConfig) -> list[Anomaly]:
        self.calls.append((window, now))
        return list(self.findings)
