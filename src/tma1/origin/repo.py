"""A working tree's repository identity (issue 30): the normalised `origin` remote of its
git top-level, so that two developers' clones of one repository group together on a team
database whatever path each one has it at. `git@github.com:o/r.git`,
`https://github.com/o/r` and `ssh://git@github.com/o/r` are all `github.com/o/r`: the host
lowercased, no scheme, user, password, port or `.git`. No remote: the top-level path.

The remote is read from the repository's `config` file directly (no `git` process on any
path that answers a hook), once per top-level."""

from __future__ import annotations

import os
import re
from functools import lru_cache
from urllib.parse import urlsplit

_SCP = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>(?!//).+)$")
_SECTION = re.compile(r'^\s*\[\s*remote\s+"origin"\s*\]\s*$')
_ANY_SECTION = re.compile(r"^\s*\[")
_URL = re.compile(r"^\s*url\s*=\s*(?P<value>.*?)\s*$", re.IGNORECASE)
MAX_CONFIG_BYTES = 256 * 1024  # a git config larger than this is not one we read


def normalise_remote(url: str) -> str:
    """`host/owner/repo` of a remote URL (see the module doc); a local path as it is."""
    raw = url.strip()
    if "://" in raw:
        parts = urlsplit(raw)
        host = (parts.hostname or "").lower()
        path = parts.path
        if parts.scheme == "file" or not host:
            return _strip_git(path.rstrip("/")) or raw
    else:
        m = _SCP.match(raw)
        if m is None or raw.startswith(("/", ".")):
            return _strip_git(raw.rstrip("/"))
        host, path = m.group("host").lower(), m.group("path")
    path = "/".join(p for p in path.split("/") if p)
    return f"{host}/{_strip_git(path)}" if path else host


def _strip_git(path: str) -> str:
    return path[: -len(".git")] if path.endswith(".git") else path


def _config_path(toplevel: str) -> str | None:
    """The `config` of the repository at `toplevel`: `.git/config`, or for a linked
    worktree (`.git` is a file naming its gitdir) the main repository's."""
    dot_git = os.path.join(toplevel, ".git")
    if os.path.isdir(dot_git):
        return os.path.join(dot_git, "config")
    try:
        with open(dot_git, encoding="utf-8", errors="replace") as fh:
            line = fh.read(4096).strip()
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    gitdir = os.path.join(toplevel, line[len("gitdir:") :].strip())
    try:
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as fh:
            gitdir = os.path.join(gitdir, fh.read(4096).strip())
    except OSError:
        pass
    return os.path.join(gitdir, "config")


def origin_url(toplevel: str) -> str | None:
    """The `url` of `[remote "origin"]` in the repository's config, or None."""
    path = _config_path(toplevel)
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read(MAX_CONFIG_BYTES)
    except OSError:
        return None
    inside = False
    for line in text.splitlines():
        if _ANY_SECTION.match(line):
            inside = bool(_SECTION.match(line))
            continue
        m = _URL.match(line) if inside else None
        if m and m.group("value"):
            return m.group("value").strip('"')
    return None


@lru_cache(maxsize=1024)
def repo_of(project: str) -> str:
    """The repository of a project (a git top-level or a plain directory)."""
    url = origin_url(project)
    return normalise_remote(url) if url else project


def path_in_repo(cwd: str | None, project: str) -> str:
    """`cwd` relative to the project's top-level ("" at the top, or outside it)."""
    if not cwd:
        return ""
    root = project.rstrip("/") + "/"
    c = cwd.rstrip("/")
    return c[len(root) :] if c.startswith(root) else ""
