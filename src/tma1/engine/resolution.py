"""Resolution checks (seed's table; design §2.4): pure functions of a `SessionWindow`.

Each check answers "did the agent do what resolves this finding after `since_ts` (the
finding's last emit)?" with the timestamp of the *latest* resolving event, or None. The
latest one matters: after success → failure → success the finding is resolved again, and
a finding re-emits only on evidence newer than the resolving event.

| kind                              | resolving event                                        |
|-----------------------------------|--------------------------------------------------------|
| stale_file_view                   | a Read of a related file (or a shell read: `cat f`)   |
| build_broken_after_my_edit        | a passing run of a check covering the failing one      |
| repeated_failed_build             | a passing run of a check covering the failing one      |
| test_stuck                        | a run reporting the test passed, or a covering pass    |
| external_modified_during_session  | none: the rule's 30-minute window decays it            |
| context_pressure                  | none: one-shot per context epoch; a compaction re-arms |

A check is fixed when a run that covers it passes — however spelled, in any lane, or a
wider run of its toolchain (`cargo build` for `cargo check`; design §2.15, §2.21); any
other successful shell (an `ls`) resolves nothing. The rules put the failing check in
`finding.extra["check"]`. A masked failure (design §2.8) has `tool_success` False, so it
never resolves anything. Each rule declares its check in its `RuleSpec`.
"""

from __future__ import annotations

from tma1.checks import Check, files_read_by, reported_passing
from tma1.engine.anomaly import Anomaly
from tma1.engine.checkruns import run_of
from tma1.engine.supersession import supersedes
from tma1.engine.window import SessionWindow
from tma1.events import READ_TOOLS, HookEvent
from tma1.paths import norm_path


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
    return any(norm_path(f, ev.cwd or project) in related for f in files)


def reread_related_file(finding: Anomaly, window: SessionWindow, since_ts: int) -> int | None:
    """stale_file_view: the agent read the file again after we told it."""
    related = frozenset(
        norm_path(f, window.project) for f in (*finding.related_files, finding.subject) if f
    )
    if not related:
        return None
    latest: int | None = None
    for ev in window.events:
        if ev.ts > since_ts and _reads_related(ev, related, window.project):
            latest = ev.ts
    return latest


def covering_pass(finding: Anomaly, window: SessionWindow, since_ts: int) -> int | None:
    """Build kinds: a run that covers the failing check passed after we told the agent."""
    check = finding.extra.get("check")
    if not isinstance(check, Check):
        return None
    latest: int | None = None
    for ev in window.events:
        if ev.ts > since_ts and ev.is_shell and ev.is_success and ev.tool_command:
            run = run_of(ev, window.project)
            if run is not None and run.passed and supersedes(run.check, check):
                latest = ev.ts
    return latest


def test_passed(finding: Anomaly, window: SessionWindow, since_ts: int) -> int | None:
    """test_stuck: a later run reported the test passing, or a covering run passed."""
    latest = covering_pass(finding, window, since_ts)
    for ev in window.events:
        if ev.ts > since_ts and reported_passing(finding.subject, ev.passed_test_ids):
            latest = max(latest or 0, ev.ts)
    return latest


test_passed.__test__ = False  # type: ignore[attr-defined]


def never(finding: Anomaly, window: SessionWindow, since_ts: int) -> None:
    return None
