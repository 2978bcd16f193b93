"""Replay throughput and peak memory over the whole real session corpus.

    .venv/bin/python bench/bench_replay.py [PATH …] [--repeat K] [--db-dir DIR] [--tracemalloc]

PATH defaults to ../shared/data/sessions. Prints:
- conversion: records read and items made per second (reading + detection + converters);
- replay, as `tma1 replay` runs it (no `--db`: held in memory, one process): hook events
  per second, wall clock from the parsed items to the summary. Each run is a process
  forked right after the corpus was loaded, before anything was replayed, so no cache of
  an earlier run is warm (a real `tma1 replay` starts cold too); `--repeat` runs of each,
  alternating, with the reference loop timed beside them (the machine's speed drifts:
  compare within a run);
- replay with `--db` (the database written at the end), same way;
- one process, step by step (wall / CPU): the engine pass, stopping it, the summary;
- where the time goes inside the replay loop, by hook event kind (a fresh process too);
- peak memory: the largest max RSS of the runs; with `--tracemalloc` also the peak of
  Python allocations (tracemalloc slows Python down several times: its run's speed
  figures are not comparable, so it is a separate invocation).

There is no events/s target: a whole replay of the corpus takes well under a second. The
replay target is bench/bench_replay_month.py (a month of one heavy user in ≤ 10 s).
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tma1.replay import driver
from tma1.replay.model import HOOK, ReplayItem

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO.parent / "shared" / "data" / "sessions"


def reference_loop_ms() -> float:
    """A fixed pure-Python loop: how fast the machine is right now."""
    t = time.perf_counter()
    x = 0
    for i in range(3_000_000):
        x += i * i
    return (time.perf_counter() - t) * 1e3


def in_fresh_process(fn: Callable[[], Any]) -> tuple[Any, int]:
    """`fn()` in a process forked from this one (which has loaded the corpus and replayed
    nothing): (its result, its max RSS in KiB)."""
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)

    def child() -> None:
        try:
            out = fn()
            send.send(("ok", out, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
        except BaseException as exc:  # the bench must say what broke
            send.send(("error", repr(exc), 0))

    proc = ctx.Process(target=child)
    proc.start()
    send.close()
    status, out, rss = recv.recv()
    proc.join()
    if status != "ok":
        raise RuntimeError(out)
    return out, rss


def timed_replay(items: list[ReplayItem], **kw: Any) -> float:
    t = time.perf_counter()
    driver.replay_items(items, **kw)
    return time.perf_counter() - t


def steps(items: list[ReplayItem]) -> list[tuple[str, float, float]]:
    """What replay_items does on one process without a database, step by step."""
    out: list[tuple[str, float, float]] = []
    c0, w0 = time.process_time(), time.perf_counter()
    replayer = driver.Replayer(start_ts=items[0].ts if items else 0)
    replayer.feed(items)
    c1, w1 = time.process_time(), time.perf_counter()
    replayer.write()
    c2, w2 = time.process_time(), time.perf_counter()
    replayer.finish(items)
    c3, w3 = time.process_time(), time.perf_counter()
    out.append(("set up + engine pass", w1 - w0, c1 - c0))
    out.append(("stop the engine", w2 - w1, c2 - c1))
    out.append(("emit log + summary", w3 - w2, c3 - c2))
    return out


class Timing:
    """Wall time spent in handle_hook_async, by hook event kind."""

    def __init__(self) -> None:
        self.time: dict[str, float] = defaultdict(float)
        self.count: Counter[str] = Counter()


def per_kind(items: list[ReplayItem]) -> Timing:
    """Time Service.handle_hook_async per hook event kind, on a fresh replayer."""
    timing = Timing()
    replayer = driver.Replayer(start_ts=items[0].ts if items else 0)
    inner = replayer.service.handle_hook_async

    async def timed(payload, **k):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        try:
            return await inner(payload, **k)
        finally:
            name = str(payload.get("hook_event_name", "?"))
            timing.time[name] += time.perf_counter() - t
            timing.count[name] += 1

    replayer.service.handle_hook_async = timed  # type: ignore[method-assign]
    try:
        replayer.feed(items)
    finally:
        replayer.close()
    return timing


def spread(values: list[float]) -> str:
    return (
        f"{min(values):,.0f}–{max(values):,.0f} (median {statistics.median(values):,.0f})"
        if values
        else "—"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("paths", nargs="*", type=Path, default=[CORPUS])
    ap.add_argument("--db-dir", type=Path, help="directory for the --db runs' databases")
    ap.add_argument("--repeat", type=int, default=5, help="fresh runs of each replay")
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
    print(f"corpus: {', '.join(str(p) for p in args.paths)}")
    print(
        f"inputs: {len(inputs)} files, {records:,} records, {len(items):,} items "
        f"({events:,} hook events), {dups} duplicates dropped, {len(problems)} path problems"
    )
    print(
        f"conversion: {w1 - w0:.3f} s wall, {c1 - c0:.3f} s CPU → "
        f"{records / (w1 - w0):,.0f} records/s, {len(items) / (w1 - w0):,.0f} items/s (wall)"
    )
    print(
        f"\nreplay, each run a fresh process ({args.repeat} runs each; the reference loop "
        f"timed before each pair):"
    )
    rates: dict[str, list[float]] = defaultdict(list)
    refs: list[float] = []
    rss_kb = 0
    db_dir = str(args.db_dir) if args.db_dir else driver.default_db_dir()
    with tempfile.TemporaryDirectory(prefix="bench-replay-", dir=db_dir) as tmp:
        for run in range(args.repeat):
            refs.append(reference_loop_ms())
            line = [f"  run {run + 1}: reference loop {refs[-1]:.0f} ms"]
            for label, kw in (("in memory", {}), ("--db", {"db": f"{tmp}/k{run}.db"})):
                secs, rss = in_fresh_process(lambda kw=kw: timed_replay(items, **kw))
                rss_kb = max(rss_kb, rss)
                rates[label].append(events / secs)
                line.append(f"{label} {secs * 1e3:.0f} ms")
            print("; ".join(line))
    for label, values in rates.items():
        print(f"replay {label:<10} {spread(values)} events/s")
    print(f"reference loop: {min(refs):.0f}–{max(refs):.0f} ms over the runs")

    step_times, _ = in_fresh_process(lambda: steps(items))
    print("\none process without a database, step by step (fresh process; wall / CPU):")
    for label, wall, cpu in step_times:
        print(f"  {label:<24} {wall * 1e3:7.1f} ms  {cpu * 1e3:7.1f} ms")
    wall = sum(w for _, w, _ in step_times)
    cpu = sum(c for _, _, c in step_times)
    print(
        f"  total {wall * 1e3:.1f} ms wall, {cpu * 1e3:.1f} ms CPU → {events / cpu:,.0f} "
        "events/s of CPU"
    )

    timing, _ = in_fresh_process(lambda: per_kind(items))
    print("\nan engine pass, timed per hook event (wall; the timer adds its own cost):")
    for name, secs in sorted(timing.time.items(), key=lambda kv: -kv[1]):
        n = timing.count[name]
        print(f"  {name:<20} {n:>6} calls  {secs * 1e3:7.1f} ms  {secs / n * 1e6:7.1f} µs/call")

    if args.tracemalloc:
        driver.replay_items(items)
        peak = tracemalloc.get_traced_memory()[1]
        print(f"\npeak memory: tracemalloc peak {peak / 2**20:.1f} MiB (loading + one replay)")
    parent_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        f"\npeak memory: max RSS {parent_kb / 1024:.1f} MiB after loading the corpus; "
        f"{rss_kb / 1024:.1f} MiB the largest replay process"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
