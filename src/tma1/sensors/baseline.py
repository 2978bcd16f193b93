"""The content baseline of a watched project: what each file held when last seen, so that a
touch or a no-op save is no change (docs/sensors.md, "No-op saves are dropped"). It is
primed from git's index and `git status`; files over 4 MB carry no hash and are compared
by size and mtime.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess

HASH_LIMIT = 4 * 1024 * 1024
PRIME_MAX_FILES = 5_000
DELETED = "\0deleted"  # the baseline signature of a file seen deleted


def git_blob_hash(data: bytes) -> str:
    """`git hash-object` of `data`: comparable with the index without reading the file."""
    h = hashlib.sha1(usedforsecurity=False)
    h.update(b"blob %d\0" % len(data))
    h.update(data)
    return h.hexdigest()


def git(root: str, *args: str) -> bytes | None:
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


def file_signature(path: str) -> tuple[str, int, str | None, int] | None:
    """(baseline signature, size, content hash, mtime ms) of a regular file; None if
    not one, or unreadable right now."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return None
        mtime_ms = st.st_mtime_ns // 1_000_000
        if st.st_size > HASH_LIMIT:
            return f"big:{st.st_size}:{st.st_mtime_ns}", st.st_size, None, mtime_ms
        with open(path, "rb") as fh:
            h = git_blob_hash(fh.read(HASH_LIMIT + 1))
    except OSError:
        return None
    return h, st.st_size, h, mtime_ms


def tracked_hashes(root: str) -> list[tuple[str, str]] | None:
    """(path, blob hash) of every file git tracks under `root`, from the index without
    reading a file; None when git cannot tell."""
    listing = git(root, "ls-files", "-s", "-z")
    if listing is None:
        return None
    out: list[tuple[str, str]] = []
    for entry in listing.split(b"\0"):
        if not entry:
            continue
        meta, _, rel = entry.partition(b"\t")
        fields = meta.split()
        if len(fields) != 3 or fields[0] == b"160000":  # skip submodules
            continue
        out.append((os.path.normpath(os.path.join(root, os.fsdecode(rel))), fields[1].decode()))
    return out


def tracked_trees(root: str, dirs: list[str]) -> set[str]:
    """Those of `dirs` (absolute, under `root`) that the HEAD commit has as directories:
    one `git ls-tree` naming each, so its output stays as short as the question."""
    if not dirs:
        return set()
    rels = [os.path.relpath(d, root) for d in dirs]
    listing = git(root, "ls-tree", "-d", "--name-only", "-z", "HEAD", "--", *rels)
    if listing is None:
        return set()
    found = {os.fsdecode(n) for n in listing.split(b"\0") if n}
    return {d for d, rel in zip(dirs, rels, strict=True) if rel.replace(os.sep, "/") in found}


def dirty_paths(root: str) -> list[str] | None:
    """The files `git status` lists as modified or untracked under `root`; None when git
    cannot tell."""
    status = git(
        root,
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=all",
        "--ignore-submodules",
    )
    if status is None:
        return None
    dirty: list[str] = []
    records = iter(status.split(b"\0"))
    for rec in records:
        if len(rec) < 4:
            continue
        if rec[:1] in (b"R", b"C"):
            next(records, None)  # the original path of a rename follows
        dirty.append(os.path.normpath(os.path.join(root, os.fsdecode(rec[3:]))))
    return dirty
