"""What a watch may cover (tma1.sensors.scope): the refusals, the budgeted scan, and the
ignored and vendored trees it skips before descending — on real directories and real git."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tma1.sensors.ignore import VENDORED_DIRS, IgnoreMatcher
from tma1.sensors.scope import (
    HOME,
    MISSING,
    OVER_BUDGET,
    PSEUDO_FS,
    ROOT,
    TEMP,
    Refusal,
    Scan,
    fstype_of,
    parse_mountinfo,
    plan,
    refusal,
    refusal_by_name,
)


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        check=True,
        capture_output=True,
    )


def dirs(root: Path, n: int, name: str = "d") -> None:
    for i in range(n):
        (root / f"{name}{i}").mkdir(parents=True)


def matcher(root: Path) -> IgnoreMatcher:
    return IgnoreMatcher(str(root), vendored=VENDORED_DIRS)


# --- refusals -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/proc", "/proc/1/task", "/sys", "/sys/class/net", "/dev"])
def test_pseudo_filesystems_are_refused_by_name(path: str) -> None:
    verdict = refusal_by_name(path)
    assert verdict is not None and verdict.reason == PSEUDO_FS and verdict.permanent


def test_root_home_and_temp_are_refused_but_not_their_children(tmp_path: Path) -> None:
    home, temp = tmp_path / "me", tmp_path / "tmp"
    home.mkdir()
    temp.mkdir()
    for path, reason in [
        ("/", ROOT),
        (str(home), HOME),
        (str(home) + "/", HOME),
        (str(temp), TEMP),
    ]:
        verdict = refusal_by_name(path, home=str(home), temp=str(temp))
        assert verdict is not None and verdict.reason == reason, path
    for path in (str(home / "project"), "/procedures", "/device", str(temp / "x")):
        assert refusal_by_name(path, home=str(home), temp=str(temp)) is None, path


def test_links_are_resolved_before_judging(tmp_path: Path) -> None:
    home = tmp_path / "me"
    home.mkdir()
    (tmp_path / "to-sys").symlink_to("/sys")
    (tmp_path / "to-home").symlink_to(home)
    verdict = refusal(str(tmp_path / "to-sys"), mounts=[], home=str(home))
    assert verdict is not None and verdict.reason == PSEUDO_FS
    verdict = refusal(str(tmp_path / "to-home"), mounts=[], home=str(home))
    assert verdict is not None and verdict.reason == HOME
    assert refusal(str(home / "proj"), mounts=[], home=str(home)) is None


def test_mount_table_names_kernel_filesystems_anywhere(tmp_path: Path) -> None:
    # Where the kernel mounts cgroup2 or debugfs is up to the machine: the type decides.
    table = (
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        f"30 22 0:26 / {tmp_path}/cg rw shared:9 - cgroup2 cgroup2 rw\n"
        f"31 22 0:27 / {tmp_path}/with\\040space rw - debugfs debugfs rw\n"
    )
    mounts = parse_mountinfo(table)
    assert mounts == [
        ("/", "ext4"),
        (f"{tmp_path}/cg", "cgroup2"),
        (f"{tmp_path}/with space", "debugfs"),
    ]
    assert fstype_of(f"{tmp_path}/cg/x", mounts) == "cgroup2"
    assert fstype_of(f"{tmp_path}/cgx", mounts) == "ext4"
    (tmp_path / "cg").mkdir()
    verdict = refusal(str(tmp_path / "cg"), mounts=mounts, home="/nonexistent")
    assert verdict is not None and verdict.reason == PSEUDO_FS and "cgroup2" in verdict.detail
    assert refusal(str(tmp_path), mounts=mounts, home="/nonexistent") is None


def test_this_machines_proc_is_refused_by_its_type() -> None:
    if not Path("/proc/self/mountinfo").exists():
        pytest.skip("no mount table")
    mounts = parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    assert fstype_of("/proc/self", mounts) == "proc"


# --- the budgeted scan --------------------------------------------------------------------


def test_scan_over_budget_stops_at_the_budget(tmp_path: Path) -> None:
    dirs(tmp_path / "src", 50)
    scan = Scan(root=str(tmp_path), ignored=lambda d: False, max_dirs=10)
    assert scan.walk([str(tmp_path)]) is False
    assert scan.over is not None and scan.over.reason == OVER_BUDGET
    assert "more than 10 directories" in scan.over.detail and not scan.over.permanent
    assert len(scan.dirs) == 11  # stopped one past the budget, not at the tree's end


def test_scan_bounds_entries_of_a_flat_directory(tmp_path: Path) -> None:
    for i in range(150):
        (tmp_path / f"f{i}").write_text("")
    scan = Scan(root=str(tmp_path), ignored=lambda d: False, max_dirs=10, max_entries=100)
    assert not scan.walk([str(tmp_path)])
    assert scan.over is not None and "more than 100 files" in scan.over.detail
    assert scan.entries == 101


def test_vendored_and_ignored_trees_cost_one_entry(tmp_path: Path) -> None:
    """40k node_modules directories are never listed: the budget sees only the source."""
    root = tmp_path / "repo"
    dirs(root / "node_modules" / "pkg", 300)
    dirs(root / "src" / ".venv", 300)
    dirs(root / "gen", 300)
    dirs(root / "src", 3, "m")
    (root / ".gitignore").write_text("gen/\n")
    m = matcher(root)
    scan = Scan(root=str(root), ignored=lambda d: m.ignored(d, is_dir=True), max_dirs=5)
    assert scan.walk([str(root)]), scan.over
    assert sorted(os.path.relpath(d, root) for d in scan.dirs) == [
        ".",
        "src",
        "src/m0",
        "src/m1",
        "src/m2",
    ]
    assert scan.entries < 15
    assert {os.path.basename(p) for p in scan.pruned} == {"node_modules", ".venv", "gen"}


def test_scan_never_follows_a_link_or_enters_a_skipped_mount(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    dirs(root / "real", 2)
    (root / "to-root").symlink_to("/")
    (root / "loop").symlink_to(root)
    scan = Scan(
        root=str(root), ignored=lambda d: False, max_dirs=100, skip=frozenset({str(root / "real")})
    )
    assert scan.walk([str(root)])
    assert scan.dirs == [str(root)]


# --- plan: refusal, then scan, then git ---------------------------------------------------


def test_plan_keeps_a_committed_dist_and_skips_an_untracked_build(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    (root / "dist" / "lib").mkdir(parents=True)
    (root / "dist" / "lib" / "bundle.js").write_text("x\n")
    (root / "dist" / "lib" / "build").mkdir()  # below a kept tree: kept too
    (root / "dist" / "lib" / "build" / "a.js").write_text("a\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "dist")
    dirs(root / "build", 5)
    dirs(root / "node_modules", 5)
    m = matcher(root)
    found = plan(str(root), m, max_dirs=100)
    assert isinstance(found, Scan)
    assert sorted(os.path.relpath(d, root) for d in found.dirs) == [
        ".",
        "dist",
        "dist/lib",
        "dist/lib/build",
    ]
    assert m.ignored(str(root / "build" / "d0" / "x.js"))
    assert not m.ignored(str(root / "dist" / "lib" / "build" / "a.js"))


def test_plan_refuses_before_listing_anything(tmp_path: Path) -> None:
    listed: list[str] = []

    class Spy(IgnoreMatcher):
        def ignored(self, abs_path: str, *, is_dir: bool = False) -> bool:
            listed.append(abs_path)
            return super().ignored(abs_path, is_dir=is_dir)

    found = plan("/sys", Spy("/sys"), max_dirs=1_000_000)
    assert isinstance(found, Refusal) and found.reason == PSEUDO_FS
    assert listed == []
    gone = plan(str(tmp_path / "gone"), Spy(str(tmp_path / "gone")), max_dirs=10)
    assert isinstance(gone, Refusal) and gone.reason == MISSING
