"""The baseline's reading of git: blob hashes from the index, dirty paths from status."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tma1.sensors.baseline import dirty_paths, file_signature, git_blob_hash, tracked_hashes

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@localhost", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def test_tracked_hashes_and_dirty_paths(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "a.py").write_text("a = 1\n")
    (repo / "old name.txt").write_text("moved\n")
    (repo / "clean.txt").write_text("clean\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "start")
    (repo / "src" / "a.py").write_text("a = 2\n")  # modified
    _git(repo, "mv", "old name.txt", "new name.txt")  # renamed: status names both
    (repo / "untracked.txt").write_text("new\n")

    hashes = dict(tracked_hashes(str(repo)) or [])
    assert hashes[str(repo / "clean.txt")] == git_blob_hash(b"clean\n")
    assert hashes[str(repo / "src" / "a.py")] == git_blob_hash(b"a = 1\n")  # the index's
    assert str(repo / "new name.txt") in hashes

    dirty = dirty_paths(str(repo))
    assert sorted(dirty or []) == sorted(
        str(repo / p) for p in ("src/a.py", "new name.txt", "untracked.txt")
    )
    sig = file_signature(str(repo / "src" / "a.py"))
    assert sig is not None and sig[0] == sig[2] == git_blob_hash(b"a = 2\n")


def test_outside_git_there_is_nothing_to_prime(tmp_path: Path) -> None:
    assert tracked_hashes(str(tmp_path)) is None
    assert dirty_paths(str(tmp_path)) is None
    assert file_signature(str(tmp_path)) is None  # a directory has no signature
