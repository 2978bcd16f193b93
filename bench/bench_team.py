"""A team on one PostgreSQL (issue 30): 8 `tma1 serve` daemons × 8 agents against one
daemon × 8 agents, on the same database, in one run.

    .venv/bin/python bench/bench_team.py                         # 8 × 8, 60 s a phase
    .venv/bin/python bench/bench_team.py --daemons 8 --agents 8 --duration 30 --think-ms 250
    .venv/bin/python bench/bench_team.py --private               # a cluster of its own

Each daemon is a real `tma1 serve` child with its own data dir and `TMA1_MACHINE_ID`,
all on one PostgreSQL database: a throw-away one made on `--admin-url` (the suite's
cluster by default; dropped afterwards), or on a cluster this script starts itself
(`--private`, tests/loadkit.PrivatePostgres). Each agent is tests/loadkit's scripted
session (prompt, Read, Edit, a pytest Bash that fails one turn in four, Stop) posted over
HTTP with the hook script's headers (a fresh nonce and its keyed hash), with `--think-ms`
between hooks (a real agent waits for its model between two hooks; 0 is a closed loop).
Every daemon's agents run in a process of their own, so the client's GIL is not what is
measured, and all use the same working-tree path (every devcontainer's `/workspaces/app`).

Phase 1: one daemon, `--agents` agents, `--duration` s. Phase 2: `--daemons` daemons at
once, `--agents` agents each, `--duration` s. Phase 3 (the control; `--no-control` skips
it): phase 2 again with each daemon on a SQLite file of its own, so the CPU is as shared
as in phase 2 but the database is not. Printed: per phase the hook latency p50 / p90
/ p99, requests, non-200 answers, the ingest counters (events queued past the hook's DB
budget), and the count check — every hook answered 200 is in the database under its
daemon's machine id; then the ratios phase 2 / phase 1 and phase 2 / phase 3. The machine
has few cores: phase 2 / phase 1 measures the shared database and the shared CPU
together, phase 2 / phase 3 the shared database alone.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, func, select, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from loadkit import LoadResult, PrivatePostgres, ServeProcess, run_agents

from tma1.store import Store
from tma1.store.schema import hook_events

CWD = "/workspaces/app"  # the same working-tree path on every machine
INGEST_COUNTERS = ("commits", "queued", "budget_exceeded", "late_commits", "db_errors",
                   "dropped_queue_full", "rejected_by_db", "spilled")  # fmt: skip


def _drive(url: str, token: str, agents: int, duration: float, think: float, run_id: str,
           out: Any) -> None:  # fmt: skip
    res = run_agents(
        url,
        token,
        agents=agents,
        duration_s=duration,
        think_ms=think,
        run_id=run_id,
        cwd=CWD,
        timeout_s=30,
    )
    out.put((run_id, res))


def phase(
    servers: list[ServeProcess], *, agents: int, duration: float, think: float, tag: str
) -> dict[str, LoadResult]:
    """Every server's agents at once, each server's in a process of its own."""
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    procs = []
    for d, srv in enumerate(servers):
        run_id = f"{tag}d{d}x"  # 'x' ends the id: d1x is no prefix of d10x
        p = ctx.Process(
            target=_drive, args=(srv.url, srv.token, agents, duration, think, run_id, out)
        )
        p.start()
        procs.append(p)
    results = dict(out.get(timeout=duration + 300) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    return results


def stored_by_machine(url: str, tag: str) -> dict[str, set[str]]:
    """tool_use_id → machine of the rows this run stored (its markers start with `tag`)."""
    store = Store.open(url, migrate=False)
    try:
        with store.connect() as conn:
            q = select(hook_events.c.machine_id, hook_events.c.tool_use_id).where(
                hook_events.c.tool_use_id.like(f"{tag}%")
            )
            seen: dict[str, set[str]] = {}
            for mid, use_id in conn.execute(q):
                seen.setdefault(str(mid), set()).add(str(use_id))
            return seen
    finally:
        store.close()


def pct(xs: list[float], p: float) -> float:
    return LoadResult(agents=0, duration_s=0, latencies_ms=xs).pct(p)


def summarise_latency(results: dict[str, LoadResult]) -> dict[str, Any]:
    lat = [x for r in results.values() for x in r.latencies_ms]
    duration = max(r.duration_s for r in results.values())
    return {
        "requests": len(lat),
        "throughput_rps": round(len(lat) / duration, 1),
        "non_200": sum(n for r in results.values() for c, n in r.statuses.items() if c != 200),
        "p50_ms": round(pct(lat, 50), 2),
        "p90_ms": round(pct(lat, 90), 2),
        "p99_ms": round(pct(lat, 99), 2),
    }


def summarise(
    url: str, servers: list[ServeProcess], results: dict[str, LoadResult], tag: str
) -> dict[str, Any]:
    lat = [x for r in results.values() for x in r.latencies_ms]
    statuses: dict[int, int] = {}
    errors: dict[str, int] = {}
    for r in results.values():
        for k, v in r.statuses.items():
            statuses[k] = statuses.get(k, 0) + v
        for k2, v in r.errors.items():
            errors[k2] = errors.get(k2, 0) + v
    stored = stored_by_machine(url, tag)
    answered = missing = wrong_machine = 0
    for d, srv in enumerate(servers):
        res = results[f"{tag}d{d}x"]
        mine = stored.get(srv.machine_id, set())
        others = set().union(*(v for k, v in stored.items() if k != srv.machine_id))
        answered += len(res.ok_markers)
        missing += sum(1 for m in res.ok_markers if m not in mine and m not in others)
        wrong_machine += sum(1 for m in res.ok_markers if m not in mine and m in others)
    ingest: dict[str, int] = {}
    for srv in servers:
        for k, v in srv.health().get("ingest", {}).items():
            if isinstance(v, int) and k in INGEST_COUNTERS:
                ingest[k] = ingest.get(k, 0) + v
    duration = max(r.duration_s for r in results.values())
    return {
        "daemons": len(servers),
        "agents": sum(r.agents for r in results.values()),
        "requests": len(lat) + sum(errors.values()),
        "throughput_rps": round(len(lat) / duration, 1),
        "statuses": dict(sorted(statuses.items())),
        "client_errors": errors,
        "p50_ms": round(pct(lat, 50), 2),
        "p90_ms": round(pct(lat, 90), 2),
        "p99_ms": round(pct(lat, 99), 2),
        "max_ms": round(max(lat), 2) if lat else None,
        "answered_200": answered,
        "answered_200_missing_from_store": missing,
        "stored_under_another_machine": wrong_machine,
        "ingest": ingest,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--daemons", type=int, default=8)
    ap.add_argument("--agents", type=int, default=8, help="agents per daemon")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds per phase")
    ap.add_argument("--think-ms", type=float, default=250.0, help="pause between hooks")
    ap.add_argument(
        "--admin-url",
        default=os.environ.get(
            "TMA1_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:55432/postgres"
        ),
        help="a cluster where a throw-away database can be made",
    )
    ap.add_argument("--private", action="store_true", help="start a cluster of our own")
    ap.add_argument(
        "--no-control",
        dest="control",
        action="store_false",
        help="skip phase 3: the same daemons and agents, each daemon on its own SQLite",
    )
    args = ap.parse_args()

    private = PrivatePostgres() if args.private else None
    admin_url = args.admin_url
    if private is not None:
        private.start()
        admin_url = private.url()
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    name = f"tma1_bench_team_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = admin_url.rsplit("/", 1)[0] + "/" + name
    servers: list[ServeProcess] = []
    report: dict[str, Any] = {"think_ms": args.think_ms, "duration_s": args.duration}
    try:
        with tempfile.TemporaryDirectory(prefix="tma1-bench-team-") as tmp:
            Store.open(url).close()  # migrate once, before the daemons race for it

            def start(mid: str) -> ServeProcess:
                srv = ServeProcess.start(
                    Path(tmp) / mid, database_url=url, env={"TMA1_MACHINE_ID": mid}
                )
                srv.machine_id = mid  # type: ignore[attr-defined]
                servers.append(srv)
                return srv

            solo = start("solo")
            time.sleep(2)  # the first purge pass and start-up work out of the way
            tag = uuid.uuid4().hex[:6]
            res1 = phase([solo], agents=args.agents, duration=args.duration,
                         think=args.think_ms, tag=f"{tag}a")  # fmt: skip
            report["one_daemon"] = summarise(url, [solo], res1, f"{tag}a")
            print(json.dumps({"one_daemon": report["one_daemon"]}, indent=2), flush=True)
            solo.stop()
            servers.remove(solo)
            team = [start(f"m{d}") for d in range(args.daemons)]
            time.sleep(2)
            res2 = phase(team, agents=args.agents, duration=args.duration,
                         think=args.think_ms, tag=f"{tag}b")  # fmt: skip
            report["team"] = summarise(url, team, res2, f"{tag}b")
            print(json.dumps({"team": report["team"]}, indent=2), flush=True)
            for srv in team:
                srv.stop()
                servers.remove(srv)
            if args.control:
                # The same daemons and agents, each daemon on a SQLite file of its own:
                # what the shared CPU alone does to the latency, without a shared database.
                alone = []
                for d in range(args.daemons):
                    srv = ServeProcess.start(Path(tmp) / f"sqlite-m{d}")
                    srv.machine_id = None  # type: ignore[attr-defined]
                    servers.append(srv)
                    alone.append(srv)
                time.sleep(2)
                res3 = phase(alone, agents=args.agents, duration=args.duration,
                             think=args.think_ms, tag=f"{tag}c")  # fmt: skip
                report["control_sqlite"] = {k: v for k, v in summarise_latency(res3).items()}
                print(json.dumps({"control_sqlite": report["control_sqlite"]}, indent=2))
        one, many = report["one_daemon"], report["team"]
        keys = ("p50_ms", "p90_ms", "p99_ms", "throughput_rps")
        report["ratios_team_over_one"] = {
            k: round(many[k] / one[k], 2) if one[k] else None for k in keys
        }
        if "control_sqlite" in report:
            ctl = report["control_sqlite"]
            report["ratios_team_over_control"] = {
                k: round(many[k] / ctl[k], 2) if ctl[k] else None for k in keys
            }
        with admin.connect() as conn:
            report["connections_at_end"] = conn.execute(
                select(func.count()).select_from(text("pg_stat_activity"))
            ).scalar()
        report["load_average"] = Path("/proc/loadavg").read_text().split()[:3]
        report["cpu_count"] = os.cpu_count()
        print(json.dumps(report, indent=2))
    finally:
        for srv in servers:
            srv.stop()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
        if private is not None:
            private.destroy()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
