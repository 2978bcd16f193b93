"""Load benchmark: N simulated agents posting hooks to a real `tma1 serve` on loopback.

    .venv/bin/python bench/bench_load.py                     # 8 agents, 60 s, SQLite
    .venv/bin/python bench/bench_load.py --database-url postgresql+psycopg://…/db
    .venv/bin/python bench/bench_load.py --agents 8 --duration 10 --think-ms 50

Each agent is one session running a scripted turn (prompt, Read, Edit, Bash that fails
now and then, Stop) in a closed loop (--think-ms 0: the next hook as soon as the last
answer arrives, the worst case). Every payload carries a unique `tool_use_id`, so the run
can check afterwards that every hook answered 200 is in the store. The server's RSS is
sampled from /proc/PID/status once a second. Prints the figures docs/reliability.md quotes.

The serve process and the agents are tests/loadkit.py's (the reliability tests use them).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from loadkit import ServeProcess, run_agents, stored_markers


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--agents", type=int, default=8)
    ap.add_argument("--duration", type=float, default=60.0, help="seconds")
    ap.add_argument("--think-ms", type=float, default=0.0, help="pause between hooks")
    ap.add_argument("--database-url", help="default: SQLite in a temporary data dir")
    ap.add_argument("--keepalive", action="store_true", help="reuse connections (curl does not)")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="tma1-bench-") as tmp:
        data_dir = Path(tmp) / "data"
        srv = ServeProcess.start(data_dir, database_url=args.database_url)
        db_url = args.database_url or f"sqlite:///{data_dir / 'tma1.db'}"
        try:
            budget = srv.health().get("ingest", {}).get("budget_ms")
            run_id = uuid.uuid4().hex[:8]
            res = run_agents(
                srv.url,
                srv.token,
                agents=args.agents,
                duration_s=args.duration,
                think_ms=args.think_ms,
                rss_of=srv,
                run_id=run_id,
                keepalive=args.keepalive,
            )
            res.budget_ms = float(budget) if budget else None
            health = srv.health()
        finally:
            srv.stop()
        stored = stored_markers(db_url, run_id)
        missing = [m for m in res.ok_markers if m not in stored]
        out = {
            "database": db_url.split(":", 1)[0],
            **res.summary(),
            "answered_200_and_stored": len(res.ok_markers) - len(missing),
            "answered_200_missing_from_store": len(missing),
            "ingest": {
                k: health.get("ingest", {}).get(k)
                for k in ("queued", "budget_exceeded", "dropped_queue_full", "rejected_by_db")
            },
            "engine": health.get("engine"),
            "rss_samples_mb": [round(kb / 1024, 1) for _, kb in res.rss_kb],
            "cpu_count": os.cpu_count(),
        }
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
