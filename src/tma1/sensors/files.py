"""The file watcher: one watchfiles (Rust `notify`) watcher thread per project root. Each
change it sees is compared with the project's content baseline (`sensors.baseline`),
attributed to the session whose write explains it (`sensors.attribution`), and stored.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tma1.clock import MINUTE_MS, SECOND_MS, Clock
from tma1.config import Settings
from tma1.counters import Counters
from tma1.events import FileChange, HookEvent
from tma1.sensors.attribution import RECENT_KEEP_MS, Attribution, Interval
from tma1.sensors.baseline import (
    DELETED,
    PRIME_MAX_FILES,
    dirty_paths,
    file_signature,
    tracked_hashes,
)
from tma1.sensors.ignore import IgnoreMatcher
from tma1.store import Store

log = logging.getLogger("tma1.sensors.files")

IDLE_STOP_MS = 2 * 60 * MINUTE_MS
RECENT_MAX = 20_000
# Rust notify groups changes until `STEP_MS` pass without a new one (at most DEBOUNCE_MS).
# One save is several inotify events, so the step is paid about twice: 30 ms gave a p50
# write→row of ~40 ms, 50 ms ~100 ms. Each step wakes the thread: ~0.15 % of a core per
# watched project when idle (bench/bench_sensors.py).
STEP_MS = 30
DEBOUNCE_MS = 1_600
TIMEOUT_MS = 5_000
# A failed watch (no such directory, inotify limit) is retried after this long.
RETRY_MS = 10 * MINUTE_MS
# A file's mtime stands in for the write time when it is this recent (attribution only).
WRITTEN_AT_MAX_MS = 10 * SECOND_MS

CHANGE_ADDED, CHANGE_DELETED = 1, 3  # watchfiles.Change values


# --- one project's watcher ----------------------------------------------------------------


@dataclass
class _Pending:
    """A stored change nobody explained yet; a late interval may still claim it."""

    id: int
    change: FileChange
    written_at: int | None


class ProjectWatch:
    """A watcher thread for one project root. `known` is the content baseline."""

    def __init__(self, sensor: FileSensor, project: str, now: int) -> None:
        self.sensor = sensor
        self.project = project
        self.last_event_ms = now
        self.stop_event = threading.Event()
        self.ready = threading.Event()
        self.failed: str | None = None
        self.git = os.path.exists(os.path.join(project, ".git"))  # a dir, or a worktree's file
        extra = (str(sensor.settings.data_dir.expanduser().absolute()),)
        self.ignore = IgnoreMatcher(project, extra_ignored_dirs=extra)
        self.known: dict[str, str] = {}
        self.known_dirs: set[str] = set()  # directories holding known files
        self.written_at: dict[str, int] = {}  # this batch's mtimes (ms), for attribution
        self._sep_git = os.sep + ".git" + os.sep
        self._exclude_file = os.path.join(project, ".git", "info", "exclude")
        self.baseline = False  # True once git told us every file the project has
        self.thread = threading.Thread(
            target=self._run, name=f"tma1-watch:{os.path.basename(project)}", daemon=True
        )

    # --- thread ------------------------------------------------------------------------

    def _run(self) -> None:
        from watchfiles._rust_notify import RustNotify

        try:
            notify = RustNotify(
                [self.project],
                False,
                bool(os.environ.get("WATCHFILES_FORCE_POLLING")),
                300,
                True,
                True,
            )
        except Exception as exc:
            self.failed = f"{type(exc).__name__}: {exc}"
            self.sensor.counters.inc("errors.watch")
            log.warning("cannot watch %s: %s", self.project, self.failed)
            self.ready.set()
            return
        try:
            # The watch is live before the baseline is primed: a change made meanwhile is
            # queued in notify and compared once priming is done.
            try:
                self._prime()
            except Exception:
                log.exception("priming the baseline of %s failed; going on without", self.project)
            self.ready.set()
            log.info("watching %s (%d files in the baseline)", self.project, len(self.known))
            while not self.stop_event.is_set():
                raw = notify.watch(DEBOUNCE_MS, STEP_MS, TIMEOUT_MS, self.stop_event)
                if raw == "stop":
                    break
                if isinstance(raw, str):
                    continue
                try:
                    self.process(raw)
                except Exception:
                    self.sensor.counters.inc("errors.watch")
                    log.exception("processing changes of %s failed", self.project)
        finally:
            self.ready.set()
            notify.close()

    def _prime(self) -> None:
        if not self.git:
            return
        for path, blob in tracked_hashes(self.project) or ():
            self._remember(path, blob)
        dirty = dirty_paths(self.project)
        if dirty is None:
            return
        for path in dirty[:PRIME_MAX_FILES]:
            sig = file_signature(path)
            if sig is None:
                self.known.pop(path, None)
            else:
                self._remember(path, sig[0])
        self.baseline = len(dirty) <= PRIME_MAX_FILES

    def _noise(self, path: str) -> bool:
        """Cheap string checks for the bulk of raw events nobody wants (git's own churn,
        our database): dropped before any stat or ignore lookup."""
        if path == self._exclude_file:
            self.ignore.invalidate(path)
            return True
        if self._sep_git in path or path.endswith(self._sep_git[:-1]):
            return True
        return any(path == d or path.startswith(d + os.sep) for d in self.ignore.extra)

    def process(self, raw: set[tuple[int, str]]) -> None:
        """Turn one notify batch into stored changes."""
        self.sensor.counters.inc("files.raw_events", len(raw))
        by_path: dict[str, set[int]] = {}
        for change, path in raw:
            p = os.path.normpath(path)
            if not self._noise(p):
                by_path.setdefault(p, set()).add(int(change))
        if not by_path:
            return
        # Directory moves and creations report only the directory: expand them.
        for path in list(by_path):
            if (
                CHANGE_ADDED in by_path[path]
                and os.path.isdir(path)
                and not self.ignore.ignored(path, is_dir=True)
            ):
                for sub in self._walk(path):
                    by_path.setdefault(sub, {CHANGE_ADDED})
            elif path in self.known_dirs and not os.path.lexists(path):
                self.known_dirs.discard(path)
                prefix = path + os.sep
                for known_path, sig in list(self.known.items()):
                    if known_path.startswith(prefix) and sig != DELETED:
                        by_path.setdefault(known_path, {CHANGE_DELETED})
        for path in by_path:  # a new ignore file applies to its whole batch
            self.ignore.invalidate(path)
        now = self.sensor.clock.now_ms()
        changes = [
            self._classify(path, kinds, now)
            for path, kinds in sorted(by_path.items())
            if not self.ignore.ignored(path)
        ]
        out = [c for c in changes if c is not None]
        hints, self.written_at = self.written_at, {}
        self.sensor.store_changes(self.project, out, hints)

    def _remember(self, path: str, signature: str) -> None:
        self.known[path] = signature
        parent = os.path.dirname(path)
        while len(parent) > len(self.project) and parent not in self.known_dirs:
            self.known_dirs.add(parent)
            parent = os.path.dirname(parent)

    def _walk(self, top: str, limit: int = 5_000) -> list[str]:
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = [
                d
                for d in dirnames
                if not self.ignore.ignored(os.path.join(dirpath, d), is_dir=True)
            ]
            for name in filenames:
                found.append(os.path.join(dirpath, name))
                if len(found) >= limit:
                    return found
        return found

    def _classify(self, path: str, kinds: set[int], now: int) -> FileChange | None:
        counters = self.sensor.counters
        prev = self.known.get(path)
        sig = file_signature(path)
        if sig is None:
            if os.path.lexists(path) or prev == DELETED:
                # A directory, socket, fifo, dangling link or unreadable file; or gone before.
                return None
            if prev is None and (self.baseline or kinds != {CHANGE_DELETED}):
                # Never existed as far as we know: an editor's or tool's temporary file.
                counters.inc("files.transient")
                return None
            self.known[path] = DELETED
            return FileChange(ts=now, project=self.project, path=path, change="deleted")
        signature, size, content_hash, mtime_ms = sig
        if prev == signature:
            counters.inc("files.unchanged")
            return None
        self._remember(path, signature)
        if now - WRITTEN_AT_MAX_MS <= mtime_ms <= now:
            self.written_at[path] = mtime_ms
        added = prev == DELETED or (prev is None and (self.baseline or CHANGE_ADDED in kinds))
        return FileChange(
            ts=now,
            project=self.project,
            path=path,
            change="added" if added else "modified",
            size=size,
            content_hash=content_hash,
        )


# --- the sensor ---------------------------------------------------------------------------


@dataclass
class FileSensor:
    store: Store
    clock: Clock
    settings: Settings
    counters: Counters
    on_project_change: Callable[[str], None]
    attribution: Attribution = field(default_factory=Attribution)
    watches: dict[str, ProjectWatch] = field(default_factory=dict)
    _failed: dict[str, int] = field(default_factory=dict)
    _refused: set[str] = field(default_factory=set)
    _recent: deque[_Pending] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _recent_lock: threading.Lock = field(default_factory=threading.Lock)

    # --- hook path -------------------------------------------------------------------------

    def on_event(self, ev: HookEvent) -> None:
        if ev.project:
            self.ensure_watch(ev.project)
        iv = self.attribution.note(ev)
        if iv is not None:
            self._claim(iv)

    def ensure_watch(self, project: str) -> ProjectWatch | None:
        now = self.clock.now_ms()
        with self._lock:
            w = self.watches.get(project)
            if w is not None:
                w.last_event_ms = now
                if w.failed is None and (w.thread.is_alive() or not w.ready.is_set()):
                    return w
                # The watch died: forget it and retry after RETRY_MS.
                del self.watches[project]
                self._failed[project] = now
                return None
            if not self._watchable(project, now):
                return None
            if len(self.watches) >= self.settings.max_watched_projects:
                self._refuse(
                    project,
                    "not watching %s: already watching %d projects, the limit "
                    "(TMA1_MAX_WATCHED_PROJECTS=%d); external changes there go unseen "
                    "until a watched project is idle for 2 h",
                    len(self.watches),
                    self.settings.max_watched_projects,
                )
                self.counters.inc("files.refused")
                return None
            self._refused.discard(project)
            w = ProjectWatch(self, project, now)
            self.watches[project] = w
        self.counters.inc("files.watches_started")
        w.thread.start()
        return w

    def _watchable(self, project: str, now: int) -> bool:
        failed_at = self._failed.get(project)
        if failed_at is not None and now - failed_at < RETRY_MS:
            return False
        if not os.path.isabs(project) or not os.path.isdir(project):
            return False
        # A cwd outside any repository makes its own project; `/` or a home directory
        # would mean watching a whole disk.
        real = os.path.realpath(project)
        too_wide = {os.path.realpath(p) for p in (os.sep, Path.home(), tempfile.gettempdir())}
        if real in too_wide:
            self._refuse(
                project, "not watching %s: the filesystem root, a home or the temp directory"
            )
            return False
        return True

    def _refuse(self, project: str, reason: str, *args: object) -> None:
        """Log why `project` goes unwatched, once until it is watched."""
        if project not in self._refused:
            self._refused.add(project)
            log.warning(reason, project, *args)

    # --- watcher thread path --------------------------------------------------------------

    def _explain(self, c: FileChange, written_at: int | None) -> str | None:
        who = self.attribution.explain(c.project, c.path, c.ts, c.content_hash)
        if who is None and written_at is not None:
            # Seen late (a long notify batch, a busy machine): the write itself may still
            # fall inside an interval.
            who = self.attribution.explain(c.project, c.path, written_at, c.content_hash)
        return who

    def store_changes(
        self, project: str, changes: list[FileChange], written_at: dict[str, int] | None = None
    ) -> None:
        """Attribute and store one batch; `written_at` maps paths to their mtime (ms)."""
        if not changes:
            return
        hints = written_at or {}
        attributed = [
            dataclasses.replace(c, writer_session=self._explain(c, hints.get(c.path)))
            for c in changes
        ]
        ids = self.store.insert_changes(attributed)
        self.counters.inc("files.changes", len(ids))
        late: dict[str, list[int]] = {}
        with self._recent_lock:
            for row_id, c in zip(ids, attributed, strict=True):
                if c.writer_session is not None:
                    continue
                # An interval noted while this batch was being inserted has not seen these
                # rows in `_recent` yet: ask again now that no claim can slip in between.
                who = self._explain(c, hints.get(c.path))
                if who is not None:
                    late.setdefault(who, []).append(row_id)
                else:
                    self._recent.append(_Pending(row_id, c, hints.get(c.path)))
            self._trim_recent(self.clock.now_ms())
        for who, row_ids in late.items():
            self.store.set_change_writer(row_ids, who)
            self.counters.inc("files.late_attributed", len(row_ids))
        self.on_project_change(project)

    def _trim_recent(self, now: int) -> None:
        while self._recent and (
            len(self._recent) > RECENT_MAX or self._recent[0].change.ts < now - RECENT_KEEP_MS
        ):
            self._recent.popleft()

    def _claim(self, iv: Interval) -> None:
        """Attribute stored, unexplained changes that `iv` (just opened or closed) explains."""
        with self._recent_lock:
            if not self._recent:
                return
            claimed = [
                p
                for p in self._recent
                if any(
                    ts is not None
                    and iv.explains(p.change.project, p.change.path, ts, p.change.content_hash)
                    for ts in (p.change.ts, p.written_at)
                )
            ]
            if not claimed:
                return
            ids = {p.id for p in claimed}
            self._recent = deque(p for p in self._recent if p.id not in ids)
        self.store.set_change_writer(sorted(ids), iv.session_id)
        self.counters.inc("files.late_attributed", len(ids))
        for project in {p.change.project for p in claimed}:
            self.on_project_change(project)

    # --- housekeeping ---------------------------------------------------------------------

    def reap(self) -> list[str]:
        """Stop watches idle for 2 h; prune old intervals. Returns the projects stopped."""
        now = self.clock.now_ms()
        self.attribution.prune(now)
        with self._recent_lock:
            self._trim_recent(now)
        stopped: list[ProjectWatch] = []
        with self._lock:
            for project, w in list(self.watches.items()):
                if now - w.last_event_ms >= IDLE_STOP_MS:
                    del self.watches[project]
                    stopped.append(w)
        for w in stopped:
            log.info("stopped watching %s: no events for 2 h", w.project)
        _stop_all(stopped)
        return [w.project for w in stopped]

    def stop(self) -> None:
        with self._lock:
            watches = list(self.watches.values())
            self.watches.clear()
        _stop_all(watches)

    def wait_ready(self, project: str, timeout: float = 10.0) -> bool:
        with self._lock:
            w = self.watches.get(project)
        return bool(w and w.ready.wait(timeout) and w.failed is None)

    def health(self) -> dict[str, object]:
        with self._lock:
            projects = {
                p: {
                    "ready": w.ready.is_set(),
                    "failed": w.failed,
                    "baseline_files": len(w.known),
                    "last_event_ms": w.last_event_ms,
                }
                for p, w in self.watches.items()
            }
        return {
            "watched": len(projects),
            "limit": self.settings.max_watched_projects,
            "projects": projects,
            "intervals": self.attribution.size(),
            "changes": self.counters.get("files.changes"),
        }


def _stop_all(watches: list[ProjectWatch]) -> None:
    """Tell every watcher thread to stop, then wait for each (all stop at once)."""
    for w in watches:
        w.stop_event.set()
    for w in watches:
        if w.thread.is_alive():
            w.thread.join(2.0)
