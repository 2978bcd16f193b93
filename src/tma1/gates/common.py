"""What the three gates share: their constants, UTC days, ratios and pass/fail verdicts.

Conventions (design §2.13–2.14, seed "Validation gates"):
- A *day* is a UTC calendar day. `days=7` covers today and the six days before it.
- Minimum samples (docs/gates.md): a rate over a handful of emits or labels says nothing,
  so below `FOLLOW_MIN_EMITS` emits (follow-rate) or `PRECISION_MIN_LABELS` labels
  (precision) a figure has `pass` None and `status` "not_enough_data" — shown as
  "not enough data (n = 1)", never as a FAIL, and `tma1 gates --strict` does not fail on
  it. Every figure carries `status`: pass | fail | not_enough_data | no_data.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import date
from typing import Any

from tma1.engine.anomaly import Channel
from tma1.engine.rules import SPECS

# Every rule's kind (the seed's six first): a rule added to engine/rules/ is gated too.
KINDS: tuple[str, ...] = tuple(SPECS)
SEVERITIES: tuple[str, ...] = ("high", "medium", "low")
# Every channel an emit can be delivered on; `session_start` is the session bundle's
# re-telling (design §2.19). The budget counts every channel: an emit is an emit.
CHANNELS: tuple[str, ...] = tuple(c.value for c in Channel)

DAY_MS = 86_400_000
MINUTE_MS = 60_000
PRECISION_TARGET = 0.70
FOLLOW_TARGET = 0.30
PRECISION_SAMPLE = 50
# Below these sample sizes a gate says "not enough data (n = …)" instead of pass/fail.
PRECISION_MIN_LABELS = 10
FOLLOW_MIN_EMITS = 5
DEFAULT_BUDGET = 5
DEFAULT_WINDOW = 5
DEFAULT_DAYS = 7

_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


def since_for_days(now_ms: int, days: int) -> int:
    """Start of the UTC day `days - 1` days before the day of `now_ms`."""
    return (now_ms // DAY_MS - (days - 1)) * DAY_MS


def day_label(day_index: int) -> str:
    """The UTC date of a day index (days since the epoch): `2026-11-30`."""
    return date.fromordinal(_EPOCH_ORDINAL + day_index).isoformat()


def split_stable_key(key: str) -> tuple[str, str, str]:
    """`kind|severity|subject` → parts; the subject (a command prefix) may contain `|`."""
    kind, severity, subject = [*key.split("|", 2), "", ""][:3]
    return kind, severity, subject


def loads_list(text: str | None) -> list[str]:
    if not text:
        return []
    try:
        value = json.loads(text)
    except ValueError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []


def ratio(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def sample_verdict(value: float | None, target: float, n: int, min_n: int) -> dict[str, Any]:
    """`pass` and `status` of a rate over `n` items: no verdict below `min_n` items."""
    if value is None or n == 0:
        return {"pass": None, "status": "no_data", "n": n, "min_n": min_n}
    if n < min_n:
        return {"pass": None, "status": "not_enough_data", "n": n, "min_n": min_n}
    ok = value >= target
    return {"pass": ok, "status": "pass" if ok else "fail", "n": n, "min_n": min_n}


def overall_pass(values: Iterable[bool | None]) -> bool | None:
    """False if any is False; True if at least one True and none False; None: no data."""
    vals = [v for v in values if v is not None]
    return all(vals) if vals else None


def overall_status(statuses: Iterable[str]) -> str:
    """fail if any fails; pass if any passes; else not_enough_data if any; else no_data."""
    seen = set(statuses)
    for status in ("fail", "pass", "not_enough_data"):
        if status in seen:
            return status
    return "no_data"
