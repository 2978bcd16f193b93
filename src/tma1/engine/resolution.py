"""Resolution checks (seed's table; design §2.4): pure functions of a `SessionWindow`.

Each check answers "did the agent do what resolves this finding after `since_ts` (the
finding's last emit)?" with the timestamp of the *latest* resolving event, or None. The
latest one matters: after success → failure → success the finding is resolved again, and
a finding re-emits only on evidence newer than the resolving event.

| kind                              | resolving event                                        |
|-----------------------------------|--------------------------------------------------------|
| stale_file_view                   | a Read of a related file (or a shell read: `cat f`)   |
| build_broken_after_my_edit        | any successful shell PostToolUse                       |
| repeated_failed_build             | any successful shell PostToolUse                       |
| test_stuck                        | any successful shell PostToolUse                       |
| external_modified_during_session  | none: the rule's 30-minute window decays it            |
| context_pressure                  | none: one-shot per context epoch; a compaction re-arms |

A masked failure (design §2.8) has `tool_success` False, so it never resolves anything.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from tma1.engine.anomaly import Anomaly, Kind
from tma1.engine.window import SessionWindow
from tma1.events import READ_TOOLS, HookEvent
from tma1.extract import files_read_by

ResolutionCheck = Callable[[Anomaly, SessionWindow, int], "int | None"]


def _norm(path: str, base: str | None = None) -> str:
    """One spelling per file (the rules spell related files the same way)."""
    p = path.replace("\\", "/")
    if base and not p.startswith("/") and not re.match(r"^[A-Za-z]:/", p):
        p = base.replace("\\", "/").rstrip("/") + "/" + p
    return os.path.normpath(p).replace("\\", "/") if p else p


def _reads_related(ev: HookEvent, related: frozenset[str], project: str | None) -> bool:
    if ev.event_type not in ("PreToolUse", "PostToolUse"):
        return False
    if ev.tool_name in READ_TOOLS:
        files = ev.tool_files or ([ev.tool_file_path] if ev.tool_file_path else [])
    elif ev.is_shell and ev.tool_command:
        # `cat f` / `sed -n 1,80p f` is how Codex reads: the rule counts it as a Read, so
        # the resolution check must too, or a Codex re-read would never resolve.
        files = files_read_by(ev.tool_command)
    else:
        return False
    return any(_norm(f, ev.cwd or project) in related for f in files)


def reread_related_file(finding: Anomaly, window: SessionWindow, since_ts: int) -> int | None:
    """stale_file_view: the agent read the file again after we told it."""
    related = frozenset(
        _norm(f, window.project) for f in (*finding.related_files, finding.subject) if f
    )
    if not related:
        return None
    latest: int | None = None
    for ev in window.events:
        if ev.ts > since_ts and _reads_related(ev, related, window.project):
            latest = ev.ts
    return latest


def successful_shell(finding: Anomaly, window: SessionWindow, since_ts: int) -> int | None:
    """Build and test kinds: any shell command succeeded after we told the agent."""
    latest: int | None = None
    for ev in window.events:
        if ev.ts > since_ts and ev.is_shell and ev.is_success:
            latest = ev.ts
    return latest


def never(finding: Anomaly, window: SessionWindow, since_ts: int) -> None:
    return None


CHECKS: dict[str, ResolutionCheck] = {
    Kind.STALE_FILE_VIEW: reread_related_file,
    Kind.BUILD_BROKEN_AFTER_MY_EDIT: successful_shell,
    Kind.REPEATED_FAILED_BUILD: successful_shell,
    Kind.TEST_STUCK: successful_shell,
    Kind.EXTERNAL_MODIFIED_DURING_SESSION: never,
    Kind.CONTEXT_PRESSURE: never,
}


def resolved_at(finding: Anomaly, window: SessionWindow, since_ts: int) -> int | None:
    """The latest resolving event after `since_ts`, or None (unknown kinds never resolve)."""
    return CHECKS.get(finding.kind, never)(finding, window, since_ts)
