"""Replay throughput and peak memory over the whole real session corpus.

    .venv/bin/python bench/bench_replay.py [PATH …] [--db-dir DIR] [--tracemalloc]

PATH defaults to ../shared/data/sessions. Prints, for one run:
- conversion: records read and items made per second (reading + detection + converters);
- replay on `--jobs` processes (default: one per core; `tma1 replay`'s default): hook
  events per second, wall clock, from the parsed items to the summary (the database
  write included); run first, so no cache of this process is warm yet;
- replay on one process, step by step: the engine pass (Service.handle_payload for every
  hook event), the write to the database, the emit log and the summary — wall clock and
  this process's CPU time (the machine is shared; CPU time does not depend on what else
  runs);
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

from tma1.replay import driver, shards
from tma1.replay.model import HOOK

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO.parent / "shared" / "data" / "sessions"
TARGET = 20_000


class Timing:
    """Wall time spent in handle_payload, by hook event kind."""

    def __init__(self) -> None:
        self.time: dict[str, float] = defaultdict(float)
        self.count: Counter[str] = Counter()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("paths", nargs="*", type=Path, default=[CORPUS])
    ap.add_argument("--db-dir", type=Path, help="directory for the replay database")
    ap.add_argument("--jobs", type=int, default=shards.default_jobs(), help="processes")
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

    db_dir = str(args.db_dir) if args.db_dir else driver.default_db_dir()
    with tempfile.TemporaryDirectory(prefix="bench-replay-", dir=db_dir) as tmp:
        # What `tma1 replay` does: no --db, so no tool input or successful output is kept.
        w_par = time.perf_counter()
        par = driver.replay_items(items, jobs=args.jobs)
        w_par = time.perf_counter() - w_par
        children_rss_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        start = items[0].ts if items else 0
        # What replay_items does, step by step (the garbage collector kept off the items).
        with driver._long_lived_objects_frozen():
            c2, w2 = time.process_time(), time.perf_counter()
            replayer = driver.Replayer(start_ts=start)
            replayer.feed(items)
            c3, w3 = time.process_time(), time.perf_counter()
            replayer.write()
            c4, w4 = time.process_time(), time.perf_counter()
            deliveries, emits, _summary, _counters = replayer.finish(items)
            c5, w5 = time.process_time(), time.perf_counter()
        # `tma1 replay --db FILE`: every text kept, on one process and on --jobs.
        w_kept = time.perf_counter()
        driver.replay_items(items, db=Path(tmp) / "kept-1.db", jobs=1)
        w_kept = time.perf_counter() - w_kept
        w_kept_par = time.perf_counter()
        driver.replay_items(items, db=Path(tmp) / "kept-n.db", jobs=args.jobs)
        w_kept_par = time.perf_counter() - w_kept_par

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
        f"conversion: {w1 - w0:.3f} s wall, {c1 - c0:.3f} s CPU → "
        f"{records / (w1 - w0):,.0f} records/s, {len(items) / (w1 - w0):,.0f} items/s (wall)"
    )
    n_shards = len(shards.plan(items, args.jobs)) if args.jobs > 1 else 1
    print(
        f"replay on {args.jobs} processes ({n_shards} shards): {w_par:.3f} s wall → "
        f"{events / w_par:,.0f} events/s; deliveries {len(par[0])}, emits {len(par[1])}; "
        f"target {TARGET:,} events/s"
    )
    print("replay on one process, by step (wall / CPU), no texts kept as without --db:")
    for label, (cw, cc) in (
        ("open + engine pass", (w3 - w2, c3 - c2)),
        ("write to the database", (w4 - w3, c4 - c3)),
        ("emit log + summary", (w5 - w4, c5 - c4)),
    ):
        print(f"  {label:<24} {cw * 1e3:7.1f} ms  {cc * 1e3:7.1f} ms")
    wall, cpu = w5 - w2, c5 - c2
    print(
        f"one process: {wall:.3f} s wall, {cpu:.3f} s CPU → {events / wall:,.0f} events/s wall, "
        f"{events / cpu:,.0f} events/s CPU ({len(items) / wall:,.0f} items/s wall); "
        f"target {TARGET:,} events/s"
    )
    print(
        f"with --db (every text kept; caches warm now): {events / w_kept:,.0f} events/s on "
        f"one process, {events / w_kept_par:,.0f} events/s on {args.jobs}"
    )
    total_w, total_c = w5 - w0 - (w2 - w1), c5 - c0 - (c2 - c1)
    print(
        f"end to end: {total_w:.3f} s wall, {total_c:.3f} s CPU → {events / total_w:,.0f} events/s"
    )
    print(f"deliveries: {len(deliveries)}, emits: {len(emits)}")
    print()
    timing = per_kind(items)
    print("a second engine pass, timed per hook event (wall; the timer adds its own cost):")
    for name, secs in sorted(timing.time.items(), key=lambda kv: -kv[1]):
        n = timing.count[name]
        print(f"  {name:<20} {n:>6} calls  {secs * 1e3:7.1f} ms  {secs / n * 1e6:7.1f} µs/call")
    print()
    if peak_py is not None:
        print(
            f"peak memory: tracemalloc peak {peak_py / 2**20:.1f} MiB; "
            f"max RSS {maxrss_kb / 1024:.1f} MiB"
        )
    else:
        print(
            f"peak memory: max RSS {maxrss_kb / 1024:.1f} MiB (this process), "
            f"{children_rss_kb / 1024:.1f} MiB (the largest replay child)"
        )
    return 0


def per_kind(items: list) -> Timing:  # type: ignore[type-arg]
    """Time Service.handle_payload per hook event kind, on a fresh replayer."""
    timing = Timing()
    replayer = driver.Replayer(start_ts=items[0].ts if items else 0)
    inner = replayer.service.handle_payload

    def timed(payload, **k):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        try:
            return inner(payload, **k)
        finally:
            name = str(payload.get("hook_event_name", "?"))
            timing.time[name] += time.perf_counter() - t
            timing.count[name] += 1

    replayer.service.handle_payload = timed  # type: ignore[method-assign]
    try:
        replayer.feed(items)
    finally:
        replayer.close()
    return timing


if __name__ == "__main__":
    sys.exit(main())
