"""`external_modified_during_session` — files of this project changed outside this session.

Seed: at least one change not explained by this session's writes (design §2.10: a change
by nobody we know, or by another session), after the session started and no older than
30 minutes. Session-wide: subject "" — suppression's 10-minute window and the 30-minute
decay keep it quiet; the digest reports new changes itself (design §2.7).
"""

from __future__ import annotations

from tma1.engine.anomaly import Anomaly, Channel, Kind, Severity
from tma1.engine.following import READ_OF_RELATED
from tma1.engine.resolution import never
from tma1.engine.rules._support import (
    RULE_WINDOW_MS,
    clock_time,
    plural,
)
from tma1.engine.spec import RuleSpec, Severities
from tma1.engine.window import RuleConfig, SessionWindow
from tma1.events import FileChange
from tma1.paths import display_path, norm_path

MAX_FILES = 10


def external_modified_during_session(
    window: SessionWindow, now: int, config: RuleConfig
) -> list[Anomaly]:
    start = window.session_start_ts
    if start is None:
        start = window.events[0].ts if window.events else now - RULE_WINDOW_MS
    oldest = now - RULE_WINDOW_MS
    changes = [
        c
        for c in window.changes
        if start < c.ts <= now and c.ts >= oldest and c.writer_session != window.session_id
    ]
    if not changes:
        return []
    return [_finding(window, changes)]


def _finding(window: SessionWindow, changes: list[FileChange]) -> Anomaly:
    newest_first = sorted(changes, key=lambda c: -c.ts)
    paths = list(dict.fromkeys(norm_path(c.path, window.project) for c in newest_first))
    others = {c.writer_session for c in changes if c.writer_session}
    unknown = sum(1 for c in changes if not c.writer_session)
    who = []
    if others:
        who.append(plural(len(others), "other agent session"))
    if unknown:
        who.append("something outside any agent (an editor, git, a script)")
    shown = [display_path(p, window.project) for p in paths[:MAX_FILES]]
    more = f" and {len(paths) - MAX_FILES} more" if len(paths) > MAX_FILES else ""
    evidence = (
        f"{plural(len(paths), 'file')} of this project changed without you since "
        f"{clock_time(newest_first[-1].ts)} (latest at {clock_time(newest_first[0].ts)}), "
        f"by {' and '.join(who)}: {', '.join(shown)}{more}."
    )
    suggestion = f"Read {shown[0]} again before you rely on or edit it" + (
        ", and re-read the other changed files before touching them." if len(paths) > 1 else "."
    )
    return Anomaly(
        kind=Kind.EXTERNAL_MODIFIED_DURING_SESSION.value,
        severity=SPEC.severity.of(),
        channel=Channel.USER_PROMPT_SUBMIT.value,
        evidence=evidence,
        suggestion=suggestion,
        related_files=tuple(paths[:MAX_FILES]),
        subject="",
        last_evidence_ts=newest_first[0].ts,
        session_id=window.session_id,
    )


SPEC = RuleSpec(
    kind=Kind.EXTERNAL_MODIFIED_DURING_SESSION.value,
    run=external_modified_during_session,
    channels=frozenset({Channel.USER_PROMPT_SUBMIT.value}),
    severity=Severities(Severity.MEDIUM),
    # The rule's 30-minute window decays it; new changes are news (design §2.7).
    resolution=never,
    follow=READ_OF_RELATED,
    novel_evidence=True,
    tells_changes=True,
    fires_when="a file of the project changed outside this session in the last 30 min",
)
