"""Memory under sustained load: does a real `tma1 serve` plateau, or grow with history?

    .venv/bin/python bench/bench_memory.py                       # 300,000 events, 200 sessions
    .venv/bin/python bench/bench_memory.py --events 30000 --sessions 20 --idle 20   # quick
    .venv/bin/python bench/bench_memory.py --database-url postgresql+psycopg://…/db
    .venv/bin/python bench/bench_memory.py --tracemalloc 5       # where the growth lives

`--agents` agents (default 8) post hooks in a closed loop (the next hook as soon as the
last answer arrives). Each agent runs sessions one after another: SessionStart, turns
(UserPromptSubmit, Read, Edit, Bash with `--output-kb` of output that fails one time in four,
a Bash with a few KB of passing output, Stop — and a second Stop with
`stop_hook_active` when the first is blocked), then SessionEnd; the next session has a new
id. So `--sessions` sessions of `--events / --sessions` events each pass through the
server over the run, about `--agents` of them live at a time: the live set is the working
set, everything else is history.

The server stamps events with its own clock, so a run of 20 minutes cannot age a session
out of the rules' 60-minute window: a session that ended has left the working set by its
SessionEnd (Claude Code's and Copilot's last hook) or, for agents that never say it, by
idling out. What a plateau needs is that memory does not keep what history left behind.

The server's RSS (VmRSS of /proc/PID/status) is sampled every `--every` events and during
`--idle` seconds of silence at the end. The verdict compares the growth per event of the
last third of the samples with that of the first third (warm-up: caches, the allocator's
arenas): "plateau" when the last third grows at most a quarter as fast and by at most 2 %
of its RSS, else "grows".

`--tracemalloc N`: the server runs under tracemalloc (slower) and writes a snapshot at
every N-th sample; the top growth between the second snapshot and the last one is printed
by traceback (a debug run, to find what grows, not to quote).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from conftest import LOOPBACK_TLS
from loadkit import ServeProcess, free_port, hook_headers

# Runs `tma1 serve` under tracemalloc; SIGUSR1 writes a snapshot to $TMA1_BENCH_SNAPSHOT.N.
_TRACED_SERVE = """
import os, runpy, signal, sys, tracemalloc
tracemalloc.start(12)
n = [0]
def dump(*_):
    n[0] += 1
    tracemalloc.take_snapshot().dump(f"{os.environ['TMA1_BENCH_SNAPSHOT']}.{n[0]}")
    open(f"{os.environ['TMA1_BENCH_SNAPSHOT']}.{n[0]}.done", "w").close()
signal.signal(signal.SIGUSR1, dump)
sys.argv = ["tma1", *sys.argv[1:]]
runpy.run_module("tma1.cli", run_name="__main__")
"""


def start_server(data_dir: Path, database_url: str | None, traced: bool) -> ServeProcess:
    if not traced:
        return ServeProcess.start(data_dir, database_url=database_url)
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {
        **os.environ,
        "TMA1_DATA_DIR": str(data_dir),
        "TMA1_LOG_LEVEL": "WARNING",
        "TMA1_BENCH_SNAPSHOT": str(data_dir / "snapshot"),
    }
    env.pop("TMA1_DATABASE_URL", None)
    if database_url:
        env["TMA1_DATABASE_URL"] = database_url
    log_path = data_dir / "serve.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", _TRACED_SERVE, "serve", "--port", str(port), "--no-watch"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=str(data_dir),
        )
    srv = ServeProcess(
        proc=proc, port=port, data_dir=data_dir, database_url=database_url, log_path=log_path
    )
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"tma1 serve exited with {proc.returncode}:\n{srv.log_tail()}")
        try:
            if httpx.get(f"{srv.url}/api/health", timeout=2, verify=LOOPBACK_TLS).is_success:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            srv.kill9()
            raise RuntimeError(f"tma1 serve did not come up:\n{srv.log_tail()}")
        time.sleep(0.1)
    srv.token = (data_dir / "hook-token").read_text(encoding="ascii").strip()
    return srv


def _pytest_output(rng: random.Random, n_tests: int, failing: bool, tag: str) -> str:
    """A few KB of pytest output, different every time (as real runs are: times, ids)."""
    lines = ["============================= test session starts =============================="]
    lines += [
        f"tests/test_mod_{i % 7}.py::test_case_{i}_{tag} PASSED [{i}%]" for i in range(n_tests)
    ]
    if failing:
        lines += [
            "=================================== FAILURES ===================================",
            f"___________________________ test_case_{n_tests}_{tag} ____________________________",
            f"    def test_case_{n_tests}_{tag}():",
            f">       assert compute({rng.randint(0, 999)}) == {rng.randint(0, 999)}",
            "E       AssertionError: assert 41 == 42",
            f"tests/test_mod_3.py:{rng.randint(10, 400)}: AssertionError",
            f"FAILED tests/test_mod_3.py::test_case_{n_tests}_{tag} - AssertionError: assert 41",
            f"=================== 1 failed, {n_tests} passed in {rng.random() * 9:.2f}s ===",
        ]
    else:
        lines.append(
            f"============================== {n_tests} passed in {rng.random() * 9:.2f}s ======"
        )
    return "\n".join(lines)


def session_events(
    session: str, n_events: int, seed: int, cwd: str, output_kb: float = 2.0
) -> list[dict[str, Any]]:
    """One session of about `n_events` hooks, SessionStart to SessionEnd (the module doc)."""
    rng = random.Random(seed)
    base = {"session_id": session, "cwd": cwd, "transcript_path": f"{cwd}/t-{session}.jsonl"}
    out: list[dict[str, Any]] = [{**base, "hook_event_name": "SessionStart", "source": "startup"}]
    step = 0
    while len(out) < n_events - 1:
        tag = f"{seed}-{step}"
        path = f"{cwd}/src/mod_{rng.randrange(12)}.py"
        fails = rng.random() < 0.25
        cmd = {"command": f"pytest -q tests/test_mod_{rng.randrange(7)}.py"}
        # A test line is ~50 characters: outputs of half to one and a half `output_kb`.
        lines = max(int(output_kb * 1024 / 50), 2)
        output = _pytest_output(rng, rng.randint(lines // 2, lines * 3 // 2), fails, tag)
        bash_post: dict[str, Any] = {
            **base,
            "tool_name": "Bash",
            "tool_use_id": f"{tag}-bash",
            "tool_input": cmd,
        }
        if fails:
            bash_post |= {
                "hook_event_name": "PostToolUseFailure",
                "error": f"Exit code 1\n{output}",
            }
        else:
            bash_post |= {
                "hook_event_name": "PostToolUse",
                "tool_response": {"stdout": output, "stderr": "", "exitCode": 0},
            }
        build = {"command": "make build"}
        out += [
            {**base, "hook_event_name": "UserPromptSubmit", "prompt": f"step {step}: go on"},
            {
                **base,
                "hook_event_name": "PreToolUse",
                "tool_name": "Read",
                "tool_use_id": f"{tag}-read",
                "tool_input": {"file_path": path},
            },
            {
                **base,
                "hook_event_name": "PostToolUse",
                "tool_name": "Read",
                "tool_use_id": f"{tag}-read",
                "tool_input": {"file_path": path},
                "tool_response": {
                    "type": "text",
                    "file": {"filePath": path, "content": f"x = {step}\n" * 40},
                },
            },
            {
                **base,
                "hook_event_name": "PreToolUse",
                "tool_name": "Edit",
                "tool_use_id": f"{tag}-edit",
                "tool_input": {
                    "file_path": path,
                    "old_string": f"x = {step}",
                    "new_string": f"x = {step + 1}",
                },
            },
            {
                **base,
                "hook_event_name": "PostToolUse",
                "tool_name": "Edit",
                "tool_use_id": f"{tag}-edit",
                "tool_input": {
                    "file_path": path,
                    "old_string": f"x = {step}",
                    "new_string": f"x = {step + 1}",
                },
                "tool_response": {"filePath": path, "success": True},
            },
            {
                **base,
                "hook_event_name": "PreToolUse",
                "tool_name": "Bash",
                "tool_use_id": f"{tag}-bash",
                "tool_input": cmd,
            },
            bash_post,
            {
                **base,
                "hook_event_name": "PreToolUse",
                "tool_name": "Bash",
                "tool_use_id": f"{tag}-build",
                "tool_input": build,
            },
            {
                **base,
                "hook_event_name": "PostToolUse",
                "tool_name": "Bash",
                "tool_use_id": f"{tag}-build",
                "tool_input": build,
                "tool_response": {
                    "stdout": f"built {rng.getrandbits(64):x}\n" * 30,
                    "stderr": "",
                    "exitCode": 0,
                },
            },
            {**base, "hook_event_name": "Stop", "stop_hook_active": False},
        ]
        step += 1
    del out[n_events - 1 :]
    out.append({**base, "hook_event_name": "SessionEnd", "reason": "other"})
    return out


@dataclass
class Run:
    total: int
    every: int
    srv: ServeProcess
    traced_every: int = 0
    posted: int = 0
    errors: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    samples: list[tuple[int, float, int]] = field(default_factory=list)  # events, s, kB
    snapshots: list[Path] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    t0: float = field(default_factory=time.monotonic)

    def sample(self, events: int) -> None:
        kb = self.srv.rss_kb()
        if kb is not None:
            self.samples.append((events, time.monotonic() - self.t0, kb))
            n = len(self.samples)
            print(
                f"  {events:>9,} events  {self.samples[-1][1]:7.0f} s  {kb / 1024:7.1f} MiB",
                file=sys.stderr,
                flush=True,
            )
            if self.traced_every and n % self.traced_every == 0:
                self.snapshot()

    def snapshot(self) -> None:
        n = len(self.snapshots) + 1
        done = self.srv.data_dir / f"snapshot.{n}.done"
        os.kill(self.srv.pid, signal.SIGUSR1)
        deadline = time.monotonic() + 300
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        self.snapshots.append(self.srv.data_dir / f"snapshot.{n}")

    def count(self, status: int | None) -> None:
        with self.lock:
            self.posted += 1
            if status is None:
                self.errors += 1
            else:
                self.statuses[status] = self.statuses.get(status, 0) + 1
            due = self.posted % self.every == 0
            posted = self.posted
        if due:
            self.sample(posted)


def drive(run: Run, agents: int, sessions: int, run_id: str, output_kb: float) -> None:
    per_session = max(run.total // sessions, 12)
    next_session = iter(range(sessions))
    take = threading.Lock()
    headers = hook_headers(run.srv.token)

    def agent() -> None:
        limits = httpx.Limits(max_keepalive_connections=0)  # a new connection a hook, as curl
        with httpx.Client(
            base_url=run.srv.url, timeout=30, limits=limits, verify=LOOPBACK_TLS
        ) as client:
            while True:
                with take:
                    i = next(next_session, None)
                if i is None:
                    return
                sid = f"mem-{run_id}-{i}"
                cwd = f"/tmp/tma1-mem/p{i % 4}"
                for payload in session_events(sid, per_session, i, cwd, output_kb):
                    while True:
                        try:
                            r = client.post(
                                "/api/hooks", content=json.dumps(payload), headers=headers
                            )
                        except httpx.HTTPError:
                            run.count(None)
                            break
                        run.count(r.status_code)
                        # A blocked Stop: the agent goes on, and its next Stop says so.
                        if payload["hook_event_name"] != "Stop" or not r.text.strip():
                            break
                        if payload.get("stop_hook_active"):
                            break
                        payload = {**payload, "stop_hook_active": True}

    threads = [threading.Thread(target=agent, daemon=True) for _ in range(agents)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def slope(points: list[tuple[int, float, int]]) -> tuple[float, int]:
    """Growth per event (kB) of the samples, least squares over events; and the growth."""
    if len(points) < 2:
        return 0.0, 0
    xs = [p[0] for p in points]
    ys = [p[2] for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs) or 1
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den, ys[-1] - ys[0]


def verdict(samples: list[tuple[int, float, int]]) -> tuple[str, dict[str, float]]:
    third = max(len(samples) // 3, 2)
    first, last = samples[:third], samples[-third:]
    s1, _ = slope(first)
    s3, _ = slope(last)
    grew = last[-1][2] - last[0][2]
    flat = s3 <= max(s1, 0) / 4 and grew <= 0.02 * last[-1][2]
    figures = {
        "first_third_kb_per_event": round(s1, 3),
        "last_third_kb_per_event": round(s3, 3),
        "last_third_growth_mib": round(grew / 1024, 1),
    }
    return ("plateau" if flat else "grows"), figures


def top_growth(snapshots: list[Path], limit: int = 15) -> str:
    import tracemalloc

    if len(snapshots) < 2:
        return "(fewer than two snapshots)"
    old = tracemalloc.Snapshot.load(str(snapshots[min(1, len(snapshots) - 2)]))
    new = tracemalloc.Snapshot.load(str(snapshots[-1]))
    out = []
    for stat in new.compare_to(old, "traceback")[:limit]:
        out.append(f"{stat.size_diff / 1024:+10.0f} KiB {stat.count_diff:+8d} blocks")
        out += [f"      {line}" for line in stat.traceback.format(limit=8)]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--events", type=int, default=300_000)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--agents", type=int, default=8, help="sessions live at a time")
    ap.add_argument("--every", type=int, help="sample RSS every N events (default: events/30)")
    ap.add_argument("--output-kb", type=float, default=2.0, help="mean size of a Bash output (KB)")
    ap.add_argument("--idle", type=float, default=60.0, help="seconds of silence at the end")
    ap.add_argument("--database-url", help="default: SQLite in a temporary data dir")
    ap.add_argument(
        "--tracemalloc",
        type=int,
        default=0,
        metavar="N",
        help="debug: snapshot every N-th sample, print the top growth",
    )
    ap.add_argument("--json", type=Path, help="also write the samples and verdict here")
    args = ap.parse_args(argv)
    every = args.every or max(args.events // 30, 100)
    run_id = f"{int(time.time()) % 100000}"

    with tempfile.TemporaryDirectory(prefix="tma1-bench-mem-") as tmp:
        srv = start_server(Path(tmp) / "data", args.database_url, args.tracemalloc > 0)
        run = Run(total=args.events, every=every, srv=srv, traced_every=args.tracemalloc)
        try:
            run.sample(0)
            drive(run, args.agents, args.sessions, run_id, args.output_kb)
            busy_s = time.monotonic() - run.t0
            if run.posted % every:
                run.sample(run.posted)
            idle: list[tuple[float, int]] = []
            for _ in range(max(int(args.idle // 10), 1)):
                time.sleep(min(10.0, args.idle))
                kb = srv.rss_kb() or 0
                idle.append((time.monotonic() - run.t0 - busy_s, kb))
                print(f"  idle {idle[-1][0]:5.0f} s  {kb / 1024:7.1f} MiB", file=sys.stderr)
            if args.tracemalloc:
                run.snapshot()
            health = srv.health()
        finally:
            srv.stop()
        growth = top_growth(run.snapshots) if args.tracemalloc else None

    word, figures = verdict(run.samples)
    print(
        f"\n{run.posted:,} events over {args.sessions} sessions ({args.agents} live at a time), "
        f"{busy_s:.0f} s ({run.posted / busy_s:.0f} events/s), "
        f"{args.database_url.split(':', 1)[0] if args.database_url else 'sqlite'}; "
        f"statuses {dict(sorted(run.statuses.items()))}, client errors {run.errors}"
    )
    print("\n| events | s | RSS MiB |\n|---:|---:|---:|")
    for ev, s, kb in run.samples:
        print(f"| {ev:,} | {s:.0f} | {kb / 1024:.1f} |")
    for s, kb in idle:
        print(f"| idle +{s:.0f} s | | {kb / 1024:.1f} |")
    print(f"\nverdict: {word} {json.dumps(figures)}")
    engine = health.get("engine", {})
    print(
        "engine:",
        json.dumps(
            {k: engine.get(k) for k in ("held_windows", "cached_sessions", "tracked_sessions")}
        ),
    )
    if growth is not None:
        print("\ntop growth (tracemalloc, second snapshot → last):\n" + growth)
    if args.json:
        args.json.write_text(
            json.dumps({"samples": run.samples, "idle": idle, "verdict": word, **figures}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
