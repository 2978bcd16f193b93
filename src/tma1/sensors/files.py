"""The file watcher: one watchfiles (Rust `notify`) watcher thread per project root. Each
change it sees is compared with the project's content baseline (`sensors.baseline`),
attributed to the session whose write explains it (`sensors.attribution`), and stored.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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
from tma1.sensors.ignore import VENDORED_DIRS, IgnoreMatcher
from tma1.sensors.scope import FAILED, LIMIT, MISSING, OVER_BUDGET, Refusal, plan, refusal_by_name
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
# A failed watch (no such directory, inotify limit) or one over budget is retried after
# this long (on the project's next event); a refused one never is.
RETRY_MS = 10 * MINUTE_MS
# New directories are added by re-opening the watch, which holds the GIL ~10-20 µs per
# directory (watchfiles adds the inotify watches without releasing it): at most once a
# second, and never more than 1/REOPEN_DUTY of the time. What is written in a new
# directory meanwhile is found by listing it.
REOPEN_MIN_MS = 1_000
REOPEN_DUTY = 20
# Projects remembered as not watched, with why (health, doctor, the dashboard).
UNWATCHED_KEEP = 200
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
    """A watcher thread for one project root. `known` is the content baseline.

    Everything slow happens on the thread, never on the hook's path: the refusals and the
    budgeted scan (`sensors.scope`), git's listing, the watch itself. One inotify watch per
    directory that is not ignored (non-recursive: watchfiles' recursive walk holds the GIL
    and enters `node_modules`); a new directory is added by re-opening the watch.
    """

    def __init__(self, sensor: FileSensor, project: str, now: int) -> None:
        self.sensor = sensor
        self.project = project
        self.last_event_ms = now
        self.stop_event = threading.Event()
        self.ready = threading.Event()
        self.failed: str | None = None
        self.state = "starting"  # → scanning → watching (or gone, with its reason)
        self.git = False
        extra = (str(sensor.settings.data_dir.expanduser().absolute()),)
        self.ignore = IgnoreMatcher(project, extra_ignored_dirs=extra, vendored=VENDORED_DIRS)
        self.dirs: set[str] = set()  # the directories watched
        self.new_dirs: set[str] = set()  # seen created since the watch was (re)opened
        self._opened_at = 0.0  # time.monotonic() of the last (re-)open
        self._reopen_gap_s = REOPEN_MIN_MS / 1000
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
        notify: Any = None
        try:
            verdict = self._setup()
            if verdict is None:
                notify = self._open()
            if notify is None:
                if verdict is not None:
                    self.sensor.give_up(self, verdict)
                return
            # The watch is live before the baseline is primed: a change made meanwhile is
            # queued in notify and compared once priming is done.
            try:
                self._prime()
            except Exception:
                log.exception("priming the baseline of %s failed; going on without", self.project)
            self.state = "watching"
            self.ready.set()
            log.info(
                "watching %s (%d directories, %d files in the baseline)",
                self.project,
                len(self.dirs),
                len(self.known),
            )
            while not self.stop_event.is_set():
                wait = round(self._reopen_gap_s * 1000) if self.new_dirs else TIMEOUT_MS
                raw = notify.watch(DEBOUNCE_MS, STEP_MS, wait, self.stop_event)
                if raw == "stop":
                    break
                if not isinstance(raw, str):
                    self._process_safely(raw)
                if self.new_dirs and time.monotonic() - self._opened_at >= self._reopen_gap_s:
                    notify = self._reopen(notify)
                    if notify is None:
                        return
        except Exception as exc:
            self.sensor.give_up(self, Refusal(FAILED, f"{type(exc).__name__}: {exc}"))
            log.exception("watching %s failed", self.project)
        finally:
            self.ready.set()
            if notify is not None:
                notify.close()

    def _setup(self) -> Refusal | None:
        """Why this project is not to be watched (None: `dirs` holds what to watch)."""
        self.state = "scanning"
        found = plan(self.project, self.ignore, self.sensor.settings.watch_max_dirs)
        if isinstance(found, Refusal):
            return found
        self.sensor.counters.inc("files.scanned_dirs", len(found.dirs))
        self.git = os.path.exists(os.path.join(self.project, ".git"))  # or a worktree's file
        self.dirs = set(found.dirs)
        return None

    def _open(self) -> Any:
        """A non-recursive watch of every directory in `dirs` (None: failed, given up)."""
        from watchfiles._rust_notify import RustNotify

        polling = bool(os.environ.get("WATCHFILES_FORCE_POLLING"))
        for attempt in (1, 2):
            started = time.monotonic()
            try:
                notify = RustNotify(sorted(self.dirs), False, polling, 300, False, True)
            except FileNotFoundError:
                if attempt == 2:
                    raise
                # A directory went away since it was listed: drop the gone ones.
                self.dirs = {d for d in self.dirs if os.path.isdir(d)}
                continue
            self._opened_at = time.monotonic()
            cost = self._opened_at - started
            self._reopen_gap_s = max(REOPEN_MIN_MS / 1000, REOPEN_DUTY * cost)
            return notify
        return None  # pragma: no cover (the loop returns or raises)

    def _reopen(self, old: Any) -> Any:
        """Watch the directories created since: a new watch over old and new ones (the
        old one's last changes are read first), then the new ones listed again to catch
        what was written in them before their watch existed."""
        fresh = {d for d in self.new_dirs if os.path.isdir(d)}
        self.new_dirs = set()
        dirs = {d for d in self.dirs if os.path.isdir(d)} | fresh
        limit = self.sensor.settings.watch_max_dirs
        if len(dirs) > limit:
            old.close()
            self.sensor.give_up(
                self,
                Refusal(
                    OVER_BUDGET,
                    f"grew past {limit:,} directories that are not ignored "
                    "(TMA1_WATCH_MAX_DIRS); ignore the generated ones in .gitignore or "
                    "raise the budget",
                ),
            )
            return None
        self.dirs = dirs
        notify = self._open()
        raw = old.watch(DEBOUNCE_MS, STEP_MS, STEP_MS, None)
        old.close()
        if not isinstance(raw, str):
            self._process_safely(raw)
        self._process_safely({(CHANGE_ADDED, d) for d in fresh})
        self.sensor.counters.inc("files.reopened")
        return notify

    def _process_safely(self, raw: set[tuple[int, str]]) -> None:
        try:
            self.process(raw)
        except Exception:
            self.sensor.counters.inc("errors.watch")
            log.exception("processing changes of %s failed", self.project)

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
                and not os.path.islink(path)
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
        """The files below a created directory; the directories met that have no watch
        yet go to `new_dirs` (watched from the next re-open)."""
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(top):
            if dirpath not in self.dirs:
                self.new_dirs.add(dirpath)
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
    # Projects not watched, with why and since when (ms); the newest UNWATCHED_KEEP.
    unwatched: dict[str, tuple[Refusal, int]] = field(default_factory=dict)
    _missing: dict[str, int] = field(default_factory=dict)  # no such directory, since (ms)
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
        """Start watching `project` unless it is watched, refused or waiting for a retry.
        On the hook's path: no filesystem access here, the watch's thread does it all."""
        if not os.path.isabs(project):
            return None
        now = self.clock.now_ms()
        with self._lock:
            w = self.watches.get(project)
            if w is not None:
                w.last_event_ms = now
                if w.failed is None and (w.thread.is_alive() or not w.ready.is_set()):
                    return w
                # The watch died: forget it and retry after RETRY_MS.
                del self.watches[project]
                self._note_unwatched(project, Refusal(FAILED, w.failed or "stopped"), now)
                return None
            missing_at = self._missing.get(project)
            if missing_at is not None and now - missing_at < RETRY_MS:
                return None
            known = self.unwatched.get(project)
            if (
                known is not None
                and known[0].reason != LIMIT
                and (known[0].permanent or now - known[1] < RETRY_MS)
            ):
                return None
            verdict = refusal_by_name(project)
            if verdict is not None:
                self._note_unwatched(project, verdict, now)
                return None
            if len(self.watches) >= self.settings.max_watched_projects:
                limit = self.settings.max_watched_projects
                self._note_unwatched(
                    project,
                    Refusal(
                        LIMIT,
                        f"already watching {len(self.watches)} projects, the limit "
                        f"(TMA1_MAX_WATCHED_PROJECTS={limit}); external changes there go "
                        "unseen until a watched project is idle for 2 h",
                    ),
                    now,
                )
                self.counters.inc("files.refused")
                return None
            self.unwatched.pop(project, None)
            w = ProjectWatch(self, project, now)
            self.watches[project] = w
        self.counters.inc("files.watches_started")
        w.thread.start()
        return w

    def give_up(self, w: ProjectWatch, why: Refusal) -> None:
        """`w`'s thread found the project refused, over budget or unwatchable."""
        w.failed = f"{why.reason}: {why.detail}"
        w.state = why.reason
        if why.reason == FAILED:
            self.counters.inc("errors.watch")
        with self._lock:
            if self.watches.get(w.project) is w:
                del self.watches[w.project]
            if why.reason == MISSING:
                # Quietly: replays and other machines' paths are no problem to list.
                self._missing[w.project] = self.clock.now_ms()
                while len(self._missing) > UNWATCHED_KEEP:
                    del self._missing[next(iter(self._missing))]
            else:
                self._note_unwatched(w.project, why, self.clock.now_ms())
        w.ready.set()

    def _note_unwatched(self, project: str, why: Refusal, now: int) -> None:
        """Remember (for health) and log, once per reason, why `project` goes unwatched."""
        before = self.unwatched.pop(project, None)
        self.unwatched[project] = (why, now)
        while len(self.unwatched) > UNWATCHED_KEEP:
            del self.unwatched[next(iter(self.unwatched))]
        if before is None or before[0].reason != why.reason:
            self.counters.inc("files.unwatched")
            log.warning("not watching %s: %s: %s", project, why.reason, why.detail)

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
        """Stop watches idle for 2 h; prune old intervals and verdicts on projects not
        watched (a hook naming one again notes it again). Returns the projects stopped."""
        now = self.clock.now_ms()
        self.attribution.prune(now)
        with self._lock:
            for project, (_why, since) in list(self.unwatched.items()):
                if now - since >= IDLE_STOP_MS:
                    del self.unwatched[project]
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

    def wait_settled(self, project: str, timeout: float = 10.0) -> bool:
        """Wait until `project`'s watch is live or given up; True when it is live."""
        with self._lock:
            w = self.watches.get(project)
        if w is not None:
            w.ready.wait(timeout)
        return self.wait_ready(project, 0)

    def health(self) -> dict[str, object]:
        with self._lock:
            projects = {
                p: {
                    "ready": w.ready.is_set(),
                    "state": w.state,
                    "failed": w.failed,
                    "directories": len(w.dirs),
                    "baseline_files": len(w.known),
                    "last_event_ms": w.last_event_ms,
                }
                for p, w in self.watches.items()
            }
            unwatched = {
                p: {"reason": why.reason, "detail": why.detail, "since_ms": since}
                for p, (why, since) in self.unwatched.items()
            }
        return {
            "watched": len(projects),
            "limit": self.settings.max_watched_projects,
            "max_dirs": self.settings.watch_max_dirs,
            "projects": projects,
            "unwatched": unwatched,
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
