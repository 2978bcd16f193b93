"""The file watcher's bounds (issue 31): refused projects never start a watch, a project
over the directory budget is given up with its reason, vendored trees are not watched, and
directories created later are watched once they exist. Real directories, real inotify."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tma1.clock import ManualClock, SystemClock
from tma1.config import Settings
from tma1.counters import Counters
from tma1.sensors.files import RETRY_MS, FileSensor, ProjectWatch
from tma1.store import Store

DEADLINE_S = 20.0


def wait_for(probe: Callable[[], Any], what: str) -> Any:
    end = time.monotonic() + DEADLINE_S
    while not (value := probe()):
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
    return value


@pytest.fixture
def make_sensor(tmp_path: Path, sqlite_store: Store) -> Iterator[Callable[..., FileSensor]]:
    made: list[FileSensor] = []

    def make(clock: Any = None, **settings: Any) -> FileSensor:
        sensor = FileSensor(
            store=sqlite_store,
            clock=clock or SystemClock(),
            settings=Settings(data_dir=tmp_path / "data", **settings),
            counters=Counters(),
            on_project_change=lambda p: None,
        )
        made.append(sensor)
        return sensor

    yield make
    for sensor in made:
        sensor.stop()


def paths(store: Store, project: Path) -> list[str]:
    return [str(Path(c.path).relative_to(project)) for c in store.project_changes(str(project), 0)]


def test_pseudo_filesystems_never_start_a_watch(
    make_sensor: Callable[..., FileSensor], caplog: pytest.LogCaptureFixture
) -> None:
    sensor = make_sensor()
    with caplog.at_level(logging.WARNING, logger="tma1.sensors.files"):
        for _ in range(3):
            assert sensor.ensure_watch("/sys") is None
            assert sensor.ensure_watch("/proc") is None
    assert sensor.watches == {} and sensor.counters.get("files.watches_started") == 0
    unwatched = sensor.health()["unwatched"]
    assert isinstance(unwatched, dict)
    assert unwatched["/sys"]["reason"] == unwatched["/proc"]["reason"] == "pseudo-filesystem"
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 2 and "not watching /sys: pseudo-filesystem" in logged[0]


def test_home_directory_itself_is_refused(
    make_sensor: Callable[..., FileSensor], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / "project").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    sensor = make_sensor()
    assert sensor.ensure_watch(str(home)) is None
    assert sensor.health()["unwatched"][str(home)]["reason"] == "home directory"  # type: ignore[index]
    assert isinstance(sensor.ensure_watch(str(home / "project")), ProjectWatch)
    assert sensor.wait_ready(str(home / "project"))


def test_over_budget_is_given_up_and_retried_later(
    make_sensor: Callable[..., FileSensor], tmp_path: Path
) -> None:
    project = tmp_path / "big"
    for i in range(12):
        (project / "src" / f"m{i}").mkdir(parents=True)
    clock = ManualClock(start_ms=int(time.time() * 1000))
    sensor = make_sensor(clock=clock, watch_max_dirs=10)
    assert isinstance(sensor.ensure_watch(str(project)), ProjectWatch)
    assert sensor.wait_settled(str(project)) is False
    why = sensor.health()["unwatched"][str(project)]  # type: ignore[index]
    assert why["reason"] == "over budget" and "more than 10 directories" in why["detail"]
    assert sensor.watches == {}
    assert sensor.ensure_watch(str(project)) is None  # not scanned again on every hook
    for i in range(6):
        (project / "src" / f"m{i}").rmdir()
    clock.advance(RETRY_MS)
    assert isinstance(sensor.ensure_watch(str(project)), ProjectWatch)
    assert sensor.wait_settled(str(project)) is True
    assert str(project) not in sensor.health()["unwatched"]  # type: ignore[operator]


def test_vendored_tree_is_not_watched_and_costs_no_budget(
    make_sensor: Callable[..., FileSensor], tmp_path: Path, sqlite_store: Store
) -> None:
    project = tmp_path / "app"
    for i in range(500):
        (project / "node_modules" / f"pkg{i}").mkdir(parents=True)
    (project / "src").mkdir()
    sensor = make_sensor(watch_max_dirs=5)
    sensor.ensure_watch(str(project))
    assert sensor.wait_settled(str(project)) is True
    w = sensor.watches[str(project)]
    assert w.dirs == {str(project), str(project / "src")}
    (project / "node_modules" / "pkg1" / "index.js").write_text("x\n")
    (project / "node_modules" / "new.js").write_text("x\n")
    (project / "src" / "main.py").write_text("x\n")
    wait_for(lambda: paths(sqlite_store, project), "src/main.py")
    time.sleep(0.3)
    assert paths(sqlite_store, project) == ["src/main.py"]


def test_directories_created_later_are_watched(
    make_sensor: Callable[..., FileSensor], tmp_path: Path, sqlite_store: Store
) -> None:
    project = tmp_path / "p"
    project.mkdir()
    sensor = make_sensor()
    sensor.ensure_watch(str(project))
    assert sensor.wait_ready(str(project))
    (project / "new" / "deep").mkdir(parents=True)
    (project / "new" / "deep" / "early.txt").write_text("1\n")  # before any watch there
    wait_for(lambda: "new/deep/early.txt" in paths(sqlite_store, project), "early.txt")
    w = sensor.watches[str(project)]
    wait_for(lambda: str(project / "new" / "deep") in w.dirs, "the re-opened watch")
    (project / "new" / "deep" / "late.txt").write_text("2\n")  # seen by the new watch only
    wait_for(lambda: "new/deep/late.txt" in paths(sqlite_store, project), "late.txt")
    assert sorted(paths(sqlite_store, project)) == ["new/deep/early.txt", "new/deep/late.txt"]
    assert sensor.counters.get("files.reopened") >= 1


def test_a_project_growing_past_the_budget_is_given_up(
    make_sensor: Callable[..., FileSensor], tmp_path: Path
) -> None:
    project = tmp_path / "grows"
    (project / "a").mkdir(parents=True)
    sensor = make_sensor(watch_max_dirs=5)
    sensor.ensure_watch(str(project))
    assert sensor.wait_ready(str(project))
    for i in range(8):
        (project / "gen" / f"d{i}").mkdir(parents=True)
    wait_for(lambda: str(project) in sensor.health()["unwatched"], "giving up")  # type: ignore[operator]
    why = sensor.health()["unwatched"][str(project)]  # type: ignore[index]
    assert why["reason"] == "over budget" and "grew past 5 directories" in why["detail"]
    assert str(project) not in sensor.watches


def test_a_cwd_that_does_not_exist_here_is_dropped_quietly(
    make_sensor: Callable[..., FileSensor], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Replays and other machines' paths: not listed as a problem, not retried per hook."""
    clock = ManualClock(start_ms=int(time.time() * 1000))
    sensor = make_sensor(clock=clock)
    gone = tmp_path / "not-here"
    with caplog.at_level(logging.WARNING, logger="tma1.sensors.files"):
        assert isinstance(sensor.ensure_watch(str(gone)), ProjectWatch)
        assert sensor.wait_settled(str(gone)) is False
        assert sensor.ensure_watch(str(gone)) is None
    assert caplog.records == [] and sensor.health()["unwatched"] == {}
    assert sensor.counters.get("errors.watch") == 0
    gone.mkdir()
    clock.advance(RETRY_MS)
    assert isinstance(sensor.ensure_watch(str(gone)), ProjectWatch)
    assert sensor.wait_settled(str(gone)) is True


def test_verdicts_on_projects_no_longer_named_are_forgotten(
    make_sensor: Callable[..., FileSensor],
) -> None:
    from tma1.sensors.files import IDLE_STOP_MS

    clock = ManualClock(start_ms=int(time.time() * 1000))
    sensor = make_sensor(clock=clock)
    assert sensor.ensure_watch("/sys") is None
    clock.advance(IDLE_STOP_MS - 1)
    sensor.reap()
    assert "/sys" in sensor.unwatched
    clock.advance(1)
    sensor.reap()
    assert sensor.unwatched == {}
    assert sensor.ensure_watch("/sys") is None  # named again: listed again
    assert sensor.unwatched["/sys"][0].reason == "pseudo-filesystem"
