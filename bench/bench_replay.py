"""Replay throughput and peak memory over the whole real session corpus.

    .venv/bin/python bench/bench_replay.py [PATH …] [--db-dir DIR] [--tracemalloc]

PATH defaults to ../shared/data/sessions. Prints, for one run:
- conversion: records read and items made per second (reading + detection + converters);
- replay: hook events (and all items) fed through Service.handle_hook per second, by wall
  clock and by this process's CPU time (the machine is shared; CPU time is the figure
  that does not depend on what else runs);
- where the time goes inside the replay loop, by hook event kind;
- peak memory: the process's max RSS; with `--tracemalloc` also the peak of Python
  allocations (tracemalloc slows Python down several times: its run's speed figures are
  not comparable, so it is a separate invocation).

The replay database lives on tmpfs (/dev/shm) by default, like `tma1 replay`; `--db-dir`
puts it elsewhere (e.g. a disk directory) to compare. The target is ≥ 20,000 events/s.
"""

from __future__ import annotations

import argparse
import logging
import resource
import sys
import tempfile
import time
import tracemalloc
from collections import Counter, defaultdict
from pathlib import Path

from tma1.replay import driver
from tma1.replay.model import HOOK

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO.parent / "shared" / "data" / "sessions"
TARGET = 20_000


class Timing:
    """Wall time spent in handle_hook, by hook event kind."""

    def __init__(self) -> None:
        self.time: dict[str, float] = defaultdict(float)
        self.count: Counter[str] = Counter()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("paths", nargs="*", type=Path, default=[CORPUS])
    ap.add_argument("--db-dir", type=Path, help="directory for the replay database")
    ap.add_argument(
        "--tracemalloc", action="store_true", help="also trace Python allocations (slow)"
    )
    args = ap.parse_args()
    for p in args.paths:
        if not p.exists():
            print(f"bench_replay: {p} is absent; nothing to measure", file=sys.stderr)
            return 0
    logging.getLogger("tma1").setLevel(logging.ERROR)
    if args.tracemalloc:
        tracemalloc.start()

    c0, w0 = time.process_time(), time.perf_counter()
    inputs, problems = driver.load(args.paths)
    items, dups = driver.merge_items(inputs)
    c1, w1 = time.process_time(), time.perf_counter()
    records = sum(c.records for c in inputs)
    events = sum(1 for i in items if i.kind == HOOK)

    # Per-kind timing: wrap the service's handle_hook for this run only.
    timing = Timing()
    real_build = driver.build_service

    def build(*a, **kw):  # type: ignore[no-untyped-def]
        svc = real_build(*a, **kw)
        inner = svc.handle_hook

        def timed(body: bytes, **k):  # type: ignore[no-untyped-def]
            t = time.perf_counter()
            try:
                return inner(body, **k)
            finally:
                name = _hook_name(body)
                timing.time[name] += time.perf_counter() - t
                timing.count[name] += 1

        svc.handle_hook = timed  # type: ignore[method-assign]
        return svc

    driver.build_service = build  # type: ignore[assignment]
    db_dir = str(args.db_dir) if args.db_dir else driver.default_db_dir()
    with tempfile.TemporaryDirectory(prefix="bench-replay-", dir=db_dir) as tmp:
        c2, w2 = time.process_time(), time.perf_counter()
        deliveries, emits, _summary, _counters = driver.replay_items(
            items, db=Path(tmp) / "bench.db"
        )
        c3, w3 = time.process_time(), time.perf_counter()
    driver.build_service = real_build  # type: ignore[assignment]

    peak_py = tracemalloc.get_traced_memory()[1] if args.tracemalloc else None
    maxrss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    print(f"corpus: {', '.join(str(p) for p in args.paths)}")
    print(
        f"inputs: {len(inputs)} files, {records:,} records, {len(items):,} items "
        f"({events:,} hook events), {dups} duplicates dropped, {len(problems)} path problems"
    )
    print(f"database: {db_dir or tempfile.gettempdir()} (SQLite, WAL)")
    print()
    print(
        f"conversion: {w1 - w0:.2f} s wall, {c1 - c0:.2f} s CPU → "
        f"{records / (w1 - w0):,.0f} records/s, {len(items) / (w1 - w0):,.0f} items/s (wall)"
    )
    wall, cpu = w3 - w2, c3 - c2
    print(
        f"replay:     {wall:.2f} s wall, {cpu:.2f} s CPU → {events / wall:,.0f} events/s wall, "
        f"{events / cpu:,.0f} events/s CPU ({len(items) / wall:,.0f} items/s wall); "
        f"target {TARGET:,} events/s"
    )
    total_w, total_c = w3 - w0 - (w2 - w1), c3 - c0 - (c2 - c1)
    print(
        f"end to end: {total_w:.2f} s wall, {total_c:.2f} s CPU → {events / total_w:,.0f} events/s"
    )
    print(f"deliveries: {len(deliveries)}, emits: {len(emits)}")
    print()
    print("time inside Service.handle_hook by hook event (wall):")
    for name, secs in sorted(timing.time.items(), key=lambda kv: -kv[1]):
        n = timing.count[name]
        print(f"  {name:<20} {n:>6} calls  {secs:7.2f} s  {secs / n * 1e3:7.2f} ms/call")
    print()
    floor = insert_floor(db_dir)
    print(
        "floor: one Store.insert_event (the live path commits each event before the engine "
        "may see it), single thread, 1,000 events:"
    )
    for label, cpu_us, wall_us in floor:
        print(
            f"  {label:<24} {cpu_us:5.0f} µs CPU, {wall_us:5.0f} µs wall per event "
            f"→ at most {1e6 / cpu_us:,.0f} events/s"
        )
    print()
    if peak_py is not None:
        print(
            f"peak memory: tracemalloc peak {peak_py / 2**20:.1f} MiB; "
            f"max RSS {maxrss_kb / 1024:.1f} MiB"
        )
    else:
        print(f"peak memory: max RSS {maxrss_kb / 1024:.1f} MiB")
    return 0


def insert_floor(db_dir: str | None) -> list[tuple[str, float, float]]:
    """What inserting alone costs: the replay cannot be faster than this per event."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import StaticPool

    from tma1.events import parse_payload
    from tma1.store import Store
    from tma1.store.db import run_migrations

    payload = {"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash",
               "tool_input": {"command": "go build ./..."}, "cwd": "/tmp/p"}  # fmt: skip
    events = [parse_payload(payload, ts=1_000 + i) for i in range(1_000)]
    out = []
    with tempfile.TemporaryDirectory(prefix="bench-floor-", dir=db_dir) as tmp:
        # In-memory SQLite needs one shared connection (StaticPool); make_engine's pool
        # would give every connection its own empty database.
        memory = create_engine(
            "sqlite://", connect_args={"check_same_thread": False}, poolclass=StaticPool
        )
        run_migrations(memory)
        for label, store in (
            (f"file in {db_dir or tempfile.gettempdir()}", Store.open(f"sqlite:///{tmp}/f.db")),
            ("sqlite :memory:", Store(memory)),
        ):
            c0, w0 = time.process_time(), time.perf_counter()
            for ev in events:
                ev.id = None
                store.insert_event(ev)
            c1, w1 = time.process_time(), time.perf_counter()
            store.close()
            n = len(events)
            out.append((label, (c1 - c0) / n * 1e6, (w1 - w0) / n * 1e6))
    return out


def _hook_name(body: bytes) -> str:
    marker = b'"hook_event_name": "'
    i = body.find(marker)
    if i < 0:
        return "?"
    j = body.find(b'"', i + len(marker))
    return body[i + len(marker) : j].decode("utf-8", "replace")


if __name__ == "__main__":
    sys.exit(main())
