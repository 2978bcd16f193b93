#!/usr/bin/env python3
"""Generate docs/evaluation.md: the six rules replayed over the real sessions in
../shared/data/sessions, with a reviewed TP/FP judgement of every emit.

    .venv/bin/python scripts/evaluate.py            # write docs/evaluation.md
    .venv/bin/python scripts/evaluate.py --context  # print each unlabelled emit in context
    .venv/bin/python scripts/evaluate.py --check    # exit 1 when the doc is out of date

Every session is replayed on its own (the engine's state is per session; a session that
continues across two files is one session) with `tma1.replay`: the live hook path, a
virtual clock, default settings. Hook payload logs have no timestamps and are replayed
separately on their synthetic timeline. The judgements live in
scripts/evaluation_labels.json, keyed `session|stable_key|ts`: a human reads the
session around the emit and writes `tp`/`fp` and a one-line reason. Emits without a
label are listed as unlabelled; labels whose emit no longer happens are listed too, so
a rule change shows up as a diff of this document.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from tma1.replay import driver  # noqa: E402
from tma1.replay.driver import iso  # noqa: E402
from tma1.replay.formats import CLAUDE_HOOKLOG  # noqa: E402
from tma1.replay.model import HOOK, USAGE, Converted, ReplayItem  # noqa: E402

SESSIONS = REPO.parent / "shared" / "data" / "sessions"
DOC = REPO / "docs" / "evaluation.md"
LABELS = Path(__file__).resolve().parent / "evaluation_labels.json"
PRECISION_TARGET = 0.70
FOLLOW_TARGET = 0.30
BUDGET = 5


@dataclass
class SessionRun:
    session_id: str
    group: str  # "transcripts" | "hook log"
    files: list[str]
    agent: str
    items: list[ReplayItem]
    synthetic: bool
    deliveries: list[Any] = field(default_factory=list)
    emits: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"hooklog:{self.session_id}" if self.group == "hook log" else self.session_id


def emit_key(session_key: str, emit: dict[str, Any]) -> str:
    return f"{session_key}|{emit['stable_key']}|{iso(int(emit['ts']))}"


def collect(root: Path) -> list[SessionRun]:
    inputs, problems = driver.load([root])
    for p in problems:
        print(f"evaluate: {p}", file=sys.stderr)
    runs: list[SessionRun] = []
    for group, convs in (
        ("transcripts", [c for c in inputs if c.format != CLAUDE_HOOKLOG]),
        ("hook log", [c for c in inputs if c.format == CLAUDE_HOOKLOG]),
    ):
        if not convs:
            continue
        items, _ = driver.merge_items(convs)
        by_session: dict[str, list[ReplayItem]] = defaultdict(list)
        for item in items:
            by_session[item.session_id].append(item)
        files_of: dict[str, set[str]] = defaultdict(set)
        synthetic: set[str] = set()
        for conv in convs:
            for item in conv.items:
                files_of[item.session_id].add(Path(conv.path).name)
                if conv.synthetic_time:
                    synthetic.add(item.session_id)
        for sid, its in by_session.items():
            agent = "codex" if any(i.source == "codex" for i in its) else "claude-code"
            runs.append(
                SessionRun(
                    session_id=sid,
                    group=group,
                    files=sorted(files_of[sid]),
                    agent=agent,
                    items=its,
                    synthetic=sid in synthetic,
                )
            )
    runs.sort(key=lambda r: (r.group != "transcripts", r.items[0].ts, r.session_id))
    return runs


def replay(run: SessionRun) -> None:
    deliveries, emits, summary, _ = driver.replay_items(run.items)
    run.deliveries, run.emits, run.summary = deliveries, emits, summary


# --- context for labelling -----------------------------------------------------------------


def _short(text: Any, n: int = 220) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= n else s[: n - 1] + "…"


def describe(item: ReplayItem) -> str:
    p = item.payload or {}
    ev = item.hook_event or item.kind
    if item.kind == USAGE and item.usage:
        return f"usage occupancy={item.usage.occupancy:,} kind={item.usage.kind}"
    ti = p.get("tool_input") if isinstance(p.get("tool_input"), dict) else {}
    what = ti.get("command") or ti.get("file_path") or ""
    out = ""
    if ev == "PostToolUseFailure":
        out = " ERR: " + _short(p.get("error", ""), 300)
    elif ev == "PostToolUse":
        resp = p.get("tool_response")
        if isinstance(resp, dict):
            resp = resp.get("stdout") or resp.get("stderr") or ""
        if p.get("tool_name") in ("Bash", "shell"):
            out = " OUT: " + _short(resp or "", 200)
    elif ev == "UserPromptSubmit":
        what = _short(p.get("prompt", ""), 160)
    return f"{ev} {p.get('tool_name') or ''} {_short(what, 200)}{out}"


def print_context(run: SessionRun, labels: dict[str, Any], before: int, after: int) -> None:
    hooks = [i for i in run.items if i.kind in (HOOK, USAGE)]
    for e in run.emits:
        k = emit_key(run.key, e)
        if k in labels:
            continue
        ts = int(e["ts"])
        idx = next((n for n, i in enumerate(hooks) if i.ts > ts), len(hooks))
        print("=" * 100)
        print(k)
        print(f"[{e['severity']}] {e['kind']} via {e['channel']}; files {e['related_files']}")
        print("EVIDENCE:", e["evidence"])
        print("SUGGESTION:", _short(e["suggestion"], 400))
        print("--- before")
        for i in hooks[max(0, idx - before) : idx]:
            print(f"  {iso(i.ts)[11:19]} {describe(i)}")
        print("--- after")
        for i in hooks[idx : idx + after]:
            print(f"  {iso(i.ts)[11:19]} {describe(i)}")


# --- the document ------------------------------------------------------------------------------


def _pct(num: int, den: int) -> str:
    return f"{num / den:.0%}" if den else "–"


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(
    runs: list[SessionRun],
    labels: dict[str, Any],
    flaws: list[dict[str, str]],
    baseline: list[str] | None = None,
) -> str:
    out: list[str] = []
    w = out.append
    all_emits = [(r, e) for r in runs for e in r.emits]
    seen_keys = {emit_key(r.key, e) for r, e in all_emits}
    baseline = baseline or []
    files = sorted({f for r in runs for f in r.files})
    w("# Evaluation on real sessions")
    w("")
    w(
        "Generated by `scripts/evaluate.py` from `../shared/data/sessions` "
        f"({len(files)} files, {len(runs)} sessions); the TP/FP judgements are in "
        "`scripts/evaluation_labels.json`. Do not edit by hand: change the labels or the "
        "rules and run `.venv/bin/python scripts/evaluate.py`."
    )
    w("")
    w("## Method")
    w("")
    w(
        "Each session is replayed on its own with `tma1 replay` machinery: the recorded "
        "session is converted into the hook payloads the agent would have sent "
        "(`src/tma1/replay/`), each payload goes through `Service.handle_payload` — the live "
        "path once a hook body is decoded — with a virtual clock set to its recorded time, "
        "and token usage goes in as "
        "the transcript tailer stores it. Default settings: context_pressure threshold "
        f"100,000 tokens, budget {BUDGET} emits per kind per UTC day, follow-rate window 5 "
        "tool calls. What a recording cannot show, the replay cannot see: there are no "
        "file-watcher events in these recordings, so `stale_file_view` and "
        "`external_modified_during_session` cannot fire (Claude Code's own "
        '"File has been modified since read" refusals are counted below instead). '
        "Transcripts older than Claude Code's `PostToolUseFailure` event are replayed "
        "as a current Claude Code would have run them. The hook payload logs have no "
        "timestamps: they are replayed on a synthetic timeline (2 s apart), so their "
        "time-window results are indicative only."
    )
    w("")
    guard = sorted(
        (sid, n) for sid, kinds in _NOTES_BY_SESSION.items()
        for n in [kinds.count("modified_since_read")] if n
    )  # fmt: skip
    if guard:
        w(
            'Claude Code\'s own stale-view guard ("File has been modified since read") '
            "refused "
            + ", ".join(f"{n} edit(s) in session `{sid[:8]}`" for sid, n in guard)
            + ": the situations `stale_file_view` is for do occur in this corpus, but "
            "without file-change events the rule cannot see them."
        )
        w("")
    w(
        "Every emit was judged by reading the session around it (what failed, what the "
        "agent did next, whether the finding was true and worth saying at that moment): "
        "**TP** — true and actionable; **FP** — wrong, or true but not worth an "
        "interruption (a duplicate of what the agent already knows and is acting on)."
    )
    w("")

    # Overall per kind.
    w("## Results per kind")
    w("")
    per_kind: dict[str, Counter[str]] = defaultdict(Counter)
    for r, e in all_emits:
        lab = labels.get(emit_key(r.key, e), {}).get("label", "unlabelled")
        per_kind[e["kind"]][lab] += 1
    follow: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    over_days: Counter[str] = Counter()
    for r in runs:
        fr = (r.summary.get("follow_rate") or {}).get("kinds", {})
        for kind, v in fr.items():
            follow[kind][0] += v["emits"]
            follow[kind][1] += v["followed"]
    day_counts: Counter[tuple[str, str]] = Counter()
    for r, e in all_emits:
        if r.group == "transcripts":
            day_counts[(e["kind"], iso(int(e["ts"]))[:10])] += 1
    for (kind, _day), n in day_counts.items():
        if n > BUDGET:
            over_days[kind] += 1
    w(
        "| kind | emits | TP | FP | unlabelled | precision | followed | follow-rate | "
        "days over budget |"
    )
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    kinds = sorted(per_kind)
    tot = Counter[str]()
    for kind in kinds:
        c = per_kind[kind]
        tot.update(c)
        n = sum(c.values())
        emitted, done = follow[kind]
        w(
            f"| {kind} | {n} | {c['tp']} | {c['fp']} | {c['unlabelled']} | "
            f"{_pct(c['tp'], c['tp'] + c['fp'])} | {done} | {_pct(done, emitted)} | "
            f"{over_days[kind]} |"
        )
    n_all = sum(tot.values())
    emitted_all = sum(v[0] for v in follow.values())
    done_all = sum(v[1] for v in follow.values())
    w(
        f"| **all** | {n_all} | {tot['tp']} | {tot['fp']} | {tot['unlabelled']} | "
        f"{_pct(tot['tp'], tot['tp'] + tot['fp'])} | {done_all} | "
        f"{_pct(done_all, emitted_all)} | {sum(over_days.values())} |"
    )
    w("")
    w(
        f"Targets (seed): precision ≥ {PRECISION_TARGET:.0%}, follow-rate ≥ "
        f"{FOLLOW_TARGET:.0%} within 5 tool calls, ≤ {BUDGET} emits per kind per day. "
        "Days over budget count the transcript sessions' real UTC days (all sessions of "
        "a day together); the hook-log sessions' synthetic days are left out."
    )
    w("")
    if flaws:
        w("## Flaws the false positives show")
        w("")
        for f in flaws:
            w(f"### {f['title']}")
            w("")
            for k in ("where", "example", "flaw", "fix", "status"):
                if f.get(k):
                    w(f"- **{k}**: {f[k]}")
            w("")

    w("## Sessions")
    w("")
    w("| session | agent | files | span (UTC) | hook events | tool calls | failures | "
      "peak context | emits |")  # fmt: skip
    w("|---|---|---|---|---:|---:|---:|---:|---:|")
    for r in runs:
        w(_session_row(r))
    w("")
    for r in runs:
        _session_section(r, labels, w)
    _before_after(labels, baseline, all_emits, seen_keys, w)
    stale = sorted(k for k in labels if k not in seen_keys)
    if stale:
        w("## Labels whose emit no longer happens")
        w("")
        w("A rule change removed these emits (or moved them in time); kept for the record.")
        w("")
        w("| key | label | reason |")
        w("|---|---|---|")
        for k in stale:
            w(f"| `{_md(k)}` | {labels[k]['label']} | {_md(labels[k].get('reason', ''))} |")
        w("")
    return "\n".join(out).rstrip() + "\n"


def _kind_of_key(key: str) -> str:
    # session|kind|severity|subject|ts — the subject may hold "|" itself.
    return key.split("|", 2)[1]


def _before_after(
    labels: dict[str, Any],
    baseline: list[str],
    all_emits: list[tuple[SessionRun, dict[str, Any]]],
    seen_keys: set[str],
    w: Any,
) -> None:
    """ "Before" = the baseline run's emits (judged); "after" = this run's. Shows what the
    rule changes since the baseline removed and what they added."""
    if not baseline or set(baseline) == seen_keys:
        return
    base = {k: labels[k] for k in baseline if k in labels}
    w("## Before and after the rule changes")
    w("")
    w(
        '"Before" is the first labelling run (the rules as they were when this evaluation '
        'began; its emits are listed under `baseline` in the labels file); "after" is this '
        "run. A removed emit keeps its judgement; an emit new since the baseline is judged "
        "like the others."
    )
    w("")
    w("| kind | before: emits | TP | FP | precision | after: emits | TP | FP | new | "
      "precision | removed TP | removed FP |")  # fmt: skip
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    kinds = sorted({_kind_of_key(k) for k in base} | {e["kind"] for _, e in all_emits})
    tot: Counter[str] = Counter()
    for kind in kinds:
        before = [v["label"] for k, v in base.items() if _kind_of_key(k) == kind]
        now = [(emit_key(r.key, e)) for r, e in all_emits if e["kind"] == kind]
        after = [labels.get(k, {}).get("label", "unlabelled") for k in now]
        removed = [
            v["label"] for k, v in base.items() if _kind_of_key(k) == kind and k not in seen_keys
        ]
        c = {
            "b": len(before), "btp": before.count("tp"), "bfp": before.count("fp"),
            "a": len(after), "atp": after.count("tp"), "afp": after.count("fp"),
            "new": sum(1 for k in now if k not in base),
            "rtp": removed.count("tp"), "rfp": removed.count("fp"),
        }  # fmt: skip
        tot.update(c)
        w(_ba_row(kind, c))
    w(_ba_row("**all**", tot))
    w("")


def _ba_row(kind: str, c: Any) -> str:
    return (
        f"| {kind} | {c['b']} | {c['btp']} | {c['bfp']} | {_pct(c['btp'], c['btp'] + c['bfp'])} "
        f"| {c['a']} | {c['atp']} | {c['afp']} | {c['new']} | "
        f"{_pct(c['atp'], c['atp'] + c['afp'])} | {c['rtp']} | {c['rfp']} |"
    )


def _counts(run: SessionRun) -> Counter[str]:
    return Counter(i.hook_event or "" for i in run.items if i.kind == HOOK)


def _session_row(r: SessionRun) -> str:
    c = _counts(r)
    peak = max((i.usage.occupancy for i in r.items if i.kind == USAGE and i.usage), default=0)
    span = f"{iso(r.items[0].ts)[:16]} → {iso(r.items[-1].ts)[11:16]}"
    if r.synthetic:
        span += " (synthetic)"
    return (
        f"| `{r.key[:22]}` | {r.agent} | {', '.join(r.files)} | {span} | {sum(c.values())} | "
        f"{c['PreToolUse']} | {c['PostToolUseFailure'] + _masked(r)} | "
        f"{f'{peak:,}' if peak else '–'} | {len(r.emits)} |"
    )


def _masked(r: SessionRun) -> int:
    # Codex reports failures inside PostToolUse; count non-zero exits there too.
    n = 0
    for i in r.items:
        if i.hook_event == "PostToolUse" and i.payload and i.source == "codex":
            resp = i.payload.get("tool_response")
            if (
                isinstance(resp, str)
                and resp.startswith("Exit code: ")
                and not resp.startswith("Exit code: 0")
            ):
                n += 1
    return n


def _session_section(r: SessionRun, labels: dict[str, Any], w: Any) -> None:
    if not r.emits:
        return
    w(f"### `{r.key}`")
    w("")
    notes = Counter(n for n in _notes_of(r))
    c = _counts(r)
    w(
        f"{r.agent}, {', '.join(r.files)}; {sum(c.values())} hook events "
        f"({', '.join(f'{k} {v}' for k, v in sorted(c.items()))})."
        + (
            " Calls refused or rejected in the recording (no PostToolUse fired): "
            + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(notes.items()))
            + "."
            if notes
            else ""
        )
    )
    w("")
    per_kind = Counter(e["kind"] for e in r.emits)
    fr = (r.summary.get("follow_rate") or {}).get("kinds", {})
    days: dict[str, Counter[str]] = defaultdict(Counter)
    for e in r.emits:
        days[e["kind"]][iso(int(e["ts"]))[:10]] += 1
    w("| kind | emits | max per day | followed |")
    w("|---|---:|---:|---:|")
    for kind, n in sorted(per_kind.items()):
        f = fr.get(kind, {"emits": 0, "followed": 0})
        w(f"| {kind} | {n} | {max(days[kind].values())} | {f['followed']}/{f['emits']} |")
    w("")
    w("| time | kind | sev. | channel | subject | judgement | reason |")
    w("|---|---|---|---|---|---|---|")
    for e in r.emits:
        lab = labels.get(emit_key(r.key, e))
        subject = e["stable_key"].split("|", 2)[2]
        verdict = lab["label"].upper() if lab else "unlabelled"
        reason = lab.get("reason", "") if lab else _short(e["evidence"], 140)
        w(
            f"| {iso(int(e['ts']))[11:19]} | {e['kind']} | {e['severity']} | {e['channel']} | "
            f"{_md(_short(subject, 60)) or '–'} | {verdict} | {_md(reason)} |"
        )
    w("")


_NOTES_BY_SESSION: dict[str, list[str]] = {}


def _notes_of(r: SessionRun) -> list[str]:
    return _NOTES_BY_SESSION.get(r.session_id, []) if r.group == "transcripts" else []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--sessions", type=Path, default=SESSIONS)
    ap.add_argument("--out", type=Path, default=DOC)
    ap.add_argument("--labels", type=Path, default=LABELS)
    ap.add_argument("--context", action="store_true", help="print unlabelled emits in context")
    ap.add_argument("--all", action="store_true", help="with --context: labelled ones too")
    ap.add_argument("--before", type=int, default=25)
    ap.add_argument("--after", type=int, default=10)
    ap.add_argument("--check", action="store_true", help="exit 1 if the doc is out of date")
    args = ap.parse_args()
    if not args.sessions.is_dir():
        print(f"evaluate: {args.sessions} is absent; nothing to evaluate", file=sys.stderr)
        return 0
    logging.getLogger("tma1").setLevel(logging.ERROR)
    data = json.loads(args.labels.read_text()) if args.labels.exists() else {}
    labels: dict[str, Any] = data.get("labels", {})
    flaws: list[dict[str, str]] = data.get("flaws", [])

    inputs, _ = driver.load([args.sessions])
    _collect_notes(inputs)
    runs = collect(args.sessions)
    for run in runs:
        replay(run)
    if args.context:
        for run in runs:
            print_context(run, {} if args.all else labels, args.before, args.after)
        return 0
    doc = render(runs, labels, flaws, data.get("baseline", {}).get("keys", []))
    if args.check:
        current = args.out.read_text() if args.out.exists() else ""
        if current != doc:
            print(f"evaluate: {args.out} is out of date", file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(doc)
    n = sum(len(r.emits) for r in runs)
    unl = sum(1 for r in runs for e in r.emits if emit_key(r.key, e) not in labels)
    print(f"evaluate: wrote {args.out} ({len(runs)} sessions, {n} emits, {unl} unlabelled)")
    return 0


def _collect_notes(inputs: list[Converted]) -> None:
    for conv in inputs:
        for n in conv.notes:
            if n.kind in ("modified_since_read", "validation_rejected", "refused"):
                _NOTES_BY_SESSION.setdefault(n.session_id, []).append(n.kind)


if __name__ == "__main__":
    sys.exit(main())
