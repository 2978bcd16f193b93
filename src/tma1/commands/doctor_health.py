"""`tma1 doctor`'s lines, and the ones it reads off the server's `GET /api/health`: hook
events lost (every drop is counted) and the projects the file watcher leaves out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

OK, WARN, FAIL, UNKNOWN = "ok", "warn", "FAIL", "?"


@dataclass(frozen=True)
class Diagnosis:
    status: str
    name: str
    message: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.status:<4}  {self.name:<18} {self.message}"
        return f"{text} — fix: {self.fix}" if self.fix else text


# Counters of `/api/health`'s ingest section that each stand for hook events lost.
_LOSSES = (
    ("dropped_disk_full", "the data dir's disk was full"),
    ("dropped_queue_full", "the outage queue was full"),
    ("rejected_by_db", "refused by the database"),
    ("lost_at_shutdown", "lost at shutdown"),
    ("journal_unreadable", "unreadable in the journal"),
)


def check_ingest(health: dict[str, Any]) -> Diagnosis:
    """One line: hook events lost since the server started (every drop is counted), or a
    hook worker that never came back."""
    ingest = health.get("ingest")
    if not isinstance(ingest, dict):
        return Diagnosis(WARN, "ingest", "the server reports no ingest counters")
    if ingest.get("stuck_workers"):
        return Diagnosis(
            FAIL,
            "ingest",
            f"{ingest['stuck_workers']} hook worker(s) stuck for "
            f"{ingest.get('longest_busy_s', '?')} s: the engine may not answer",
            "see the server's log; restart the server",
        )
    lost = {k: int(ingest.get(k) or 0) for k, _ in _LOSSES}
    total = sum(lost.values())
    if not total:
        return Diagnosis(OK, "ingest", "no hook event lost since the server started")
    parts = ", ".join(f"{lost[k]} {why}" for k, why in _LOSSES if lost[k])
    fix = "free space in the data dir" if lost["dropped_disk_full"] else "see the server's log"
    return Diagnosis(
        WARN, "ingest", f"{total} hook events lost since the server started: {parts}", fix
    )


# --- file watcher ---------------------------------------------------------------------

UNWATCHED_SHOWN = 10
_WATCH_FIXES = {
    "over budget": "add its generated directories to .gitignore, or raise "
    "TMA1_WATCH_MAX_DIRS and restart `tma1 serve`",
    "limit": "raise TMA1_MAX_WATCHED_PROJECTS, or wait until a watched project is idle for 2 h",
    "failed": "see the server's log; tma1 tries again after 10 min",
}


def check_watcher(health: dict[str, Any] | None) -> list[Diagnosis]:
    """One line on the file watcher, then one per project it does not watch (from
    GET /api/health): refused (a pseudo-filesystem, the root, the home directory), over
    the directory budget, past the project limit, or failed."""
    sensors = (health or {}).get("sensors")
    if not isinstance(sensors, dict):
        return []
    if not sensors.get("watch_files"):
        return [Diagnosis(OK, "file watcher", "off (tma1 serve --no-watch)")]
    files = sensors.get("files")
    files = files if isinstance(files, dict) else {}
    unwatched = files.get("unwatched")
    unwatched = unwatched if isinstance(unwatched, dict) else {}
    summary = f"watching {files.get('watched', 0)} project(s)"
    if not unwatched:
        return [Diagnosis(OK, "file watcher", summary)]
    out = [Diagnosis(WARN, "file watcher", f"{summary}; not watching {len(unwatched)}")]
    for project, why in list(unwatched.items())[:UNWATCHED_SHOWN]:
        why = why if isinstance(why, dict) else {}
        reason, detail = str(why.get("reason", "?")), str(why.get("detail", ""))
        out.append(
            Diagnosis(
                WARN, "not watched", f"{project}: {reason}: {detail}", _WATCH_FIXES.get(reason, "")
            )
        )
    if len(unwatched) > UNWATCHED_SHOWN:
        more = len(unwatched) - UNWATCHED_SHOWN
        out.append(Diagnosis(WARN, "not watched", f"and {more} more (GET /api/health)"))
    return out
