"""The spelling of a file path that tma1 compares and shows.

Agents name one file many ways (relative to their cwd, with `./` or `..`, with Windows
backslashes); the file watcher names it by its absolute path. Everything that compares two
paths (a rule's edit against a watcher's change, a resolution's re-read against a finding)
compares their `norm_path` spellings.
"""

from __future__ import annotations

import posixpath
import re
from functools import lru_cache

_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:/")


@lru_cache(maxsize=4096)
def norm_path(path: str, base: str | None = None) -> str:
    """One spelling per file: forward slashes, no `.`/`..`/doubled separators, and a relative
    path joined to `base` (the cwd or project it was named from)."""
    p = path.replace("\\", "/")
    if base and not p.startswith("/") and not _WINDOWS_DRIVE.match(p):
        p = base.replace("\\", "/").rstrip("/") + "/" + p
    return posixpath.normpath(p) if p else p


def display_path(path: str, project: str | None) -> str:
    """A path as short as its reader needs: relative to the project when inside it."""
    p = path.replace("\\", "/")
    if project:
        root = project.replace("\\", "/").rstrip("/") + "/"
        if p.startswith(root):
            return p[len(root) :]
    return p
