"""`stale_file_view` — the agent edited a file that changed on disk after it last read it.

Seed, R-stale-view: for each Edit at T_edit, take the most recent Read strictly before
T_edit; an external change inside (lastRead, T_edit) means the edit was made against a
stale view. An edit with no Read before it is not judged (nothing to be stale). A shell
command that prints the file (`cat`, `sed -n`, `head`) is a Read too: Codex reads that way.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tma1.engine.anomaly import Anomaly, Channel, Kind, Severity
from tma1.engine.following import READ_OF_RELATED
from tma1.engine.resolution import reread_related_file
from tma1.engine.rules._support import (
    RULE_WINDOW_MS,
    clock_time,
    edits,
    reads,
    shell_reads,
    visible,
)
from tma1.engine.spec import RuleSpec, Severities
from tma1.engine.window import RuleConfig, SessionWindow
from tma1.events import FileChange
from tma1.paths import display_path, norm_path


@dataclass(frozen=True, slots=True)
class StaleEdit:
    edit_ts: int
    last_read_ts: int
    change: FileChange


def find_stale_edits(
    reads: Iterable[int], edits: Iterable[int], changes: Iterable[FileChange]
) -> list[StaleEdit]:
    """Every edit of one file made on a stale view, with the latest change it missed."""
    read_ts = sorted(reads)
    by_ts = sorted(changes, key=lambda c: c.ts)
    change_ts = [c.ts for c in by_ts]
    out: list[StaleEdit] = []
    for t_edit in sorted(edits):
        i = bisect_left(read_ts, t_edit)  # reads strictly before the edit: read_ts[:i]
        if i == 0:
            continue
        last_read = read_ts[i - 1]
        lo = bisect_right(change_ts, last_read)  # first change after the read
        hi = bisect_left(change_ts, t_edit)  # first change at or after the edit
        if lo < hi:
            out.append(StaleEdit(t_edit, last_read, by_ts[hi - 1]))
    return out


def detect_stale_edit(
    reads: Iterable[int], edits: Iterable[int], changes: Iterable[FileChange]
) -> FileChange | None:
    """The latest external change some edit of this file missed, or None (seed helper).

    `reads`/`edits` are the agent's Read and edit times for one file; `changes` are the
    external changes of that file.
    """
    stale = find_stale_edits(reads, edits, changes)
    if not stale:
        return None
    return max((s.change for s in stale), key=lambda c: c.ts)


def stale_file_view(window: SessionWindow, now: int, config: RuleConfig) -> list[Anomaly]:
    project = window.project
    external: dict[str, list[FileChange]] = {}
    for c in window.changes:
        if c.ts <= now and c.writer_session != window.session_id:
            external.setdefault(norm_path(c.path, project), []).append(c)
    if not external:
        return []  # no edit is stale without a change it missed
    events = visible(window.events, now)
    edit_times: dict[str, list[int]] = {}
    # Only recent edits are judged: an old stale edit is history, not something to act on.
    for call in edits(events):
        if call.ts < now - RULE_WINDOW_MS:
            continue
        for f in call.files:
            edit_times.setdefault(norm_path(f, project), []).append(call.ts)
    if not edit_times:
        return []
    read_times: dict[str, list[int]] = {}
    for call in (*reads(events), *shell_reads(events)):
        for f in call.files:
            read_times.setdefault(norm_path(f, project), []).append(call.ts)

    found: list[Anomaly] = []
    for path, times in edit_times.items():
        stale = find_stale_edits(read_times.get(path, ()), times, external.get(path, ()))
        if stale:
            found.append(_finding(window, path, stale))
    return found


def _finding(window: SessionWindow, path: str, stale: Sequence[StaleEdit]) -> Anomaly:
    latest = max(stale, key=lambda s: (s.change.ts, s.edit_ts))
    newest_edit = max(s.edit_ts for s in stale)
    shown = display_path(path, window.project)
    edits_said = (
        f"your edit at {clock_time(newest_edit)}"
        if len(stale) == 1
        else f"{len(stale)} of your edits (latest {clock_time(newest_edit)})"
    )
    who = "another agent session" if latest.change.writer_session else "something outside any agent"
    evidence = (
        f"{shown} was changed on disk by {who} at "
        f"{clock_time(latest.change.ts)}, after your last Read of it at "
        f"{clock_time(latest.last_read_ts)}; {edits_said} did not re-read it first."
    )
    suggestion = (
        f"Read {shown} again and check that your edit still fits its current content "
        "before changing it further."
    )
    return Anomaly(
        kind=Kind.STALE_FILE_VIEW.value,
        severity=SPEC.severity.of(),
        channel=Channel.USER_PROMPT_SUBMIT.value,
        evidence=evidence,
        suggestion=suggestion,
        related_files=(path,),
        subject=path,
        last_evidence_ts=newest_edit,
        session_id=window.session_id,
    )


SPEC = RuleSpec(
    kind=Kind.STALE_FILE_VIEW.value,
    run=stale_file_view,
    channels=frozenset({Channel.USER_PROMPT_SUBMIT.value}),
    severity=Severities(Severity.HIGH),
    resolution=reread_related_file,
    follow=READ_OF_RELATED,
    fires_when="it edits a file that changed on disk after its last Read",
)
