"""The three gates as kind × gate rows, and a figure's status as people read it: what
`tma1 gates` prints and the dashboard shows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tma1.gates.common import FOLLOW_TARGET, PRECISION_TARGET


def status_text(figure: Mapping[str, Any]) -> str:
    """One word or phrase for a figure's status, as the CLI and the dashboard say it."""
    status = figure.get("status")
    if status is None:  # the replay summary's budget carries `pass` alone
        status = "pass" if figure["pass"] else "fail"
    if status == "not_enough_data":
        return f"not enough data (n = {figure['n']})"
    return {"no_data": "n/a", "pass": "pass"}.get(status, "FAIL")


def _row(kind: str, gate: str, value: str, target: str, fig: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "kind": kind,
        "gate": gate,
        "value": value,
        "target": target,
        "pass": fig["pass"],
        "status": fig["status"],
    }


def gate_table(gates: Mapping[str, Any]) -> list[dict[str, Any]]:
    """kind × gate rows: value, target, pass (None: no data)."""
    rows = []
    b, f, p = gates["budget"], gates["follow_rate"], gates["precision"]
    for kind in dict.fromkeys([*b["kinds"], *f["kinds"], *p["kinds"]]):
        if bk := b["kinds"].get(kind):
            value = f"max {bk['max_per_day']}/day, {bk['total']} total"
            rows.append(_row(kind, "budget", value, f"<= {b['budget']}/day", bk))
        if fk := f["kinds"].get(kind):
            value = (
                "no emits"
                if fk["rate"] is None
                else f"{fk['rate']:.0%} ({fk['followed']}/{fk['emits']})"
            )
            target = f">= {FOLLOW_TARGET:.0%} in {f['window']} calls"
            rows.append(_row(kind, "follow-rate", value, target, fk) | {"n": fk["n"]})
        if pk := p["kinds"].get(kind):
            value = (
                "no labels"
                if pk["precision"] is None
                else f"{pk['precision']:.0%} ({pk['tp']} TP / {pk['fp']} FP)"
            )
            rows.append(
                _row(kind, "precision", value, f">= {PRECISION_TARGET:.0%}", pk) | {"n": pk["n"]}
            )
    return rows
