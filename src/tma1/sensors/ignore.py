"""Which paths of a project the watcher ignores: `.git/`, the tma1 data dir, editor swap and
backup files, and everything git ignores (`.gitignore` at every level, `.git/info/exclude`).

Git semantics kept here: patterns of a deeper `.gitignore` win over shallower ones (the last
matching pattern decides), and a path below an ignored directory is ignored whatever a
negation further down says (git never descends into an ignored directory).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from pathspec import GitIgnoreSpec

# Editor swap / backup / probe files: vim (.swp…, 4913 write probe, ~ backups), emacs
# (.#lock, #autosave#), JetBrains safe-write temporaries, kate swap files.
_EDITOR_PATTERNS = [
    "*.swp",
    "*.swo",
    "*.swx",
    ".*.sw?",
    "*~",
    ".#*",
    r"\#*#",  # gitignore needs the escape: a leading # starts a comment
    "4913",
    "*.___jb_tmp___",
    "*.___jb_old___",
    ".*.kate-swp",
]
EDITOR_SPEC = GitIgnoreSpec.from_lines(_EDITOR_PATTERNS)

# Dependency, virtualenv, cache and build-output trees: the watcher skips them by name,
# ignored by git or not, unless git tracks them (`IgnoreMatcher.keep`). They hold no edit
# worth reporting, and one `node_modules` can hold tens of thousands of directories.
VENDORED_DIRS = frozenset(
    {
        "node_modules",
        "bower_components",
        ".venv",
        "venv",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
        "target",
        "dist",
        "build",
        ".next",
        ".nuxt",
        ".gradle",
        ".terraform",
        ".cache",
    }
)


def is_editor_temp(basename: str) -> bool:
    return EDITOR_SPEC.match_file(basename)


def _verdict(spec: GitIgnoreSpec, rel: str) -> bool | None:
    """The last pattern of `spec` that matches `rel` itself decides (True: ignored).

    pathspec also lets a pattern match everything *below* a directory it names; git does
    not judge a file by its ancestors' patterns that way (an ancestor only matters when it
    is itself ignored, which `_dir_ignored` checks). So `!d.log` must not re-include
    `d.log/x.tmp` that `*.tmp` ignores: only a full match of the path counts here.

    pathspec searches each compiled pattern in the path; a `ps_d` group marks a match of a
    directory followed by more path — a match of an ancestor unless that slash is `rel`'s
    own trailing one. Patterns ending in `/**` compile to a bare prefix ending in `/` that
    matches what is *inside* the directory (git's `a/**` does not match `a` itself).
    """
    verdict: bool | None = None
    for pattern in spec.patterns:
        regex = getattr(pattern, "regex", None)
        if pattern.include is None or regex is None:
            continue
        source = regex.pattern
        if source.startswith("(?P<") and source.endswith(">/)"):
            matched = rel.endswith("/")  # "**/", "*/": any directory
        elif (m := regex.search(rel)) is None:
            matched = False
        elif m.groupdict().get("ps_d") is not None:
            matched = m.end() == len(rel)
        else:
            matched = not source.endswith("/") or m.end() < len(rel.rstrip("/"))
        if matched:
            verdict = pattern.include
    return verdict


def _read_spec(path: Path) -> GitIgnoreSpec | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    lines = text.splitlines()
    return GitIgnoreSpec.from_lines(lines) if any(ln.strip() for ln in lines) else None


class IgnoreMatcher:
    """`ignored(abs_path)` for one project root. Thread-safe; `.gitignore` specs are cached
    and reloaded when `invalidate(path)` is told that an ignore file changed."""

    def __init__(
        self,
        root: str,
        *,
        extra_ignored_dirs: tuple[str, ...] = (),
        vendored: frozenset[str] = frozenset(),
    ) -> None:
        self.root = os.path.normpath(root)
        self.extra = tuple(os.path.normpath(d) for d in extra_ignored_dirs)
        # Directory names ignored wherever they are (VENDORED_DIRS for the watcher; none
        # where git's own answer is wanted), and the ones kept anyway (tracked by git).
        self.vendored = vendored
        self._kept: frozenset[str] = frozenset()  # dir rels
        self._lock = threading.Lock()
        self._specs: dict[str, GitIgnoreSpec | None] = {}  # dir rel ("" = root) → spec
        self._dir_cache: dict[str, bool] = {}  # dir rel → ignored
        # Read on first use (on the watcher's thread, not the hook's path).
        self._root_excludes: GitIgnoreSpec | bool | None = False

    def invalidate(self, abs_path: str) -> bool:
        """Forget cached answers when `abs_path` is an ignore file. True if it was one."""
        base = os.path.basename(abs_path)
        if base != ".gitignore" and not abs_path.endswith(os.path.join(".git", "info", "exclude")):
            return False
        with self._lock:
            self._specs.clear()
            self._dir_cache.clear()
            self._root_excludes = False
        return True

    def keep(self, abs_dirs: set[str]) -> None:
        """Directories named as vendored that git tracks: judged by the ignore files only,
        and everything below them too."""
        kept = {os.path.relpath(d, self.root).replace(os.sep, "/") for d in abs_dirs}
        with self._lock:
            self._kept = frozenset(kept)
            self._dir_cache.clear()

    def _vendored(self, parts: list[str]) -> bool:
        if parts[-1] not in self.vendored:
            return False
        return not any("/".join(parts[: i + 1]) in self._kept for i in range(len(parts)))

    def _excludes(self) -> GitIgnoreSpec | None:
        if self._root_excludes is False:
            self._root_excludes = _read_spec(Path(self.root) / ".git" / "info" / "exclude")
        return self._root_excludes if isinstance(self._root_excludes, GitIgnoreSpec) else None

    def _spec(self, dir_rel: str) -> GitIgnoreSpec | None:
        if dir_rel not in self._specs:
            if len(self._specs) > 20_000:
                self._specs.clear()
            self._specs[dir_rel] = _read_spec(Path(self.root, dir_rel, ".gitignore"))
        return self._specs[dir_rel]

    def _decide(self, parts: list[str], is_dir: bool) -> bool:
        """Whether the ignore files ignore the path `parts` (relative to root)."""
        suffix = "/" if is_dir else ""
        # The deepest .gitignore with a matching pattern decides; .git/info/exclude last.
        checks = [
            (self._spec("/".join(parts[:depth])), "/".join(parts[depth:]) + suffix)
            for depth in reversed(range(len(parts)))
        ] + [(self._excludes(), "/".join(parts) + suffix)]
        for spec, sub in checks:
            verdict = _verdict(spec, sub) if spec is not None else None
            if verdict is not None:
                return verdict
        return False

    def _dir_ignored(self, parts: list[str]) -> bool:
        key = "/".join(parts)
        cached = self._dir_cache.get(key)
        if cached is not None:
            return cached
        if (
            parts[-1] == ".git"
            or (len(parts) > 1 and self._dir_ignored(parts[:-1]))
            or self._vendored(parts)
        ):
            result = True
        else:
            result = self._decide(parts, True)
        if len(self._dir_cache) > 50_000:
            self._dir_cache.clear()
        self._dir_cache[key] = result
        return result

    def ignored(self, abs_path: str, *, is_dir: bool = False) -> bool:
        path = os.path.normpath(abs_path)
        for extra in self.extra:
            if path == extra or path.startswith(extra + os.sep):
                return True
        if path == self.root:
            return False
        if not path.startswith(self.root + os.sep):
            return True  # outside the project: not ours to report
        rel = path[len(self.root) + 1 :]
        parts = rel.split(os.sep)
        if ".git" in parts:
            return True
        if not is_dir and is_editor_temp(parts[-1]):
            return True
        with self._lock:
            if len(parts) > 1 and self._dir_ignored(parts[:-1]):
                return True
            if is_dir:
                return self._dir_ignored(parts)
            return self._decide(parts, False)
