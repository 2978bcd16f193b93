"""Thread-safe named counters, reported by `GET /api/health`."""

from __future__ import annotations

import threading
from collections import Counter


class Counters:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._c: Counter[str] = Counter()

    def inc(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._c[name] += n

    def get(self, name: str) -> int:
        with self._lock:
            return self._c[name]

    def snapshot(self, prefix: str = "") -> dict[str, int]:
        with self._lock:
            return {k[len(prefix) :]: v for k, v in sorted(self._c.items()) if k.startswith(prefix)}
