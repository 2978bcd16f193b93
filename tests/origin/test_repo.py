"""A working tree's repository identity (tma1.origin.repo)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tma1.origin.repo import normalise_remote, origin_url, path_in_repo, repo_of


@pytest.mark.parametrize(
    "url",
    [
        "git@github.com:o/r.git",
        "https://github.com/o/r",
        "ssh://git@github.com/o/r",
        "https://user:secret@GitHub.com/o/r.git/",
        "ssh://git@github.com:2222/o/r.git",
        "git://github.com/o/r",
    ],
)
def test_one_repository_one_spelling(url: str) -> None:
    assert normalise_remote(url) == "github.com/o/r"


def test_no_credentials_survive() -> None:
    assert "secret" not in normalise_remote("https://me:secret@host.example/g/r.git")


def test_local_remotes_stay_paths() -> None:
    assert normalise_remote("/srv/git/r.git") == "/srv/git/r"
    assert normalise_remote("file:///srv/git/r.git") == "/srv/git/r"


def _repo(root: Path, config: str) -> Path:
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text(config)
    return root


def test_origin_from_the_config_file(tmp_path: Path) -> None:
    top = _repo(
        tmp_path / "a",
        '[core]\n\tbare = false\n[remote "upstream"]\n\turl = git@x.org:u/u.git\n'
        '[remote "origin"]\n\turl = git@github.com:o/r.git\n',
    )
    assert origin_url(str(top)) == "git@github.com:o/r.git"
    assert repo_of(str(top)) == "github.com/o/r"


def test_a_linked_worktree_reads_the_main_config(tmp_path: Path) -> None:
    main = _repo(tmp_path / "main", '[remote "origin"]\n\turl = https://h.example/o/r\n')
    gitdir = main / ".git" / "worktrees" / "wt"
    gitdir.mkdir(parents=True)
    (gitdir / "commondir").write_text("../..\n")
    wt = tmp_path / "wt"
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {gitdir}\n")
    assert repo_of(str(wt)) == "h.example/o/r"


def test_no_remote_is_the_path(tmp_path: Path) -> None:
    top = _repo(tmp_path / "plain", "[core]\n\tbare = false\n")
    assert repo_of(str(top)) == str(top)
    assert repo_of(str(tmp_path)) == str(tmp_path)  # not a repository at all


def test_path_inside() -> None:
    assert path_in_repo("/w/app/services/api", "/w/app") == "services/api"
    assert path_in_repo("/w/app", "/w/app") == ""
    assert path_in_repo(None, "/w/app") == ""
