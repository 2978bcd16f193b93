"""Sensor benchmarks: prints figures, asserts nothing.

1. write → row latency: a file written in a watched git repository until its row is
   committed in the store (SQLite), p50/p90/max over N writes (target p50 ≤ 150 ms);
2. idle CPU of watching a 20,000-file repository: process CPU time (all threads) over an
   idle period, as % of one core (target ≤ 1 %);
3. tailing throughput: MB/s of transcript consumed by the tailer, store inserts included
   (target ≥ 50 MB/s), and the cost of the bounded inline slice on the hook path;
4. watch set-up (issue 31): the longest any other thread waits for the GIL while a
   project is scanned and watched (a 1 ms ticker thread's worst gap), for a project at the
   directory budget beside 40,000 node_modules directories, one over it, and /sys; and
   the same tree watched the old way (watchfiles' recursive watch of the root).

Usage: .venv/bin/python bench/bench_sensors.py [--writes 100] [--files 20000] [--idle 20]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from tma1.clock import SystemClock
from tma1.config import Settings
from tma1.counters import Counters
from tma1.sensors.files import FileSensor
from tma1.sensors.transcripts import TranscriptTailer
from tma1.store import Store

SESSIONS = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "sessions"


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@example.invalid", *args],
        check=True,
        capture_output=True,
    )


def make_repo(root: Path, files: int) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q")
    (root / ".gitignore").write_text("build/\n*.log\n")
    per_dir = 50
    for i in range(files):
        d = root / f"pkg{i // (per_dir * 20)}" / f"mod{(i // per_dir) % 20}"
        if i % per_dir == 0:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.py").write_text(f"VALUE_{i} = {i}\n")
    git(root, "add", "-A")
    # No background `git gc --auto` / maintenance after the commit: its churn under .git/
    # would be measured as "idle" (it is measured on its own in bench_git_churn).
    git(root, "-c", "gc.auto=0", "-c", "maintenance.auto=false", "commit", "-q", "-m", "init")
    return root


class Sensor:
    def __init__(self, tmp: Path) -> None:
        tmp.mkdir(parents=True, exist_ok=True)  # Store.open makes no parent directory
        self.store = Store.open(f"sqlite:///{tmp / 'bench.db'}")
        self.stored = threading.Event()
        self.sensor = FileSensor(
            store=self.store,
            clock=SystemClock(),
            settings=Settings(data_dir=tmp / "data"),
            counters=Counters(),
            on_project_change=lambda _p: self.stored.set(),
        )


def bench_latency(tmp: Path, writes: int) -> None:
    repo = make_repo(tmp / "lat", 200)
    s = Sensor(tmp / "lat-db")
    s.sensor.ensure_watch(str(repo))
    assert s.sensor.wait_ready(str(repo), 30)
    lat: list[float] = []
    try:
        for i in range(writes):
            target = repo / "pkg0" / "mod0" / f"f{i % 50}.py"
            s.stored.clear()
            t0 = time.perf_counter()
            target.write_text(f"CHANGED_{i} = {time.time_ns()}\n")
            if not s.stored.wait(10):
                print(f"  write {i}: no row within 10 s")
                continue
            lat.append((time.perf_counter() - t0) * 1000)
            time.sleep(0.05)
        rows = len(s.store.project_changes(str(repo), 0))
    finally:
        s.sensor.stop()
        s.store.close()
    lat.sort()
    print(
        f"write→row latency over {len(lat)} writes ({rows} rows): "
        f"p50 {statistics.median(lat):.1f} ms, p90 {lat[int(len(lat) * 0.9)]:.1f} ms, "
        f"max {lat[-1]:.1f} ms  (target p50 ≤ 150 ms)"
    )


def bench_idle(tmp: Path, files: int, idle_s: float) -> None:
    t0 = time.perf_counter()
    repo = make_repo(tmp / "idle", files)
    print(f"idle: built a {files}-file repository in {time.perf_counter() - t0:.1f} s")
    s = Sensor(tmp / "idle-db")
    t0 = time.perf_counter()
    c0 = time.process_time()
    s.sensor.ensure_watch(str(repo))
    assert s.sensor.wait_ready(str(repo), 120)
    w = s.sensor.watches[str(repo)]
    print(
        f"idle: watch ready in {time.perf_counter() - t0:.2f} s wall, "
        f"{time.process_time() - c0:.2f} s CPU; baseline {len(w.known)} files from git"
    )
    time.sleep(1.0)  # let start-up settle
    try:
        c0, t0 = time.process_time(), time.perf_counter()
        time.sleep(idle_s)
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        print(f"idle: sensor counters {s.sensor.counters.snapshot('files.')}")
    finally:
        s.sensor.stop()
        s.store.close()
    print(
        f"idle CPU watching {files} files: {cpu * 1000:.0f} ms CPU over {wall:.1f} s = "
        f"{100 * cpu / wall:.3f} % of one core  (target ≤ 1 %)"
    )


def bench_git_churn(tmp: Path, files: int) -> None:
    """What a storm of git's own writes under .git/ costs the watcher (all dropped)."""
    repo = make_repo(tmp / "churn", files)
    s = Sensor(tmp / "churn-db")
    s.sensor.ensure_watch(str(repo))
    assert s.sensor.wait_ready(str(repo), 120)
    time.sleep(1.0)
    try:
        c0, t0 = time.process_time(), time.perf_counter()
        subprocess.run(["git", "-C", str(repo), "gc", "-q"], check=True)
        git(repo, "-c", "gc.auto=0", "commit", "-q", "--allow-empty", "-m", "noop")
        time.sleep(3.0)
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        raw = s.sensor.counters.get("files.raw_events")
        rows = len(s.store.project_changes(str(repo), 0))
    finally:
        s.sensor.stop()
        s.store.close()
    print(
        f"git churn (gc + commit): {raw} raw events under .git/, {rows} rows, "
        f"{cpu * 1000:.0f} ms CPU in this process over {wall:.1f} s"
    )


def _claude_corpus(out: Path, target_mb: int) -> tuple[int, int]:
    src = SESSIONS / "claude-code" / "cctrace-phase0.jsonl"
    if not src.is_file():
        raise SystemExit(f"missing {src}: the tailing benchmark uses the real sessions")
    data = src.read_bytes()
    copies = max(1, target_mb * 1024 * 1024 // len(data))
    with out.open("wb") as fh:
        for k in range(copies):
            # Each copy's responses get their own ids, so dedup does not skip them.
            fh.write(data.replace(b'"msg_', b'"msg_%d_' % k).replace(b'"req_', b'"req_%d_' % k))
    return copies, out.stat().st_size


def _codex_corpus(out: Path, target_mb: int) -> tuple[int, int]:
    srcs = sorted((SESSIONS / "codex").glob("moonmind-rollout-*.jsonl"))
    data = b"".join(p.read_bytes() for p in srcs)
    copies = max(1, target_mb * 1024 * 1024 // len(data))
    with out.open("wb") as fh:
        for k in range(copies):
            # Cumulative totals must move for each copy, or the repeats are dropped.
            fh.write(data.replace(b'"total_tokens":', b'"total_tokens":%d' % (k + 1)))
    return copies, out.stat().st_size


def bench_tailing(tmp: Path, target_mb: int) -> None:
    for name, build, source in (
        ("claude", _claude_corpus, None),
        ("codex", _codex_corpus, "codex"),
    ):
        path = tmp / f"{name}.jsonl"
        copies, size = build(path, target_mb)
        store = Store.open(f"sqlite:///{tmp / f'tail-{name}.db'}")
        tailer = TranscriptTailer(
            store=store, clock=SystemClock(), counters=Counters(), on_session_change=lambda s: None
        )
        t0 = time.perf_counter()
        tailer.catch_up("bench", str(path), source)
        dt = time.perf_counter() - t0
        rows = tailer.counters.get("transcripts.rows")
        print(
            f"tailing {name}: {size / 1e6:.1f} MB ({copies} copies of the real sessions) in "
            f"{dt:.2f} s = {size / 1e6 / dt:.0f} MB/s, {rows} usage rows stored  "
            "(target ≥ 50 MB/s)"
        )
        store.close()
    # The hook path: one bounded inline slice of a fresh backlog.
    store = Store.open(f"sqlite:///{tmp / 'tail-inline.db'}")
    tailer = TranscriptTailer(
        store=store, clock=SystemClock(), counters=Counters(), on_session_change=lambda s: None
    )
    t0 = time.perf_counter()
    tailer.notice("inline", str(tmp / "claude.jsonl"))  # background thread not started
    dt = time.perf_counter() - t0
    print(f"hook path: first notice() of a {target_mb} MB backlog took {dt * 1000:.1f} ms")
    store.close()


class Ticker:
    """A thread that wakes every 1 ms: its worst gap is the longest the GIL was held."""

    def __init__(self) -> None:
        self.gaps: list[float] = []
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        last = time.perf_counter()
        while not self._halt.is_set():
            time.sleep(0.001)
            now = time.perf_counter()
            self.gaps.append(now - last)
            last = now

    def __enter__(self) -> Ticker:
        self._thread.start()
        time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self._halt.set()
        self._thread.join()

    def worst_ms(self) -> float:
        return max(self.gaps) * 1000


def bench_setup(tmp: Path, budget: int) -> None:
    from watchfiles._rust_notify import RustNotify

    root = tmp / "setup"
    for i in range(200):
        for j in range(200):
            (root / "node_modules" / f"p{i}" / f"d{j}").mkdir(parents=True)
    side = int((budget - 2) ** 0.5)
    for i in range(side):
        for j in range(side):
            (root / "src" / f"m{i}" / f"s{j}").mkdir(parents=True)
    over = tmp / "over"
    for i in range(budget + 1):
        (over / f"m{i // 100}" / f"s{i % 100}").mkdir(parents=True)
    for name, project in (("at budget", root), ("over budget", over), ("/sys", Path("/sys"))):
        s = Sensor(tmp / f"setup-db-{name.replace('/', '').replace(' ', '-')}")
        s.sensor.settings = Settings(data_dir=tmp / "data", watch_max_dirs=budget)
        try:
            with Ticker() as t:
                t0 = time.perf_counter()
                s.sensor.ensure_watch(str(project))
                live = s.sensor.wait_settled(str(project), 120)
                wall = time.perf_counter() - t0
            w = s.sensor.watches.get(str(project))
            why = s.sensor.unwatched.get(str(project))
            what = f"{len(w.dirs)} dirs watched" if live and w else f"not watched ({why})"
            print(
                f"set-up {name}: {what} in {wall * 1000:.0f} ms; "
                f"worst GIL wait of another thread {t.worst_ms():.0f} ms"
            )
        finally:
            s.sensor.stop()
            s.store.close()
    with Ticker() as t:
        t0 = time.perf_counter()
        notify = RustNotify([str(root)], False, False, 300, True, True)
        wall = time.perf_counter() - t0
    notify.close()
    print(
        f"set-up the old way (recursive watch of the root): {wall * 1000:.0f} ms; "
        f"worst GIL wait of another thread {t.worst_ms():.0f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--writes", type=int, default=100)
    ap.add_argument("--files", type=int, default=20_000)
    ap.add_argument("--idle", type=float, default=20.0)
    ap.add_argument("--tail-mb", type=int, default=64)
    ap.add_argument("--budget", type=int, default=Settings().watch_max_dirs)
    ap.add_argument("--only", choices=("latency", "idle", "churn", "tailing", "setup"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tma1-bench-") as d:
        tmp = Path(d)
        if args.only in (None, "latency"):
            bench_latency(tmp, args.writes)
        if args.only in (None, "idle"):
            bench_idle(tmp, args.files, args.idle)
        if args.only in (None, "churn"):
            bench_git_churn(tmp, args.files)
        if args.only in (None, "tailing"):
            bench_tailing(tmp, args.tail_mb)
        if args.only in (None, "setup"):
            bench_setup(tmp, args.budget)


if __name__ == "__main__":
    main()
