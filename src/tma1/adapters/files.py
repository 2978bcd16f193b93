"""Planned file changes: computed first (pure), shown as a diff, then applied atomically."""

from __future__ import annotations

import contextlib
import difflib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

BACKUP_SUFFIX = ".tma1-backup"


def agent_dir(env: Mapping[str, str] | None, var: str, default: str) -> Path:
    """Where an agent keeps its config: `$var` when set, else `$HOME/<default>`."""
    env = os.environ if env is None else env
    base = env.get(var)
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    return Path(base).expanduser() if base else home / default


def _span(start: int, length: int) -> str:
    """A hunk's range as unified diffs write it (1-based; an empty range names the line
    before it)."""
    if length == 1:
        return str(start + 1)
    return f"{start + (1 if length else 0)},{length}"


class InstallError(RuntimeError):
    """A file cannot be changed safely; the message names it and says what to do."""


def refusal(problem: str, fix: str = "fix or move it") -> InstallError:
    """The error for a file install will not edit: `problem` names the file."""
    return InstallError(f"{problem}; {fix} and run again. Nothing was changed.")


def read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise InstallError(f"{path} is a directory, not a file; nothing was changed") from None
    except PermissionError as exc:
        raise InstallError(f"cannot read {path}: {exc.strerror}; nothing was changed") from None


def atomic_write(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Write through a temporary file in the same directory and `os.replace` it, so a
    crash leaves either the old or the new file, never a half-written one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except FileNotFoundError:
            mode = 0o644
    tmp = path.with_name(f".{path.name}.tma1-{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


@dataclass(frozen=True)
class FilePlan:
    """`before`/`after` None mean "absent": after None deletes the file."""

    path: Path
    before: bytes | None
    after: bytes | None
    what: str
    mode: int | None = None
    backup: bool = False
    show_diff: bool = True

    @property
    def changed(self) -> bool:
        return self.before != self.after

    @property
    def verb(self) -> str:
        if not self.changed:
            return "absent" if self.before is None else "unchanged"
        if self.before is None:
            return "create"
        if self.after is None:
            return "delete"
        return "update"

    def diff(self) -> str:
        """A unified diff of the change. A line whose only change is a trailing comma (the
        user's last entry, now followed by tma1's) is shown as context, not as a line of
        theirs that tma1 changed: the diff shows tma1's lines."""
        old = (self.before or b"").decode("utf-8", "replace").splitlines(keepends=True)
        new = (self.after or b"").decode("utf-8", "replace").splitlines(keepends=True)

        def key(line: str) -> str:
            return line.rstrip().removesuffix(",")

        matcher = difflib.SequenceMatcher(None, [key(x) for x in old], [key(x) for x in new])
        out: list[str] = []
        for group in matcher.get_grouped_opcodes(3):
            if not out:
                out += [
                    f"--- {'/dev/null' if self.before is None else self.path}\n",
                    f"+++ {'/dev/null' if self.after is None else self.path}\n",
                ]
            (_, i1, _, j1, _), (_, _, i2, _, j2) = group[0], group[-1]
            out.append(f"@@ -{_span(i1, i2 - i1)} +{_span(j1, j2 - j1)} @@\n")
            for tag, a1, a2, b1, b2 in group:
                if tag == "equal":
                    out += [" " + ln for ln in new[b1:b2]]
                    continue
                out += ["-" + ln for ln in old[a1:a2]]
                out += ["+" + ln for ln in new[b1:b2]]
        return "".join(
            ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n" for ln in out
        )

    def report(self, *, dry_run: bool) -> str:
        """The change's line (and on a dry run its diff) in `tma1 install`/`service` output."""
        verb = f"would {self.verb}" if dry_run and self.changed else self.verb
        lines = [f"  {verb:<15} {self.path}  ({self.what})"]
        if dry_run and self.changed and self.show_diff:
            lines += [f"    {line}" for line in self.diff().splitlines()]
        return "\n".join(lines)

    @property
    def backup_path(self) -> Path:
        return self.path.with_name(self.path.name + BACKUP_SUFFIX)

    def apply(self, *, write_backup: bool = True) -> Path | None:
        """Carry the change out; returns the backup's path when one was written.

        The backup holds the user's file as it was before tma1 first changed it: it is
        written only with `write_backup` (install, on a file tma1 has no record of) and
        never over an existing backup."""
        if not self.changed:
            return None
        # A settings file kept in a dotfiles repository is often a symlink: write through
        # it, so the link (and the repository) stay as the user set them up.
        target = self.path.resolve() if self.path.is_symlink() else self.path
        backup = None
        if (
            self.backup
            and write_backup
            and self.before is not None
            and not self.backup_path.exists()
        ):
            backup = self.backup_path
            mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else 0o600
            atomic_write(backup, self.before, mode=mode)
        if self.after is None:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        else:
            atomic_write(target, self.after, mode=self.mode)
        return backup
