"""The misses: loops in the corpus that no emit addressed (scripts/evaluate.py)."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from evaluation.corpus import SessionRun, events_of, md, short
from tma1.replay.driver import iso
from tma1.replay.model import USAGE

LOOP = 3
LOOP_WINDOW_MS = 30 * 60 * 1000


def _streaks(times: list[int]) -> list[list[int]]:
    """Maximal runs of `times` (ascending) with LOOP or more within LOOP_WINDOW_MS."""
    best: list[list[int]] = []
    i = 0
    for j in range(len(times)):
        while times[j] - times[i] > LOOP_WINDOW_MS:
            i += 1
        if j - i + 1 >= LOOP:
            if best and best[-1][-1] >= times[i]:
                best[-1] = sorted(set(best[-1]) | set(times[i : j + 1]))
            else:
                best.append(times[i : j + 1])
    return best


def find_misses(run: SessionRun) -> list[dict[str, Any]]:
    """The loops in `run` that no emit addressed: a check failing LOOP+ times in one lane
    within 30 min, a test failing in LOOP+ runs, a Stop with an open check whose failure
    names a file the session edited, the context past the threshold in an epoch. Each
    carries the facts; whether tma1 should have spoken is the judgement in
    scripts/evaluation_misses.json."""
    from tma1.checks import error_locations
    from tma1.engine.checkruns import _closed, run_of
    from tma1.engine.context import context_threshold
    from tma1.engine.rules._support import edits
    from tma1.events import absolutize
    from tma1.paths import norm_path

    events = events_of(run)
    if not events:
        return []
    project = next((e.project for e in events if e.project), None)
    runs = [r for e in events if (r := run_of(e, project)) is not None]
    emitted = defaultdict(list)  # (kind, subject) -> ts
    for e in run.emits:
        emitted[(e["kind"], e["stable_key"].split("|", 2)[2])].append(int(e["ts"]))

    def said(kinds: tuple[str, ...], subject: str, first: int, last: int) -> bool:
        return any(
            first <= t <= last + LOOP_WINDOW_MS
            for k in kinds
            for t in emitted.get((k, subject), [])
        )

    out: list[dict[str, Any]] = []
    build_kinds = ("repeated_failed_build", "build_broken_after_my_edit")

    # 1. a check failing LOOP+ times in one lane
    # Failures since the check last passed (any lane): a pass ends a streak.
    by: dict[tuple[str, str], list[list[int]]] = defaultdict(lambda: [[]])
    for r in runs:
        if r.passed:
            for (ident, _lane), seqs in by.items():
                if ident == r.check.identity and seqs[-1]:
                    seqs.append([])
        elif r.failed:
            by[(r.check.identity, r.lane)][-1].append(r.ts)
    for (ident, lane), times in sorted(
        (k, t) for k, seqs in by.items() for t in seqs if len(t) >= LOOP
    ):
        for s in _streaks(times):
            out.append({
                "what": "check failed 3+ times", "subject": ident, "lane": lane, "n": len(s),
                "first": s[0], "last": s[-1], "said": said(build_kinds, ident, s[0], s[-1]),
            })  # fmt: skip
    # 2. a test failing in LOOP+ runs (any lane, as test_stuck counts per lane: say which)
    tests: dict[tuple[str, str], list[list[int]]] = defaultdict(lambda: [[]])
    for r in runs:
        if r.failed:
            for tid in dict.fromkeys(r.event.test_ids):
                tests[(tid, r.lane)][-1].append(r.ts)
        for tid in r.event.passed_test_ids or []:
            for (t, _lane), seqs in tests.items():
                if t == tid and seqs[-1]:
                    seqs.append([])
    for (tid, lane), times in sorted(
        (k, t) for k, seqs in tests.items() for t in seqs if len(t) >= LOOP
    ):
        for s in _streaks(times):
            out.append({
                "what": "test failed in 3+ runs", "subject": tid, "lane": lane, "n": len(s),
                "first": s[0], "last": s[-1], "said": said(("test_stuck",), tid, s[0], s[-1]),
            })  # fmt: skip
    # 3. a Stop with an open check whose failure names a file the session edited before it
    seen_open: set[str] = set()
    for stop in (e for e in events if e.event_type == "Stop" and not e.agent_id):
        upto = [r for r in runs if r.ts <= stop.ts]
        closed = _closed(upto)
        newest: dict[str, Any] = {}
        for r in upto:
            if r.failed or r.passed:
                newest[r.check.identity] = r
        for ident, r in newest.items():
            if not r.failed or id(r.event) in closed or ident in seen_open:
                continue
            edited = {
                norm_path(f, project)
                for c in edits(e for e in events if e.ts <= r.ts)
                for f in c.files
            }
            named = {
                norm_path(absolutize(ref.path, r.event.cwd), project)
                for ref in error_locations(r.event.tool_result or "")
            }
            if not edited & named:
                continue
            seen_open.add(ident)
            out.append({
                "what": "Stop with an open check naming an edited file", "subject": ident,
                "lane": r.lane, "n": 1, "first": r.ts, "last": stop.ts,
                "said": any(stop.ts - 1000 <= t <= stop.ts + 1000
                            for k in build_kinds for t in emitted.get((k, ident), [])),
            })  # fmt: skip
    # 4. the context past the threshold in an epoch (between compactions)
    epoch_start, crossed = run.items[0].ts, None
    usages = [i for i in run.items if i.kind == USAGE and i.usage]
    ctx_emits = [int(e["ts"]) for e in run.emits if e["kind"] == "context_pressure"]

    def close_epoch(end: int) -> None:
        if crossed is not None:
            ts, occ, thr = crossed
            out.append({
                "what": "context past the threshold", "subject": f"{occ:,} ≥ {thr:,}",
                "lane": "", "n": 1, "first": ts, "last": end,
                "said": any(epoch_start <= t <= end for t in ctx_emits),
            })  # fmt: skip

    for u in usages:
        assert u.usage is not None
        if u.usage.kind == "compaction":
            close_epoch(u.ts)
            epoch_start, crossed = u.ts, None
            continue
        thr = context_threshold(u.usage, None)
        if crossed is None and u.usage.occupancy >= thr:
            crossed = (u.ts, u.usage.occupancy, thr)
    close_epoch(run.items[-1].ts + 1)
    return [m for m in out if not m["said"]]


def miss_key(run: SessionRun, m: dict[str, Any]) -> str:
    lane = f"|lane {m['lane'][:12]}" if m["lane"] else ""
    return f"{run.key}|{m['what']}|{m['subject']}{lane}|{iso(int(m['first']))}"


# --- context for labelling -----------------------------------------------------------------


def render_misses(runs: list[SessionRun], judged: dict[str, Any], w: Any) -> None:
    found = [(r, m) for r in runs for m in find_misses(r)]
    w("## Misses: where an agent looped and tma1 said nothing")
    w("")
    w(
        "Found by `find_misses` over the replayed sessions, not by memory: failing shell "
        "runs grouped by check identity (`tma1.checks.check_of`) and lane, a streak being "
        f"{LOOP}+ failures within 30 min with no pass of the check between them; tests "
        f"failing in {LOOP}+ runs (ids from the failure output) with no run reporting "
        "them passing between; each main-agent Stop with an open check (newest run "
        "failed, no later covering pass) whose failure names a file the session edited "
        "before it; and each context epoch (between compactions) whose prompt size "
        "passed the threshold (half the model's window, else 100k). A loop counts as "
        "addressed when an emit of the matching kind and subject came between its first "
        "failure and 30 min after its last (for a Stop: at that Stop; for the context: "
        "in that epoch). The verdicts and reasons are in `scripts/evaluation_misses.json`."
    )
    w("")
    verdicts = Counter(judged.get(miss_key(r, m), {}).get("verdict", "unjudged")
                       for r, m in found)  # fmt: skip
    w(
        f"{len(found)} places: "
        + ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items()))
        + " (right = the silence is right; wrong = tma1 should have spoken)."
    )
    w("")
    w("| session | what | subject | lane | n | first → last (UTC) | verdict | reason |")
    w("|---|---|---|---|---:|---|---|---|")
    for r, m in found:
        j = judged.get(miss_key(r, m), {})
        w(
            f"| `{r.key[:8]}` | {m['what']} | {md(short(m['subject'], 60))} | "
            f"{m['lane'][:18] or 'main'} | {m['n']} | {iso(int(m['first']))[:19]} → "
            f"{iso(int(m['last']))[11:19]} | {j.get('verdict', 'unjudged')} | "
            f"{md(j.get('reason', ''))} |"
        )
    w("")
    stale = sorted(set(judged) - {miss_key(r, m) for r, m in found})
    if stale:
        w("Judged misses that no longer occur: " + ", ".join(f"`{md(k)}`" for k in stale))
        w("")
