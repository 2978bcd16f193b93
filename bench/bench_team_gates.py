"""The team's gates over 10 million events on one PostgreSQL (issue 30).

Bulk-loads a team database server-side (INSERT … SELECT over generate_series, in
chunks, each its own transaction): `--events` hook events (default 10,000,000) in
sessions of `--per-session` events across `--machines` machines (default 8), spread over
`--spread-days` (default 60, the default TMA1_DATA_TTL: what a team database holds at
steady state), ending now; an emit every `--emit-every` events (default 50, as
bench_gates.py), a human label on a fifth of the emits and an agent label on a tenth,
a usage row a prompt, a compaction every tenth session, one repository row a session.
Then VACUUM ANALYZE (what autovacuum does on its own a little later) and it times:

- `tma1 gates --scope team --json` as a subprocess (fresh process: no verdict cache),
  `--repeat` times, for `--days` 7 (the default) and `--spread-days` (the whole
  database);
- the gates API with `scope=team` on a real `tma1 serve` (first request: a cold verdict
  cache; then the median of the repeats), with `/api/ping` as the same-run baseline;
- each gate in-process (follow-rate without its cache), with EXPLAIN ANALYZE of the
  follow-rate's main read when `--explain` is given.

    .venv/bin/python bench/bench_team_gates.py                  # load + measure, drop
    .venv/bin/python bench/bench_team_gates.py --keep           # keep the database
    .venv/bin/python bench/bench_team_gates.py --database-url postgresql+psycopg://…/db
        # measure an already loaded (kept) database again, e.g. after a migration

The loader is bench code, not the product: it writes the tables directly.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, event, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from loadkit import ServeProcess

from tma1.engine.anomaly import Kind
from tma1.gates import live
from tma1.store import Store

DAY_MS = 86_400_000
KINDS = [k.value for k in Kind]
REPO = Path(__file__).resolve().parents[1]

# One chunk of events: i in [lo, hi) is event k = i % P of session s = i / P; session s is
# machine s % M's, starts at :t0 + s * :gap, and has an event every 2 s. A prompt every 40
# events; between them Pre/Post pairs of Read, Read, Edit, Bash, Grep; one Bash in ten fails.
EVENTS_SQL = """
INSERT INTO tma1_hook_events (ts, session_id, event_type, hook_event_name, agent_source,
    tool_name, tool_use_id, tool_file_path, tool_files, tool_command, tool_command_prefix,
    tool_success, failure_kind, test_ids, cwd, project, machine_id)
SELECT ts, sid, et, et, 'claude-code', tool, use_id,
       CASE WHEN tool IN ('Read', 'Edit', 'Grep') THEN f END,
       CASE WHEN tool IN ('Read', 'Edit', 'Grep') THEN '["' || f || '"]' ELSE '[]' END,
       CASE WHEN tool = 'Bash' THEN 'pytest -q tests/test_api.py' END,
       CASE WHEN tool = 'Bash' THEN 'pytest' END,
       CASE WHEN et = 'PostToolUseFailure' THEN false WHEN et = 'PostToolUse' THEN true END,
       CASE WHEN et = 'PostToolUseFailure' THEN 'exit' END,
       CASE WHEN et = 'PostToolUseFailure' THEN '["tests/test_api.py::test_create"]' END,
       proj, proj, mid
FROM (
  SELECT s, k,
         :t0 + s * :gap + k * 2000 AS ts,
         'team-' || s AS sid,
         'm' || (s % :machines) AS mid,
         '/workspaces/app' || ((s / :machines) % 5) AS proj,
         '/workspaces/app' || ((s / :machines) % 5) || '/src/mod' || ((k * 7) % 12) || '.py'
           AS f,
         CASE WHEN k % 40 = 0 THEN NULL
              ELSE (ARRAY['Read', 'Read', 'Edit', 'Bash', 'Grep'])[1 + (k / 2) % 5] END AS tool,
         CASE WHEN k % 40 = 0 THEN NULL ELSE 'team-' || s || '-' || (k / 2) END AS use_id,
         CASE WHEN k % 40 = 0 THEN 'UserPromptSubmit'
              WHEN k % 2 = 1 THEN 'PreToolUse'
              WHEN (k / 2) % 5 = 3 AND (k / 10) % 10 = 3 THEN 'PostToolUseFailure'
              ELSE 'PostToolUse' END AS et
  FROM (SELECT i / :per AS s, i % :per AS k
        FROM generate_series(CAST(:lo AS bigint), :hi - 1) AS i) g
) e
"""

# An emit every :every events, right after a PreToolUse (k odd), 1 ms after it.
EMITS_SQL = """
INSERT INTO tma1_anomaly_emits (ts, session_id, kind, severity, channel, evidence,
    suggestion, related_files, first_emitted_at, stable_key, machine_id)
SELECT ts, 'team-' || s, kind, 'medium', 'user_prompt_submit', kind || ' evidence',
       'look again', '["/workspaces/app' || ((s / :machines) % 5) || '/src/mod'
         || ((k * 7) % 12) || '.py"]', ts, kind || '|' || s || '|' || k, 'm' || (s % :machines)
FROM (
  SELECT s, k, :t0 + s * :gap + k * 2000 + 1 AS ts,
         (CAST(:kinds AS text[]))[1 + (s + k) % :nkinds] AS kind
  FROM generate_series(CAST(0 AS bigint), :sessions - 1) AS s,
       generate_series(1, :per - 1, :every) AS k
) x
"""

LABELS_SQL = """
INSERT INTO tma1_anomaly_labels (emit_id, label, source, ts)
SELECT id, CASE WHEN id % 3 = 0 THEN 'fp' ELSE 'tp' END, 'human', ts FROM tma1_anomaly_emits
 WHERE id % 5 = 0
UNION ALL
SELECT id, CASE WHEN id % 4 = 0 THEN 'fp' ELSE 'tp' END, 'agent', ts FROM tma1_anomaly_emits
 WHERE id % 10 = 0
"""

MESSAGES_SQL = """
INSERT INTO tma1_messages (ts, session_id, kind, model, input_tokens, output_tokens,
    occupancy, machine_id)
SELECT :t0 + s * :gap + k * 2000 + 500, 'team-' || s,
       CASE WHEN k = 400 AND s % 10 = 0 THEN 'compaction' ELSE 'usage' END,
       'claude-sonnet-4', 1000 + k * 50, 200, 1000 + k * 50, 'm' || (s % :machines)
FROM generate_series(CAST(0 AS bigint), :sessions - 1) AS s,
     generate_series(0, :per - 1, 40) AS k
"""

REPOS_SQL = """
INSERT INTO tma1_session_repos (session_id, machine_id, host, repo, repo_path, ts)
SELECT 'team-' || s, 'm' || (s % :machines), 'host-' || (s % :machines),
       'github.com/team/app' || ((s / :machines) % 5), '', :t0 + s * :gap
FROM generate_series(CAST(0 AS bigint), :sessions - 1) AS s
"""


def load(url: str, *, events: int, per: int, machines: int, spread_days: int, every: int,
         chunk: int) -> dict[str, Any]:  # fmt: skip
    sessions = events // per
    now = int(time.time() * 1000)
    span = spread_days * DAY_MS - per * 2000  # the last session ends now
    params = {
        "t0": now - spread_days * DAY_MS,
        "gap": span // max(sessions - 1, 1),
        "per": per,
        "machines": machines,
        "sessions": sessions,
        "every": every,
        "kinds": "{" + ",".join(KINDS) + "}",
        "nkinds": len(KINDS),
    }
    engine = create_engine(url)
    took: dict[str, float] = {}
    t = time.perf_counter()
    for lo in range(0, sessions * per, chunk):
        with engine.begin() as conn:
            conn.execute(text(EVENTS_SQL), {**params, "lo": lo, "hi": min(lo + chunk, events)})
        print(f"  events {min(lo + chunk, events):>12,} {time.perf_counter() - t:8.1f}s",
              flush=True)  # fmt: skip
    took["events_s"] = time.perf_counter() - t
    for name, sql in (
        ("emits", EMITS_SQL),
        ("labels", LABELS_SQL),
        ("messages", MESSAGES_SQL),
        ("repos", REPOS_SQL),
    ):
        t = time.perf_counter()
        with engine.begin() as conn:
            conn.execute(text(sql), params)
        took[f"{name}_s"] = time.perf_counter() - t
    t = time.perf_counter()
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ANALYZE")
    took["vacuum_analyze_s"] = time.perf_counter() - t
    engine.dispose()
    return {"sessions": sessions, **{k: round(v, 1) for k, v in took.items()}}


def counts(url: str) -> dict[str, int]:
    store = Store.open(url, migrate=False)
    try:
        return store.counts()
    finally:
        store.close()


def time_cli(url: str, days: int, repeat: int, data_dir: Path) -> list[float]:
    env = {
        **os.environ,
        "TMA1_DATABASE_URL": url,
        "TMA1_DATA_DIR": str(data_dir),
        "TMA1_MACHINE_ID": "m0",
    }
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        r = subprocess.run(
            [sys.executable, "-m", "tma1.cli", "gates", "--scope", "team", "--json",
             "--days", str(days)],
            env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        out.append(time.perf_counter() - t)
        if r.returncode != 0:
            raise RuntimeError(f"tma1 gates failed: {r.stderr.strip()}")
    return out


def time_api(url: str, days: int, repeat: int, data_dir: Path) -> dict[str, tuple[float, float]]:
    """(first, median of the repeats) in ms for each gate endpoint with scope=team."""
    srv = ServeProcess.start(data_dir, database_url=url, env={"TMA1_MACHINE_ID": "m0"})
    try:
        time.sleep(2)  # the start-up work (first purge pass) out of the way
        headers = {"X-TMA1-Token": srv.token}
        out: dict[str, tuple[float, float]] = {}
        with httpx.Client(base_url=srv.url, headers=headers, timeout=600) as c:
            for path in (
                "/api/ping",
                f"/api/anomalies/budget?days={days}&scope=team",
                f"/api/anomalies/follow-rate?days={days}&scope=team",
                f"/api/anomalies/precision?days={days}&scope=team",
                "/api/repos?scope=team",
                "/api/sessions?scope=team",
            ):
                runs = []
                for _ in range(repeat + 1):
                    t = time.perf_counter()
                    c.get(path).raise_for_status()
                    runs.append((time.perf_counter() - t) * 1000)
                out[path] = (runs[0], statistics.median(runs[1:]))
        return out
    finally:
        srv.stop()


def time_in_process(url: str, days: int, repeat: int) -> dict[str, float]:
    base = Store.open(url, migrate=False, machine_id="m0")
    store = base.team()
    now = int(time.time() * 1000)
    fns = {
        "budget": lambda: live.budget(store, now_ms=now, days=days),
        "follow-rate (uncached)": lambda: live.follow_rate(
            store, now_ms=now, days=days, use_cache=False
        ),
        "precision": lambda: live.precision(store, now_ms=now, days=days),
    }
    out = {}
    for name, fn in fns.items():
        runs = []
        for _ in range(repeat):
            t = time.perf_counter()
            fn()
            runs.append((time.perf_counter() - t) * 1000)
        out[name] = statistics.median(runs)
    base.close()
    return out


def jit_ab(url: str, days: int, repeat: int) -> dict[str, list[float]]:
    """The follow-rate (uncached) in-process with PostgreSQL's JIT on (as before this
    checkout turned it off) and off, alternating run by run: seconds."""
    out: dict[str, list[float]] = {"jit_on": [], "jit_off": []}
    now = int(time.time() * 1000)
    stores = {}
    bases = []
    for mode in out:
        base = Store.open(url, migrate=False, machine_id="m0")
        bases.append(base)
        if mode == "jit_on":

            @event.listens_for(base._engine, "connect")
            def _jit_on(dbapi_conn: Any, _record: Any) -> None:
                with dbapi_conn.cursor() as cur:
                    cur.execute("SET jit = on")
                dbapi_conn.commit()

        stores[mode] = base.team()
    for _ in range(repeat):
        for mode, st in stores.items():
            t = time.perf_counter()
            live.follow_rate(st, now_ms=now, days=days, use_cache=False)
            out[mode].append(round(time.perf_counter() - t, 2))
    for st in bases:
        st.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--admin-url", default=os.environ.get(
        "TMA1_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:55432/postgres"),
        help="a cluster where a throw-away database can be made")  # fmt: skip
    ap.add_argument("--database-url", help="an already loaded database: measure only")
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--per-session", type=int, default=1_000)
    ap.add_argument("--machines", type=int, default=8)
    ap.add_argument("--spread-days", type=int, default=60)
    ap.add_argument("--emit-every", type=int, default=50)
    ap.add_argument("--chunk", type=int, default=1_000_000, help="events per transaction")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the database made here")
    ap.add_argument("--load-only", action="store_true", help="load (with --keep), time nothing")
    ap.add_argument(
        "--gate-days",
        help="the gates' --days to time, comma-separated (default: 7 and --spread-days)",
    )
    args = ap.parse_args()

    admin = create_engine(args.admin_url, isolation_level="AUTOCOMMIT")
    made = None
    url = args.database_url
    info: dict[str, Any] = {}
    if url is None:
        made = f"tma1_bench_team_{uuid.uuid4().hex[:8]}"
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{made}"'))
        url = args.admin_url.rsplit("/", 1)[0] + "/" + made
    try:
        Store.open(url).close()  # the schema by the migrations (a kept one: to this head)
        if made:
            print(f"loading {args.events:,} events into {made} …", flush=True)
            info = load(
                url,
                events=args.events,
                per=args.per_session,
                machines=args.machines,
                spread_days=args.spread_days,
                every=args.emit_every,
                chunk=args.chunk,
            )
        report: dict[str, Any] = {"database": url.rsplit("/", 1)[1], "load": info}
        report["rows"] = counts(url)
        if args.load_only:
            print(json.dumps(report, indent=2))
            return 0
        with tempfile.TemporaryDirectory(prefix="tma1-bench-team-gates-") as tmp:
            wanted = args.gate_days or f"7,{args.spread_days}"
            for days in sorted({int(d) for d in wanted.split(",")}):
                cli = time_cli(url, days, args.repeat, Path(tmp) / f"cli{days}")
                report[f"days={days}"] = {
                    "follow_rate_jit_ab_s": jit_ab(url, days, args.repeat),
                    "cli_s": [round(x, 2) for x in cli],
                    "cli_median_s": round(statistics.median(cli), 2),
                    "in_process_ms": {
                        k: round(v, 1) for k, v in time_in_process(url, days, args.repeat).items()
                    },
                    "api_first_and_median_ms": {
                        k: [round(a, 1), round(b, 1)]
                        for k, (a, b) in time_api(
                            url, days, args.repeat, Path(tmp) / f"api{days}"
                        ).items()
                    },
                }
                print(json.dumps({f"days={days}": report[f"days={days}"]}, indent=2), flush=True)
        load_avg = Path("/proc/loadavg").read_text().split()[:3]
        report["load_average"] = load_avg
        print(json.dumps(report, indent=2))
    finally:
        if made and not args.keep:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{made}" WITH (FORCE)'))
        elif made:
            print(f"kept: {url}")
        admin.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
