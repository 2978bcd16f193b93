"""The file watcher: one watchfiles (Rust `notify`) watcher thread per project root, and the
attribution of each change to the session whose write explains it (design §2.10).

Attribution. A session's *write interval* runs from the PreToolUse of an
Edit/Write/MultiEdit/NotebookEdit/apply_patch on a path to its PostToolUse(Failure), and a
*shell interval* from a Bash PreToolUse to its Post, for every path of the event's project.
Both extend 2 s past the Post (a change is stamped when the watcher sees it, after the
write) — but not past the session's Stop or SessionEnd: a save 1.2 s after the session
ended is not its own (a write the watcher saw late is still matched by its mtime) — and,
while the Post is pending, stay open for at most 10 min. There is no slack
before the Pre: a change stamped before the call began is someone else's (the human edit
just before the agent's stale Edit must stay external) — except when it carries exactly
the content the Write call carries, which proves it is that call's even if the Pre was
stamped late. Intervals live in memory (they are minutes long; a restart forgets at most
the calls in flight). Ordering races are normal — the Pre is stamped when the server
receives it, but a slow store lets the tool write before the Pre is stored — so a change
nobody explained is remembered for 15 min, and an interval stored later claims it (the row
is updated, the project's cached candidates dropped). Changes are stored as soon as they
are seen: no settle delay on the write → row path.

Content baseline. A change whose content hash (git's blob SHA-1, for files ≤ 4 MB) equals
the last known hash of that path is dropped (touch, no-op save). When the watch starts the
baseline is primed from git: the index (`git ls-files -s`) gives the hash of every tracked
file without reading it, and the files `git status` lists as modified or untracked are
hashed once (at most `PRIME_MAX_FILES`). So a `touch` of any clean tracked file, of a
modified one, or of an untracked one present at start is dropped. Outside a git
repository there is no baseline: the first change seen of a path is always recorded (a
touch of a never-seen file counts once), later ones are compared. Files over 4 MB carry
no hash; a repeat event with the same size and mtime is dropped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import subprocess
import tempfile
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tma1.clock import MINUTE_MS, SECOND_MS, Clock
from tma1.config import Settings
from tma1.counters import Counters
from tma1.events import WRITE_TOOLS, FileChange, HookEvent
from tma1.paths import norm_path
from tma1.sensors.ignore import IgnoreMatcher
from tma1.store import Store

log = logging.getLogger("tma1.sensors.files")

SLACK_MS = 2 * SECOND_MS
OPEN_MAX_MS = 10 * MINUTE_MS
IDLE_STOP_MS = 2 * 60 * MINUTE_MS
HASH_LIMIT = 4 * 1024 * 1024
PRIME_MAX_FILES = 5_000
RECENT_KEEP_MS = 15 * MINUTE_MS
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
# Events after which none of the session's tool calls can still be running.
TURN_ENDS = frozenset({"Stop", "UserPromptSubmit", "SessionEnd"})
# Events after which the session writes nothing until its next prompt: the 2 s slack of
# its calls ends here (a save 1.2 s after a SessionEnd is not the session's own).
SLACK_ENDS = frozenset({"Stop", "SessionEnd"})

_DELETED = "\0deleted"

CHANGE_ADDED, CHANGE_MODIFIED, CHANGE_DELETED = 1, 2, 3  # watchfiles.Change values


def git_blob_hash(data: bytes) -> str:
    """`git hash-object` of `data`: comparable with the index without reading the file."""
    h = hashlib.sha1(usedforsecurity=False)
    h.update(b"blob %d\0" % len(data))
    h.update(data)
    return h.hexdigest()


# --- attribution ---------------------------------------------------------------------------


@dataclass(slots=True)
class Interval:
    session_id: str
    kind: str  # write | shell
    project: str | None
    paths: frozenset[str]
    start: int
    end: int | None = None  # None: the Post is pending
    # Blob hashes of the content a Write call carries: proof that a change is this call's.
    content_hashes: frozenset[str] = frozenset()
    # The session's Stop/SessionEnd after this call: the slack ends there.
    stopped_at: int | None = None

    def covers(self, ts: int, content_hash: str | None = None) -> bool:
        # The 2 s slack extends past the Post (the watcher stamps a change when it sees it,
        # after the write). Before the Pre there is none: a change stamped before the call
        # started is someone else's — the human edit right before the agent's stale Edit —
        # unless it carries exactly the content this Write call wrote (the Pre was stamped
        # late, after the write).
        lead = SLACK_MS if content_hash is not None and content_hash in self.content_hashes else 0
        if ts < self.start - lead:
            return False
        return ts <= self.last_ts()

    def last_ts(self) -> int:
        if self.end is None:
            return self.start + OPEN_MAX_MS
        if self.stopped_at is not None:
            # The slack past the Post ends at the session's Stop/SessionEnd (design §2.10).
            return min(self.end + SLACK_MS, max(self.stopped_at, self.end))
        return self.end + SLACK_MS

    def explains(self, project: str, path: str, ts: int, content_hash: str | None = None) -> bool:
        if self.kind == "write":
            return path in self.paths and self.covers(ts, content_hash)
        return self.project == project and self.covers(ts)


def _written_hashes(ev: HookEvent) -> frozenset[str]:
    """The blob hash of a Write call's `content` (when the stored tool_input is whole)."""
    if not ev.tool_input or ev.tool_name != "Write":
        return frozenset()
    try:
        data = json.loads(ev.tool_input)
    except ValueError:
        return frozenset()  # capped: the content is not whole
    content = data.get("content") if isinstance(data, dict) else None
    if not isinstance(content, str):
        return frozenset()
    return frozenset({git_blob_hash(content.encode("utf-8", "surrogatepass"))})


def _call_key(ev: HookEvent) -> tuple[str, ...]:
    if ev.tool_use_id:
        return (ev.session_id, "id", ev.tool_use_id)
    # No tool_use_id (old versions): pair a Post with the oldest open Pre of the same call.
    return (ev.session_id, ev.tool_name or "", ev.tool_command or "", *sorted(ev.tool_files))


def _interval(ev: HookEvent, is_write: bool, *, start: int, end: int | None = None) -> Interval:
    """The interval of one write or shell call of `ev`'s session."""
    return Interval(
        session_id=ev.session_id,
        kind="write" if is_write else "shell",
        project=ev.project,
        paths=frozenset(norm_path(p, ev.cwd) for p in ev.tool_files) if is_write else frozenset(),
        start=start,
        end=end,
        content_hashes=_written_hashes(ev) if is_write else frozenset(),
    )


class Attribution:
    """In-memory write and shell intervals; `explain` answers who wrote (project, path, ts)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_path: dict[str, list[Interval]] = {}
        self._shell: dict[str, list[Interval]] = {}
        self._open: dict[tuple[str, ...], list[Interval]] = {}

    def note(self, ev: HookEvent) -> Interval | None:
        """Track `ev`; return the interval it opened or closed (None if it is no tool call
        that writes)."""
        if ev.event_type in TURN_ENDS:
            self._close_session(ev.session_id, ev.ts, stopped=ev.event_type in SLACK_ENDS)
            return None
        is_write = ev.tool_name in WRITE_TOOLS and bool(ev.tool_files)
        is_shell = ev.is_shell and ev.project is not None
        if not (is_write or is_shell):
            return None
        key = _call_key(ev)
        if ev.event_type == "PreToolUse":
            iv = _interval(ev, is_write, start=ev.ts)
            with self._lock:
                self._open.setdefault(key, []).append(iv)
                self._index(iv)
            return iv
        if ev.event_type not in ("PostToolUse", "PostToolUseFailure"):
            return None
        with self._lock:
            pending = self._open.get(key)
            if pending:
                iv = pending.pop(0)
                if not pending:
                    del self._open[key]
                iv.end = max(ev.ts, iv.start)
                return iv
            # A Post without its Pre (Pre hooks not installed, or the Pre was lost): the
            # call ran for duration_ms before it; without one, assume up to 2 s (the
            # watcher may have stored the write before this Post arrived).
            iv = _interval(ev, is_write, start=ev.ts - (ev.duration_ms or SLACK_MS), end=ev.ts)
            self._index(iv)
            return iv

    def _close_session(self, session_id: str, ts: int, *, stopped: bool) -> None:
        """The turn is over, so every call of the session has ended, Post or not (Claude
        Code before 2.0.5x fired no hook at all for a failed Bash). `stopped` (a Stop or
        SessionEnd): the slack of the session's calls ends at `ts` as well."""
        with self._lock:
            for key in [k for k in self._open if k[0] == session_id]:
                for iv in self._open.pop(key):
                    iv.end = max(ts, iv.start)
            if not stopped:
                return
            for index in (self._by_path, self._shell):
                for group in index.values():
                    for iv in group:
                        if (
                            iv.session_id == session_id
                            and iv.stopped_at is None
                            and iv.end is not None
                            and iv.end <= ts < iv.end + SLACK_MS
                        ):
                            iv.stopped_at = ts

    def _index(self, iv: Interval) -> None:
        if iv.kind == "write":
            for p in iv.paths:
                self._by_path.setdefault(p, []).append(iv)
        elif iv.project is not None:
            self._shell.setdefault(iv.project, []).append(iv)

    def explain(
        self, project: str, path: str, ts: int, content_hash: str | None = None
    ) -> str | None:
        """The session whose write explains the change; a write of the path beats a shell
        call, and among equals the latest-starting interval wins."""
        with self._lock:
            for group in (self._by_path.get(path, ()), self._shell.get(project, ())):
                best: Interval | None = None
                for iv in group:
                    if iv.explains(project, path, ts, content_hash) and (
                        best is None or iv.start >= best.start
                    ):
                        best = iv
                if best is not None:
                    return best.session_id
        return None

    def prune(self, now: int) -> None:
        horizon = now - RECENT_KEEP_MS
        with self._lock:
            for index in (self._by_path, self._shell):
                for k in list(index):
                    kept = [iv for iv in index[k] if iv.last_ts() >= horizon]
                    if kept:
                        index[k] = kept
                    else:
                        del index[k]
            for key in list(self._open):
                kept = [iv for iv in self._open[key] if iv.last_ts() >= horizon]
                if kept:
                    self._open[key] = kept
                else:
                    del self._open[key]

    def size(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._by_path.values()) + sum(
                len(v) for v in self._shell.values()
            )


# --- one project's watcher ----------------------------------------------------------------


def _git(root: str, *args: str) -> bytes | None:
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}  # never take the user's index lock
    try:
        out = subprocess.run(
            ["git", "-C", root, *args],
            capture_output=True,
            timeout=30,
            env=env,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _hash_file(path: str, size: int) -> str | None:
    if size > HASH_LIMIT:
        return None
    try:
        with open(path, "rb") as fh:
            return git_blob_hash(fh.read(HASH_LIMIT + 1))
    except OSError:
        return None


@dataclass
class _Pending:
    """A stored change nobody explained yet; a late interval may still claim it."""

    id: int
    ts: int
    project: str
    path: str
    content_hash: str | None
    written_at: int | None = None


class ProjectWatch:
    """A watcher thread for one project root. `known` is the content baseline."""

    def __init__(self, sensor: FileSensor, project: str, now: int) -> None:
        self.sensor = sensor
        self.project = project
        self.last_event_ms = now
        self.stop_event = threading.Event()
        self.ready = threading.Event()
        self.failed: str | None = None
        self.git = os.path.isdir(os.path.join(project, ".git")) or os.path.isfile(
            os.path.join(project, ".git")
        )
        extra = (str(sensor.settings.data_dir.expanduser().absolute()),)
        self.ignore = IgnoreMatcher(project, extra_ignored_dirs=extra)
        self.known: dict[str, str] = {}
        self.known_dirs: set[str] = set()  # directories holding known files
        self.written_at: dict[str, int] = {}  # this batch's mtimes (ms), for attribution
        self._git_prefix = os.path.join(project, ".git") + os.sep
        self._sep_git = os.sep + ".git" + os.sep
        self._exclude_file = os.path.join(project, ".git", "info", "exclude")
        self.baseline = False  # True once git told us every file the project has
        self.thread = threading.Thread(
            target=self._run, name=f"tma1-watch:{os.path.basename(project)}", daemon=True
        )

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()

    def join(self, timeout: float) -> None:
        if self.thread.is_alive():
            self.thread.join(timeout)

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
        listing = _git(self.project, "ls-files", "-s", "-z")
        if listing is None:
            return
        for entry in listing.split(b"\0"):
            if not entry:
                continue
            meta, _, rel = entry.partition(b"\t")
            fields = meta.split()
            if len(fields) != 3 or fields[0] == b"160000":  # skip submodules
                continue
            path = os.path.normpath(os.path.join(self.project, os.fsdecode(rel)))
            self._remember(path, fields[1].decode())
        status = _git(
            self.project,
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--ignore-submodules",
        )
        if status is None:
            return
        dirty: list[str] = []
        records = status.split(b"\0")
        i = 0
        while i < len(records):
            rec = records[i]
            i += 1
            if len(rec) < 4:
                continue
            code, rel = rec[:2], rec[3:]
            if code[0:1] in (b"R", b"C"):
                i += 1  # the original path of a rename follows
            dirty.append(os.path.normpath(os.path.join(self.project, os.fsdecode(rel))))
        for path in dirty[:PRIME_MAX_FILES]:
            sig = self._signature(path)
            if sig is None:
                self.known.pop(path, None)
            else:
                self._remember(path, sig[0])
        self.baseline = len(dirty) <= PRIME_MAX_FILES

    @staticmethod
    def _signature(path: str) -> tuple[str, int, str | None, int] | None:
        """(baseline signature, size, content hash, mtime ms) of a regular file; None if
        not one."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        h = _hash_file(path, st.st_size)
        if h is None and st.st_size <= HASH_LIMIT:
            return None  # unreadable right now
        sig = h if h is not None else f"big:{st.st_size}:{st.st_mtime_ns}"
        return sig, st.st_size, h, st.st_mtime_ns // 1_000_000

    def wanted(self, path: str, *, is_dir: bool = False) -> bool:
        return not self.ignore.ignored(path, is_dir=is_dir)

    def _noise(self, path: str) -> bool:
        """Cheap string checks for the bulk of raw events nobody wants (git's own churn,
        our database): dropped before any stat or ignore lookup."""
        if path == self._exclude_file:
            self.ignore.invalidate(path)
            return True
        if path.startswith(self._git_prefix) or path == self._git_prefix[:-1]:
            return True
        if self._sep_git in path or path.endswith(self._sep_git[:-1]):
            return True
        return any(path == d or path.startswith(d + os.sep) for d in self.ignore.extra)

    def process(self, raw: set[tuple[int, str]]) -> list[FileChange]:
        """Turn one notify batch into stored changes; returns what was stored."""
        self.sensor.counters.inc("files.raw_events", len(raw))
        by_path: dict[str, set[int]] = {}
        for change, path in raw:
            p = os.path.normpath(path)
            if not self._noise(p):
                by_path.setdefault(p, set()).add(int(change))
        if not by_path:
            return []
        # Directory moves and creations report only the directory: expand them.
        for path in list(by_path):
            if (
                CHANGE_ADDED in by_path[path]
                and os.path.isdir(path)
                and self.wanted(path, is_dir=True)
            ):
                for sub in self._walk(path):
                    by_path.setdefault(sub, {CHANGE_ADDED})
            elif path in self.known_dirs and not os.path.lexists(path):
                self.known_dirs.discard(path)
                prefix = path + os.sep
                for known_path, sig in list(self.known.items()):
                    if known_path.startswith(prefix) and sig != _DELETED:
                        by_path.setdefault(known_path, {CHANGE_DELETED})
        for path in by_path:  # a new ignore file applies to its whole batch
            self.ignore.invalidate(path)
        now = self.sensor.clock.now_ms()
        out: list[FileChange] = []
        for path, kinds in sorted(by_path.items()):
            if not self.wanted(path):
                continue
            ch = self._classify(path, kinds, now)
            if ch is not None:
                out.append(ch)
        hints, self.written_at = self.written_at, {}
        self.sensor.store_changes(self.project, out, hints)
        return out

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
                d for d in dirnames if self.wanted(os.path.join(dirpath, d), is_dir=True)
            ]
            for name in filenames:
                found.append(os.path.join(dirpath, name))
                if len(found) >= limit:
                    return found
        return found

    def _classify(self, path: str, kinds: set[int], now: int) -> FileChange | None:
        counters = self.sensor.counters
        prev = self.known.get(path)
        sig = self._signature(path)
        if sig is None:
            if os.path.isdir(path):
                return None
            if os.path.lexists(path):
                return None  # a socket, fifo, dangling link or unreadable file
            if prev == _DELETED:
                return None
            if prev is None and (self.baseline or kinds != {CHANGE_DELETED}):
                # Never existed as far as we know: an editor's or tool's temporary file.
                counters.inc("files.transient")
                return None
            self.known[path] = _DELETED
            return FileChange(ts=now, project=self.project, path=path, change="deleted")
        signature, size, content_hash, mtime_ms = sig
        if prev == signature:
            counters.inc("files.unchanged")
            return None
        self._remember(path, signature)
        if now - WRITTEN_AT_MAX_MS <= mtime_ms <= now:
            self.written_at[path] = mtime_ms
        if prev is not None and prev != _DELETED:
            change = "modified"
        elif prev == _DELETED or self.baseline or CHANGE_ADDED in kinds:
            change = "added"
        else:
            change = "modified"
        return FileChange(
            ts=now,
            project=self.project,
            path=path,
            change=change,
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
                if project not in self._refused:
                    self._refused.add(project)
                    log.warning(
                        "not watching %s: already watching %d projects, the limit "
                        "(TMA1_MAX_WATCHED_PROJECTS=%d); external changes there go unseen "
                        "until a watched project is idle for 2 h",
                        project,
                        len(self.watches),
                        self.settings.max_watched_projects,
                    )
                self.counters.inc("files.refused")
                return None
            self._refused.discard(project)
            w = ProjectWatch(self, project, now)
            self.watches[project] = w
        self.counters.inc("files.watches_started")
        w.start()
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
            if project not in self._refused:
                self._refused.add(project)
                log.warning(
                    "not watching %s: the filesystem root, a home or the temp directory", project
                )
            return False
        return True

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
            FileChange(
                ts=c.ts,
                project=c.project,
                path=c.path,
                change=c.change,
                size=c.size,
                content_hash=c.content_hash,
                writer_session=self._explain(c, hints.get(c.path)),
            )
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
                    self._recent.append(
                        _Pending(row_id, c.ts, project, c.path, c.content_hash, hints.get(c.path))
                    )
            self._trim_recent(self.clock.now_ms())
        for who, row_ids in late.items():
            self.store.set_change_writer(row_ids, who)
            self.counters.inc("files.late_attributed", len(row_ids))
        self.on_project_change(project)

    def _trim_recent(self, now: int) -> None:
        while self._recent and (
            len(self._recent) > RECENT_MAX or self._recent[0].ts < now - RECENT_KEEP_MS
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
                if iv.explains(p.project, p.path, p.ts, p.content_hash)
                or (
                    p.written_at is not None
                    and iv.explains(p.project, p.path, p.written_at, p.content_hash)
                )
            ]
            if not claimed:
                return
            ids = {p.id for p in claimed}
            self._recent = deque(p for p in self._recent if p.id not in ids)
        self.store.set_change_writer(sorted(ids), iv.session_id)
        self.counters.inc("files.late_attributed", len(ids))
        for project in {p.project for p in claimed}:
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
            w.stop()
            log.info("stopped watching %s: no events for 2 h", w.project)
        for w in stopped:
            w.join(2.0)
        return [w.project for w in stopped]

    def stop(self) -> None:
        with self._lock:
            watches = list(self.watches.values())
            self.watches.clear()
        for w in watches:
            w.stop()
        for w in watches:
            w.join(2.0)

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
