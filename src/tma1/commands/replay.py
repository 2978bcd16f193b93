"""`tma1 replay` and `tma1 export`: backtest the rules on recorded sessions.

`replay PATH…` runs the real engine with a virtual clock over recorded sessions (tma1
event logs, hook logs and every agent's formats, `AgentSpec.replay` — told apart by
content; directories are read recursively) and prints every delivery the agent would
have received, then emits per kind, the daily budget and the follow-rate.

`export --session ID` writes a stored session as the event log `replay` reads.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from contextlib import closing
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tma1.commands._args import (
    add_database_options,
    check_new_file,
    database_url,
    open_store,
    whole_number,
)
from tma1.commands.anomalies import one_line, text_table


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from tma1.replay.formats import described  # the agents' formats (tma1.adapters.agents)

    p = sub.add_parser(
        "replay",
        help="run the rules over recorded sessions (backtest)",
        description=(
            "Run the real engine with a virtual clock over recorded sessions and print "
            "every delivery and a summary (emits per kind, budget per day, follow-rate). "
            f"Inputs are detected by content: {described(where=True)}. "
            "Directories are read recursively."
        ),
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or directories")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument(
        "--threshold",
        type=whole_number(1, 100_000_000),
        help="context_pressure threshold in prompt tokens (default: half the model's "
        "context window when the recording tells it, else 100000)",
    )
    p.add_argument(
        "--db",
        type=Path,
        help="keep the replay's SQLite database in FILE (a new file, or --force; "
        "default: temporary)",
    )
    p.add_argument("--force", action="store_true", help="overwrite an existing --db file")
    p.add_argument("--bodies", action="store_true", help="print every delivery body in full")
    p.set_defaults(func=run_replay)

    e = sub.add_parser(
        "export",
        help="write a stored session as an event log (for tma1 replay)",
        description="Write one stored session (events, its project's file changes, usage) "
        "as tma1's JSONL event log.",
    )
    e.add_argument("--session", required=True, help="session id")
    e.add_argument("--out", type=Path, help="output file, a new one (default: standard output)")
    e.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    add_database_options(e)
    e.set_defaults(func=run_export)


# --- replay --------------------------------------------------------------------------------


def run_replay(args: argparse.Namespace) -> int:
    import logging

    from tma1.replay.driver import replay_paths

    check_new_file("--db", args.db, force=args.force)
    if args.db is not None and args.db.exists():  # --force: replay starts from empty
        for suffix in ("", "-wal", "-shm", "-journal"):
            args.db.with_name(args.db.name + suffix).unlink(missing_ok=True)
    # The engine logs each rejected or odd payload; the report says it once, at the end.
    logging.getLogger("tma1").setLevel(logging.ERROR)
    result = replay_paths(args.paths, threshold=args.threshold, db=args.db)
    if result.items_fed == 0:
        # Nothing was replayed: the reasons alone, not an empty report.
        for problem in result.all_problems:
            print(f"tma1 replay: {problem}", file=sys.stderr)
        present = [p for p in args.paths if Path(p).exists()]
        if present:
            print(
                f"tma1 replay: nothing to replay in {', '.join(present)}: no tma1 event log, "
                "Claude Code transcript or hook log, or Codex rollout with events in it",
                file=sys.stderr,
            )
        return 1
    if args.json:
        json.dump(result_json(result), sys.stdout, ensure_ascii=False, indent=2)
        print()
    else:
        sys.stdout.write(render_text(result, full_bodies=args.bodies))
    for problem in result.all_problems:
        print(f"tma1 replay: {problem}", file=sys.stderr)
    return 0


def result_json(result: Any) -> dict[str, Any]:
    return {
        "inputs": [
            {
                "path": c.path,
                "format": c.format,
                "records": c.records,
                "items": len(c.items),
                "synthetic_time": c.synthetic_time,
                "problems": [str(p) for p in c.problems],
            }
            for c in result.inputs
        ],
        "problems": [str(p) for p in result.all_problems],
        "notes": [asdict(n) for n in result.notes],
        "events": result.events_fed,
        "items": result.items_fed,
        "duplicates_dropped": result.duplicates_dropped,
        "elapsed_s": round(result.elapsed_s, 3),
        "deliveries": [d.to_json() for d in result.deliveries],
        "summary": result.summary,
        "counters": result.counters,
    }


# What each note from a recording means, in plain words.
NOTE_WORDS = {
    "validation_rejected": "tool calls the agent's tool layer refused before running them "
    "(bad arguments, <tool_use_error>); not failures, so not replayed",
    "modified_since_read": "edits refused because the file changed after the agent read it; "
    "not failures, so not replayed",
    "refused": "tool calls a hook or the user refused; replayed as calls, not as failures",
    "retimed_copy": "entries a resumed session copied with one shared timestamp; re-timed "
    "from their neighbours",
}


def _rate(v: Any) -> str:
    return "-" if v is None else f"{v:.0%}"


def _verdict(figure: Any) -> str:
    """pass / FAIL / not enough data (n = …) / no data, as `tma1 gates` says it."""
    from tma1.gates import status_text

    text = status_text(figure)
    return "no data" if text == "n/a" else text


def render_text(result: Any, *, full_bodies: bool = False) -> str:
    from tma1.replay.driver import iso

    rate = result.events_fed / result.elapsed_s if result.elapsed_s > 0 else 0.0
    lines = [
        f"tma1 replay: {len(result.inputs)} input(s), {result.events_fed} hook events, "
        f"{result.items_fed} items in {result.elapsed_s:.1f} s ({rate:,.0f} events/s)",
        "",
        text_table(
            ["input", "format", "records", "items"],
            [[c.path, c.format, str(c.records), str(len(c.items))] for c in result.inputs],
        ),
    ]
    for c in result.inputs:
        if c.synthetic_time:
            lines.append(f"  note: {Path(c.path).name}: {c.synthetic_time}")
    if result.duplicates_dropped:
        lines.append(
            f"  note: {result.duplicates_dropped} items were in more than one input (the same "
            "session recorded twice, e.g. a transcript and its hook log); each was replayed once"
        )
    notes = Counter(n.kind for n in result.notes)
    if notes:
        lines += ["", "notes from the recordings:"]
        for k, v in sorted(notes.items()):
            lines.append(f"  {k} ×{v}: {NOTE_WORDS.get(k, 'see the lines below')}")
        for n in result.notes:
            if n.kind in ("modified_since_read", "retimed_copy"):
                when = iso(n.ts) if n.ts else ""
                lines.append(f"  {n.kind} {when} {n.session_id[:12]}: {one_line(n.detail, 160)}")
    if problems := result.all_problems:
        lines += ["", f"problems: {len(problems)} (unreadable parts were skipped; see stderr)"]

    lines += ["", f"deliveries: {len(result.deliveries)}"]
    for d in result.deliveries:
        lines += ["", f"{iso(d.ts)}  {d.session_id}  {d.hook_event} → {d.channel}"]
        lines.append(f"  from {d.origin}")
        for f in d.findings:
            lines.append(f"  • [{f['severity']}] {f['kind']}: {one_line(f['evidence'], 200)}")
        body = d.body if full_bodies else one_line(d.body, 300)
        lines += [f"  | {b}" for b in body.splitlines() or [""]]

    s = result.summary
    per_kind = [[k, str(v)] for k, v in (s.get("emits_per_kind") or {}).items()]
    lines += ["", "summary", "", "emits per kind"]
    lines.append(text_table(["kind", "emits"], per_kind or [["-", "0"]]))
    if budget := s.get("budget"):
        rows = [
            [r["day"], r["kind"], str(r["count"]), "OVER" if r["over_budget"] else "ok"]
            for r in budget["per_day"]
        ]
        lines += [
            "",
            f"budget (≤ {budget['budget']} emits per kind per UTC day)",
            text_table(["day", "kind", "emits", ""], rows or [["-", "-", "0", ""]]),
            f"budget gate: {_verdict(budget)}",
        ]
    if follow := s.get("follow_rate"):
        rows = [
            [k, str(v["emits"]), str(v["followed"]), _rate(v["rate"]), _verdict(v)]
            for k, v in follow["kinds"].items()
            if v["emits"]
        ]
        lines += [
            "",
            f"follow-rate (a follow action within {follow['window']} tool calls; "
            f"target ≥ {follow['target']:.0%})",
            text_table(
                ["kind", "emits", "followed", "rate", "gate"], rows or [["-", "0", "0", "-", ""]]
            ),
        ]
    lines.append("")
    return "\n".join(lines)


# --- export --------------------------------------------------------------------------------


def run_export(args: argparse.Namespace) -> int:
    from tma1.replay.export import SessionNotFound, export_session

    check_new_file("--out", args.out, force=args.force)
    url = database_url(args)
    with closing(open_store(url)) as store:  # an existing database, read-only, or a ConfigError
        try:
            records = export_session(store, args.session)
        except SessionNotFound:
            print(f"tma1 export: no session {args.session!r} in {url}", file=sys.stderr)
            return 1
    text = "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in records)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
        print(f"tma1 export: {len(records)} records written to {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
