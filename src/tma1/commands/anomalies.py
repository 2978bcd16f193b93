"""`tma1 anomalies`, `tma1 gates`, `tma1 label`: the emit log and the validation gates.

These commands read and write the database directly (the same Settings the daemon uses:
TMA1_DATABASE_URL, or the SQLite file in TMA1_DATA_DIR), so they work whether or not
`tma1 serve` is running; SQLite's WAL lets them run next to the daemon. The figures come
from `tma1.gates`, the very code behind /api/anomalies/*.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime

from tma1.clock import SystemClock
from tma1.commands._args import (
    add_database_options,
    add_scope_option,
    database_url,
    machine_of,
    open_store,
    whole_number,
)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from tma1 import gates

    p = sub.add_parser(
        "anomalies",
        help="list the newest emitted anomalies (the emit log)",
        description="List the newest emits from the emit log, newest first.",
    )
    p.add_argument("--session", help="only this session id")
    p.add_argument("--kind", choices=gates.KINDS, help="only this kind")
    p.add_argument("--severity", choices=gates.SEVERITIES, help="only this severity")
    p.add_argument(
        "--channel",
        type=_channel,
        metavar="CHANNEL",
        help="only emits delivered on this channel: "
        + ", ".join(f"{name} ({api})" for api, name in CHANNEL_NAMES.items())
        + ", by the dashboard's name or the API's",
    )
    p.add_argument("--limit", type=whole_number(1, 10_000), default=50, help="rows (default 50)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_scope_option(p)
    add_database_options(p)
    p.set_defaults(func=run_anomalies)

    g = sub.add_parser(
        "gates",
        help="print the three validation gates (budget, follow-rate, precision)",
        description="Print kind × gate with value, target and pass/fail.",
    )
    g.add_argument(
        "--days",
        type=whole_number(1, 365),
        default=gates.DEFAULT_DAYS,
        help=f"the last N UTC days (default {gates.DEFAULT_DAYS})",
    )
    g.add_argument(
        "--budget",
        type=whole_number(0, 100_000),
        default=gates.DEFAULT_BUDGET,
        help=f"emits per kind per day the budget gate allows (default {gates.DEFAULT_BUDGET})",
    )
    g.add_argument(
        "--window",
        type=whole_number(1, 100),
        default=gates.DEFAULT_WINDOW,
        help="tool calls after an emit in which a follow action counts "
        f"(default {gates.DEFAULT_WINDOW})",
    )
    g.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when any gate fails (not enough data is not a failure)",
    )
    g.add_argument("--json", action="store_true", help="print the full JSON of the gates")
    add_scope_option(g)
    add_database_options(g)
    g.set_defaults(func=run_gates)

    lab = sub.add_parser(
        "label",
        help="label an emit as a true (tp) or false (fp) positive",
        description="Label an emit TP or FP, or clear its label (feeds the precision gate).",
    )
    lab.add_argument("id", type=whole_number(1, 2**63 - 1), help="emit id (see `tma1 anomalies`)")
    lab.add_argument(
        "label",
        choices=("tp", "fp", "clear"),
        help="tp: a true positive, fp: a false one, clear: remove this source's label",
    )
    lab.add_argument("--note", help="why")
    lab.add_argument(
        "--source",
        choices=gates.LABEL_SOURCES,
        default="human",
        help="whose verdict: human (default; the precision gate) or agent (reported beside it)",
    )
    add_database_options(lab)
    lab.set_defaults(func=run_label)


# The channels by the names the dashboard shows (its Channel filter, the preview's "via").
CHANNEL_NAMES = {
    "user_prompt_submit": "prompt-digest",
    "stop_block": "stop-block",
    "post_tool_use": "tool-result",
    "session_start": "session-bundle",
}


def _channel(raw: str) -> str:
    by_name = {name: api for api, name in CHANNEL_NAMES.items()}
    key = raw.strip().lower().replace(" ", "-")
    if key in CHANNEL_NAMES:
        return key
    if key in by_name:
        return by_name[key]
    named = ", ".join(f"{name} ({api})" for api, name in CHANNEL_NAMES.items())
    raise argparse.ArgumentTypeError(f"{raw!r} is not a channel; use one of {named}")


def text_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [len(h) for h in headers]
    for r in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, r, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def one_line(text: str, limit: int) -> str:
    """`text` on one line, cut to `limit` at a word boundary (mid-word only for one word
    longer than half the limit, such as an id)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space].rstrip(" ,;:")
    return cut + "…"


def run_anomalies(args: argparse.Namespace) -> int:
    from tma1.store.emits import list_emits

    store = open_store(database_url(args), machine_id=machine_of(args))
    try:
        emits = list_emits(
            store.team() if args.scope == "team" else store,
            limit=args.limit,
            session_id=args.session,
            kind=args.kind,
            severity=args.severity,
            channel=args.channel,
        )
        total = 0 if emits else store.counts()["tma1_anomaly_emits"]
    finally:
        store.close()
    if args.json:
        json.dump({"emits": emits}, sys.stdout, ensure_ascii=False, indent=2)
        print()
        return 0
    if not emits:
        print(_none_found(args, total))
        return 0
    rows = [
        [
            str(e["id"]),
            f"{datetime.fromtimestamp(e['ts'] / 1000, tz=UTC):%Y-%m-%d %H:%M:%S}",
            e["kind"],
            e["severity"],
            one_line(e["session_id"], 14),
            e["label"] or "-",
            one_line(e["evidence"], 70),
        ]
        for e in emits
    ]
    print(text_table(["ID", "TIME (UTC)", "KIND", "SEV", "SESSION", "LABEL", "EVIDENCE"], rows))
    return 0


def _none_found(args: argparse.Namespace, total: int) -> str:
    """Why the list is empty: nothing emitted at all, or nothing these filters match."""
    if not total:
        return "no anomalies emitted yet (wire an agent: tma1 install --adapter claude-code)"
    filters = [
        f"--{name} {value}"
        for name, value in (
            ("kind", args.kind),
            ("severity", args.severity),
            ("channel", args.channel),
        )
        if value
    ]
    if args.session and not filters:
        return f"no anomalies for session {args.session}; {total} in other sessions"
    if args.session:
        filters.insert(0, f"--session {args.session}")
    return f"no anomalies match {' '.join(filters)}; {total} in the emit log"


def run_gates(args: argparse.Namespace) -> int:
    from tma1 import gates
    from tma1.gates import live

    store = open_store(database_url(args), machine_id=machine_of(args))
    try:
        result = live.all_gates(
            store.team() if args.scope == "team" else store,
            now_ms=SystemClock().now_ms(),
            days=args.days,
            budget_per_day=args.budget,
            window=args.window,
        )
    finally:
        store.close()
    rows = gates.gate_table(result)
    failed = any(r["pass"] is False for r in rows)
    if args.json:
        json.dump(result, sys.stdout, ensure_ascii=False, indent=2)
        print()
    else:
        print(
            text_table(
                ["KIND", "GATE", "VALUE", "TARGET", "RESULT"],
                [
                    [r["kind"], r["gate"], r["value"], r["target"], gates.status_text(r)]
                    for r in rows
                ],
            )
        )
        print(
            f"\nlast {args.days} day(s): "
            + ("some gates FAIL" if failed else "no gate fails")
            + " (n/a = no data yet; not enough data = fewer than "
            + f"{gates.FOLLOW_MIN_EMITS} emits or {gates.PRECISION_MIN_LABELS} labels, "
            + "no verdict)"
        )
    return 1 if failed and args.strict else 0


def run_label(args: argparse.Namespace) -> int:
    from tma1.store.emits import ForeignEmit, labels_for, set_label

    store = open_store(database_url(args), write=True, machine_id=machine_of(args))
    try:
        out = set_label(
            store,
            args.id,
            args.label,
            now_ms=SystemClock().now_ms(),
            source=args.source,
            note=args.note,
        )
        labels = labels_for(store, [args.id]).get(args.id, {}) if out is not None else {}
        others = {src: v for src, v in labels.items() if src != args.source}
    except ForeignEmit as exc:
        print(f"tma1: {exc}", file=sys.stderr)
        return 1
    finally:
        store.close()
    if out is None:
        print(f"tma1: no emit with id {args.id} (see `tma1 anomalies` for ids)", file=sys.stderr)
        return 1
    if out["label"] is None:
        line = f"emit {out['id']}: the {out['source']} label is cleared"
        if others:
            kept = ", ".join(f"{src} label {v['label']}" for src, v in sorted(others.items()))
            line += (
                f"; the {kept} remains (clear it with "
                f"`tma1 label {out['id']} clear --source {sorted(others)[0]}`)"
            )
        else:
            line += "; it has no label now"
        print(line)
        return 0
    print(f"emit {out['id']}: {out['label']} ({out['source']})")
    return 0
