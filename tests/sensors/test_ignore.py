"""IgnoreMatcher against real git: `git check-ignore` is the oracle for every path."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tma1.sensors.ignore import IgnoreMatcher, is_editor_temp


def git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    (root / ".gitignore").write_text("*.log\nbuild/\n/top-only.txt\nnode_modules\n!keep.log\n")
    (root / "sub").mkdir()
    (root / "sub" / ".gitignore").write_text("!important.log\n*.tmpdata\ngen/\n")
    (root / "sub" / "deep").mkdir()
    (root / "sub" / "deep" / ".gitignore").write_text("secret.txt\n!*.tmpdata\n")
    (root / ".git" / "info").mkdir(exist_ok=True)
    (root / ".git" / "info" / "exclude").write_text("local-notes.md\n")
    return root


CASES = [
    "a.log",
    "keep.log",
    "src/x.log",
    "sub/important.log",
    "sub/other.log",
    "build/out.o",
    "src/build/out.o",
    "top-only.txt",
    "sub/top-only.txt",
    "node_modules/pkg/index.js",
    "sub/node_modules/x.js",
    "sub/a.tmpdata",
    "sub/deep/a.tmpdata",
    "sub/deep/secret.txt",
    "secret.txt",
    "sub/gen/file.py",
    "gen/file.py",
    "local-notes.md",
    "docs/local-notes.md",
    "src/main.py",
    "build.py",
    # A negation below an ignored directory cannot re-include (git never descends there).
    "build/keep.log",
]


def test_matches_git_check_ignore(repo: Path) -> None:
    m = IgnoreMatcher(str(repo))
    for rel in CASES:
        oracle = git(repo, "check-ignore", "-q", "--no-index", rel).returncode == 0
        assert m.ignored(str(repo / rel)) is oracle, rel


def test_git_dir_data_dir_and_editor_files(repo: Path, tmp_path: Path) -> None:
    data = repo / ".tma1data"
    m = IgnoreMatcher(str(repo), extra_ignored_dirs=(str(data),))
    assert m.ignored(str(repo / ".git" / "index"))
    assert m.ignored(str(repo / "sub" / ".git" / "HEAD"))
    assert m.ignored(str(data / "tma1.db-wal"))
    assert m.ignored(str(tmp_path / "elsewhere.txt"))  # outside the project
    for name in ("main.py.swp", ".main.py.swp", "main.py~", ".#main.py", "#main.py#", "4913"):
        assert m.ignored(str(repo / "src" / name)), name
        assert is_editor_temp(name)
    assert not m.ignored(str(repo / "src" / "main.py"))
    assert not m.ignored(str(repo / "src" / "swap.py"))


def test_invalidate_reloads_a_changed_gitignore(repo: Path) -> None:
    m = IgnoreMatcher(str(repo))
    target = str(repo / "notes.txt")
    assert not m.ignored(target)
    (repo / ".gitignore").write_text("notes.txt\n")
    assert not m.ignored(target)  # cached until told
    assert m.invalidate(str(repo / ".gitignore"))
    assert m.ignored(target)
    assert not m.invalidate(str(repo / "notes.txt"))


# --- generated rules, git as the oracle ----------------------------------------------------

_NAMES = ["a", "b", "c.py", "d.log", "build", "out", "x.tmp"]
_PATTERNS = [
    "*.log",
    "!d.log",
    "build/",
    "/out",
    "out/",
    "a/*.py",
    "**/c.py",
    "!c.py",
    "b",
    "!b",
    "*.tmp",
    "a/**/x.tmp",
    "!a/",
    "**/build",
    "/a/c.py",
    "*",
    "!*/",
    "!*.py",
    "a/b/",
    "x.tmp/",
    "**/",
    "*/",
    "*/**",
    "**",
    "a/**",
    # Not "a/**/": pathspec compiles it like "a/" (git matches only directories below a).
]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    root_rules=st.lists(st.sampled_from(_PATTERNS), max_size=5),
    sub_rules=st.lists(st.sampled_from(_PATTERNS), max_size=4),
    paths=st.lists(
        st.lists(st.sampled_from(_NAMES), min_size=1, max_size=4).map("/".join),
        min_size=1,
        max_size=12,
        unique=True,
    ),
)
def test_generated_rules_match_git(
    tmp_path_factory: pytest.TempPathFactory,
    root_rules: list[str],
    sub_rules: list[str],
    paths: list[str],
) -> None:
    root = tmp_path_factory.mktemp("gen")
    git(root, "init", "-q")
    (root / ".gitignore").write_text("\n".join(root_rules) + "\n")
    (root / "a").mkdir()
    (root / "a" / ".gitignore").write_text("\n".join(sub_rules) + "\n")
    out = subprocess.run(
        ["git", "-C", str(root), "check-ignore", "--no-index", "--stdin", "-z"],
        input="\0".join(paths) + "\0",
        capture_output=True,
        text=True,
        check=False,
    )
    # git looks at the disk: `a` is a directory there, the matcher is asked about files.
    paths = [p for p in paths if p != "a"]
    oracle = {p for p in out.stdout.split("\0") if p and p != "a"}
    m = IgnoreMatcher(str(root))
    mine = {p for p in paths if m.ignored(str(root / p))}
    assert mine == oracle, (root_rules, sub_rules)
