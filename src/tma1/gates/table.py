"""The three gates as kind × gate rows, and a figure's status as people read it: what
`tma1 gates` prints and the dashboard shows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tma1.gates.common import FOLLOW_TARGET, PRECISION_TARGET


def status_text(figure: Mapping[str, Any]) -> str:
    """One word or phrase for a figure's status, as the CLI and the dashboard say it."""
    status = figure.get("status")
    if status == "not_enough_data":
        return f"not enough data (n = {figure.get('n', 0)})"
    if status == "no_data":
        return "n/a"
    if status is None:
        p = figure.get("pass")
        return "n/a" if p is None else "pass" if p else "FAIL"
    return "pass" if status == "pass" else "FAIL"


def gate_table(gates: Mapping[str, Any]) -> list[dict[str, Any]]:
    """kind × gate rows: value, target, pass (None: no data)."""
    rows = []
    b, f, p = gates["budget"], gates["follow_rate"], gates["precision"]
    kinds = list(dict.fromkeys([*b["kinds"], *f["kinds"], *p["kinds"]]))
    for kind in kinds:
        bk = b["kinds"].get(kind)
        if bk:
            rows.append(
                {
                    "kind": kind,
                    "gate": "budget",
                    "value": f"max {bk['max_per_day']}/day, {bk['total']} total",
                    "target": f"<= {b['budget']}/day",
                    "pass": bk["pass"],
                    "status": bk.get("status", "pass" if bk["pass"] else "fail"),
                }
            )
        fk = f["kinds"].get(kind)
        if fk:
            value = (
                "no emits"
                if fk["rate"] is None
                else f"{fk['rate']:.0%} ({fk['followed']}/{fk['emits']})"
            )
            rows.append(
                {
                    "kind": kind,
                    "gate": "follow-rate",
                    "value": value,
                    "target": f">= {FOLLOW_TARGET:.0%} in {f['window']} calls",
                    "pass": fk["pass"],
                    "status": fk.get("status"),
                    "n": fk.get("n", fk["emits"]),
                }
            )
        pk = p["kinds"].get(kind)
        if pk:
            value = (
                "no labels"
                if pk["precision"] is None
                else f"{pk['precision']:.0%} ({pk['tp']} TP / {pk['fp']} FP)"
            )
            rows.append(
                {
                    "kind": kind,
                    "gate": "precision",
                    "value": value,
                    "target": f">= {PRECISION_TARGET:.0%}",
                    "pass": pk["pass"],
                    "status": pk.get("status"),
                    "n": pk.get("n", pk["labelled"]),
                }
            )
    return rows
