"""Time as an injected dependency: rules and suppression never read the wall clock."""

from __future__ import annotations

import threading
import time
from typing import Protocol


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
