"""Gate 1, the daily emit budget: per kind and UTC day, at most `budget` emits.

A kind with no emits passes (0 ≤ budget). The budget counts every channel."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from tma1.gates.common import (
    DAY_MS,
    DEFAULT_BUDGET,
    DEFAULT_DAYS,
    KINDS,
    day_label,
    since_for_days,
)


def day_counts(emits: Iterable[Mapping[str, Any]], since: int) -> list[tuple[str, int, int]]:
    """Emit-log rows held in memory → (kind, UTC day index, count), as the store's
    `emit_day_counts` gives them for the rows it holds."""
    counts = Counter((str(r["kind"]), int(r["ts"]) // DAY_MS) for r in emits if r["ts"] >= since)
    return [(kind, day, n) for (kind, day), n in counts.items()]


def budget_report(
    rows: Iterable[tuple[str, int, int]], *, since: int, now_ms: int, days: int, budget: int
) -> dict[str, Any]:
    """`rows` = (kind, UTC day index, count). Every kind × every day, zeros included."""
    counts: Counter[tuple[str, int]] = Counter()
    kinds = list(KINDS)
    for kind, d, n in rows:
        counts[(kind, d)] += n
        if kind not in kinds:
            kinds.append(kind)  # an unknown kind in the log still shows up
    first = since // DAY_MS
    day_idx = [first + i for i in range(days)]
    labels = [day_label(d) for d in day_idx]
    per_day = []
    for d, label in zip(day_idx, labels, strict=True):
        for kind in kinds:
            n = counts[(kind, d)]
            per_day.append({"day": label, "kind": kind, "count": n, "over_budget": n > budget})
    per_kind: dict[str, dict[str, Any]] = {}
    for kind in kinds:
        series = [counts[(kind, d)] for d in day_idx]
        over = sum(1 for n in series if n > budget)
        per_kind[kind] = {
            "total": sum(series),
            "max_per_day": max(series) if series else 0,
            "days_over": over,
            "pass": over == 0,
            "status": "pass" if over == 0 else "fail",
        }
    ok = all(k["pass"] for k in per_kind.values())
    return {
        "days": days,
        "budget": budget,
        "since": since,
        "until": now_ms,
        "day_labels": labels,
        "per_day": per_day,
        "kinds": per_kind,
        "pass": ok,
        "status": "pass" if ok else "fail",
    }


def budget_of_emits(
    emits: Iterable[Mapping[str, Any]],
    *,
    now_ms: int,
    days: int = DEFAULT_DAYS,
    budget: int = DEFAULT_BUDGET,
) -> dict[str, Any]:
    """The budget over emit-log rows held in memory (a replay without a database)."""
    since = since_for_days(now_ms, days)
    return budget_report(
        day_counts(emits, since), since=since, now_ms=now_ms, days=days, budget=budget
    )
