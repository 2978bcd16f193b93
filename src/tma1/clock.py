"""Time as an injected dependency (rules and suppression never read the wall clock), and
the one reading of a recorded time as epoch milliseconds.

A time without a zone is UTC. Every agent tma1 reads records its timestamps in UTC (most
with `Z`, some without), tma1 prints every time with `Z`, and the zone of the machine that
recorded a session is not knowable when it is replayed elsewhere: local time would give the
same transcript different times on different machines.
"""

from __future__ import annotations

import math
import threading
import time
from datetime import UTC, datetime
from typing import Any, Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that only moves when told to; used by tests and replay."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        # Reading and rebinding one attribute are atomic: only `advance` (read, add,
        # write) needs the lock. Replay reads the clock several times per event.
        return self._now

    def set(self, ms: int) -> None:
        self._now = ms

    def advance(self, ms: int) -> int:
        with self._lock:
            self._now += ms
            return self._now


MINUTE_MS = 60_000
SECOND_MS = 1_000


# Below this a number is epoch seconds, above it epoch ms: 10^11 s is the year 5138, and
# 10^11 ms is 1973, older than any recorded session.
_SECONDS_BELOW = 10**11


def epoch_ms(value: Any) -> int | None:
    """Epoch ms from epoch ms, epoch seconds (a number below 10^11, or such digits in a
    string) or ISO-8601 (`Z`, an offset, or no zone: UTC); None when it is none of these
    or before 1970."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        if not math.isfinite(value) or value < 0:
            return None
        return int(value * 1000) if value < _SECONDS_BELOW else int(value)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.isdigit() and text.isascii():
        try:
            return epoch_ms(int(text))
        except ValueError:  # more digits than Python converts
            return None
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    ms = int(dt.timestamp() * 1000)
    return ms if ms >= 0 else None
