"""The live `MuteSource` (tma1.engine.ports): muted kinds (design §2.20, `tma1.engine.mutes`)
kept in a file.

`tma1 mute KIND [--project P] [--for DURATION]` writes `mutes.json` in the data dir (mode
0600, replaced atomically); the daemon re-reads it when the file changes (one `stat` per
delivery), so a mute takes effect on the next hook without a restart. A file and not a
table: mutes are one user's preference for one daemon, a handful of rows, and the store's
schema changes go through Alembic migrations that other work owns.

A mute without a project holds for every project; one with `--for` ends by itself.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

from tma1.adapters.files import atomic_write
from tma1.engine.mutes import Mute

log = logging.getLogger("tma1.engine")  # where a mute shows: the engine's log

MUTES_FILE = "mutes.json"


def read_mutes(path: Path) -> list[Mute]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        log.warning("ignoring %s: %s", path, exc)
        return []
    items = raw.get("mutes") if isinstance(raw, dict) else None
    return [m for m in (Mute.from_json(x) for x in items or []) if m is not None]


def write_mutes(path: Path, mutes: list[Mute]) -> None:
    data = json.dumps({"version": 1, "mutes": [m.as_json() for m in mutes]}, indent=2) + "\n"
    atomic_write(path, data.encode("utf-8"), mode=0o600)


def add_mute(path: Path, mute: Mute) -> list[Mute]:
    """Mute (replacing a mute of the same kind and project); returns the new list."""
    kept = [m for m in read_mutes(path) if (m.kind, m.project) != (mute.kind, mute.project)]
    kept.append(mute)
    write_mutes(path, kept)
    return kept


def remove_mute(path: Path, kind: str, project: str | None) -> Mute | None:
    """Unmute exactly (kind, project); the mute removed, or None when there was none."""
    mutes = read_mutes(path)
    gone = next((m for m in mutes if (m.kind, m.project) == (kind, project)), None)
    if gone is not None:
        write_mutes(path, [m for m in mutes if m is not gone])
    return gone


class Mutes:
    """The daemon's view of `mutes.json`, re-read when the file changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._mutes: list[Mute] = []

    def current(self) -> list[Mute]:
        try:
            st = os.stat(self.path)
            stamp: tuple[int, int, int] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = None
        with self._lock:
            if stamp != self._stamp:
                self._mutes = read_mutes(self.path) if stamp is not None else []
                self._stamp = stamp
            return self._mutes

    def muted(self, kind: str, project: str | None, now_ms: int) -> Mute | None:
        return next((m for m in self.current() if m.matches(kind, project, now_ms)), None)
