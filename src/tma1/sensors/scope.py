"""What a project watch may cover (docs/sensors.md, "What is never watched").

inotify needs one watch per directory, and watchfiles adds them while holding Python's GIL:
a recursive watch of `/sys` (a maze of symlinks) froze the whole server for minutes, one of
a repository with 40,000 `node_modules` directories for 0.7 s. So a project is checked here,
on its watcher thread, before any watch is made:

- `refusal` turns down what is never a project: pseudo-filesystems (`/proc`, `/sys`,
  `/dev`, and any mount of a kernel filesystem type), the filesystem root, the home
  directory itself and the temp directory. Pure string checks and one read of the mount
  table; nothing under the directory is listed.
- `Scan` lists the directories to watch, one `scandir` each, skipping ignored and vendored
  trees before descending (they cost one name check), never following a symlink, and stops
  at the budget: a project with more directories is not watched at all.
"""

from __future__ import annotations

import functools
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tma1.sensors.baseline import tracked_trees
from tma1.sensors.ignore import VENDORED_DIRS, IgnoreMatcher

# Kernel and virtual filesystems: nothing a coding agent edits lives there, and their
# trees are endless (symlink loops in sysfs, a directory per process in proc).
PSEUDO_PREFIXES = ("/proc", "/sys", "/dev")
PSEUDO_FSTYPES = frozenset(
    {
        "proc",
        "sysfs",
        "devtmpfs",
        "devpts",
        "cgroup",
        "cgroup2",
        "debugfs",
        "tracefs",
        "securityfs",
        "pstore",
        "bpf",
        "configfs",
        "fusectl",
        "mqueue",
        "hugetlbfs",
        "binfmt_misc",
        "efivarfs",
        "selinuxfs",
        "rpc_pipefs",
        "nsfs",
        "autofs",
    }
)
# A scan lists at most this many entries (files and directories) whatever the directory
# budget: a few directories holding millions of files are as costly to list.
SCAN_MAX_ENTRIES = 250_000

# Vendored-looking directories asked about in one `git ls-tree` (a committed dist/).
TRACKED_ASK_MAX = 64
PRUNED_KEEP = 1_000  # skipped directories remembered (tracked vendored ones are looked up)

# Reasons, as /api/health, `tma1 doctor` and the dashboard show them. The first four are
# refusals for good; the others are looked at again (tma1.sensors.files.RETRY_MS).
PSEUDO_FS, ROOT, HOME, TEMP = (
    "pseudo-filesystem",
    "filesystem root",
    "home directory",
    "temp directory",
)
OVER_BUDGET, LIMIT, FAILED = "over budget", "limit", "failed"
MISSING = "missing"  # a cwd that is no directory here (a replay, another machine): not listed


@dataclass(frozen=True)
class Refusal:
    reason: str  # one of the reasons above, or "limit" / "failed" (tma1.sensors.files)
    detail: str  # one line naming the problem and what to do

    @property
    def permanent(self) -> bool:
        """The verdict cannot change while the server runs: never look again."""
        return self.reason in (PSEUDO_FS, ROOT, HOME, TEMP)


_OCTAL = re.compile(r"\\([0-7]{3})")


def _unescape(field_: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (`\\040`)."""
    return _OCTAL.sub(lambda m: chr(int(m[1], 8)), field_)


def parse_mountinfo(text: str) -> list[tuple[str, str]]:
    """(mount point, filesystem type) of each line of /proc/self/mountinfo."""
    mounts: list[tuple[str, str]] = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if sep and len(fields) >= 5 and rest:
            mounts.append((_unescape(fields[4]), rest[0]))
    return mounts


def read_mounts() -> list[tuple[str, str]]:
    """This machine's mounts; empty where there is no mount table to read (not Linux)."""
    try:
        text = Path("/proc/self/mountinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return parse_mountinfo(text)


def fstype_of(real: str, mounts: Iterable[tuple[str, str]]) -> str | None:
    """The filesystem type of the mount holding `real` (a resolved path): the longest
    mount point that contains it (the last one mounted wins on a tie)."""
    best: tuple[int, str] | None = None
    for point, fstype in mounts:
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= best[0]):
            best = (len(point), fstype)
    return best[1] if best else None


def pseudo_mount_points(mounts: Iterable[tuple[str, str]]) -> frozenset[str]:
    """Mount points of kernel filesystems: a scan never descends into one."""
    return frozenset(p for p, t in mounts if t in PSEUDO_FSTYPES)


@functools.cache
def _default_temp() -> str:
    return tempfile.gettempdir()  # probes the disk the first time: once per process


def refusal_by_name(
    path: str, *, home: str | None = None, temp: str | None = None
) -> Refusal | None:
    """`refusal` judged from the path's text alone (no filesystem access: the hook's
    path may call it). `refusal` also resolves links and reads the mount table."""
    path = os.path.normpath(path)
    for prefix in PSEUDO_PREFIXES:
        if path == prefix or path.startswith(prefix + "/"):
            return Refusal(PSEUDO_FS, f"{prefix} is a kernel filesystem, not a project")
    if path == os.sep:
        return Refusal(ROOT, "watching / would mean the whole disk; start the agent in a project")
    if path == os.path.normpath(home if home is not None else os.path.expanduser("~")):
        return Refusal(
            HOME,
            "watching the home directory would mean every project in it; start the agent "
            "in a project directory",
        )
    if path == os.path.normpath(temp if temp is not None else _default_temp()):
        return Refusal(TEMP, "the temp directory is shared by every program, not a project")
    return None


def refusal(
    project: str,
    *,
    mounts: Iterable[tuple[str, str]] | None = None,
    home: str | None = None,
    temp: str | None = None,
) -> Refusal | None:
    """Why `project` must never be watched; None when it may be (then `Scan` decides).
    Links are resolved first: a symlink to /sys is /sys."""
    verdict = refusal_by_name(project, home=home, temp=temp)
    if verdict is not None:
        return verdict
    real = os.path.realpath(project)
    home_real = os.path.realpath(home if home is not None else os.path.expanduser("~"))
    temp_real = os.path.realpath(temp if temp is not None else _default_temp())
    verdict = refusal_by_name(real, home=home_real, temp=temp_real)
    if verdict is not None:
        return verdict
    fstype = fstype_of(real, read_mounts() if mounts is None else mounts)
    if fstype in PSEUDO_FSTYPES:
        return Refusal(PSEUDO_FS, f"a {fstype} mount is a kernel filesystem, not a project")
    return None


@dataclass
class Scan:
    """The directories of one project to watch, listed within a budget.

    `ignored(path)` answers for a directory (ignored and vendored trees are skipped before
    they are listed); `skip` holds mount points never entered. `walk` may be called again
    with more tops (a tracked vendored directory, new directories): the budget is shared.
    """

    root: str
    ignored: Callable[[str], bool]
    max_dirs: int
    skip: frozenset[str] = frozenset()
    max_entries: int = SCAN_MAX_ENTRIES
    dirs: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)  # directories skipped as ignored
    entries: int = 0
    over: Refusal | None = None

    def walk(self, tops: Iterable[str]) -> bool:
        """List `tops` and every directory below them; False once over the budget."""
        stack = list(tops)
        while stack and self.over is None:
            top = stack.pop()
            self.dirs.append(top)
            if len(self.dirs) > self.max_dirs:
                self.over = Refusal(
                    OVER_BUDGET,
                    f"more than {self.max_dirs:,} directories that are not ignored "
                    "(TMA1_WATCH_MAX_DIRS); ignore the generated ones in .gitignore or "
                    "raise the budget",
                )
                break
            try:
                with os.scandir(top) as it:
                    for entry in it:
                        self.entries += 1
                        if self.entries > self.max_entries:
                            self.over = Refusal(
                                OVER_BUDGET,
                                f"more than {self.max_entries:,} files and directories "
                                "that are not ignored; ignore the generated ones in .gitignore",
                            )
                            break
                        if not entry.is_dir(follow_symlinks=False):
                            continue
                        path = entry.path
                        if path in self.skip or self.ignored(path):
                            if len(self.pruned) < PRUNED_KEEP:
                                self.pruned.append(path)
                        else:
                            stack.append(path)
            except OSError:
                continue  # unreadable or gone: nothing to watch there
        return self.over is None


def plan(project: str, ignore: IgnoreMatcher, max_dirs: int) -> Scan | Refusal:
    """The directories to watch in `project` (a `Scan` within the budget), or why none.
    Run on the watch's own thread: it lists the tree and may ask git."""
    mounts = read_mounts()
    verdict = refusal(project, mounts=mounts)
    if verdict is not None:
        return verdict
    if not os.path.isdir(project):
        return Refusal(MISSING, "no such directory")
    scan = Scan(
        root=project,
        ignored=lambda d: ignore.ignored(d, is_dir=True),
        max_dirs=max_dirs,
        skip=pseudo_mount_points(mounts),
    )
    if scan.walk([project]) and os.path.exists(os.path.join(project, ".git")):
        # A vendored-looking directory git tracks (a committed dist/) is source after all.
        named = [d for d in scan.pruned if os.path.basename(d) in VENDORED_DIRS]
        kept = tracked_trees(project, named[:TRACKED_ASK_MAX])
        if kept:
            ignore.keep(kept)
            scan.walk(sorted(kept))
    return scan.over or scan
