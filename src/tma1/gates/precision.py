"""Gate 3, precision: of the newest labelled emits, the share labelled a true positive.

Precision reads the `sample` newest labelled emits (overall, and per kind its own newest),
separately for human and agent labels. A kind with no labels has precision None and pass
None ("no data" — neither pass nor fail)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tma1.engine.anomaly import LABEL_SOURCES
from tma1.gates.common import (
    KINDS,
    PRECISION_MIN_LABELS,
    PRECISION_TARGET,
    ratio,
    sample_verdict,
)


def precision_figures(
    labels: Sequence[str], *, min_n: int = PRECISION_MIN_LABELS
) -> dict[str, Any]:
    """`labels` newest first, already cut to the sample."""
    tp, fp = labels.count("tp"), labels.count("fp")
    prec = ratio(tp, tp + fp)
    return {
        "tp": tp,
        "fp": fp,
        "labelled": tp + fp,
        "precision": prec,
        **sample_verdict(prec, PRECISION_TARGET, tp + fp, min_n),
    }


def precision_report(
    rows: Iterable[tuple[str, str, str]], *, since: int, now_ms: int, days: int, sample: int
) -> dict[str, Any]:
    """`rows` = (source, kind, label), newest emit first."""
    by_source: dict[str, list[tuple[str, str]]] = {s: [] for s in LABEL_SOURCES}
    for source, kind, label in rows:
        by_source.setdefault(source, []).append((kind, label))
    out: dict[str, Any] = {
        "days": days,
        "sample": sample,
        "since": since,
        "until": now_ms,
        "target": PRECISION_TARGET,
        "min_labels": PRECISION_MIN_LABELS,
    }
    for source, items in by_source.items():
        kinds = list(KINDS) + sorted({k for k, _ in items} - set(KINDS))
        per_kind = {
            kind: precision_figures([lab for k, lab in items if k == kind][:sample])
            for kind in kinds
        }
        out[source] = {
            "overall": precision_figures([lab for _, lab in items][:sample]),
            "kinds": per_kind,
        }
    out["kinds"] = out["human"]["kinds"]
    out["overall"] = out["human"]["overall"]
    out["pass"] = out["human"]["overall"]["pass"]
    out["status"] = out["human"]["overall"]["status"]
    return out
