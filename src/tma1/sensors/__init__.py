"""Sensors: the file watcher (external changes) and the transcript tailer (occupancy).

Placeholder until the sensors land: events are noticed and ignored.
"""

from __future__ import annotations

from collections.abc import Callable

from tma1.clock import Clock
from tma1.config import Settings
from tma1.counters import Counters
from tma1.events import HookEvent
from tma1.store import Store


class Sensors:
    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        settings: Settings,
        counters: Counters,
        on_project_change: Callable[[str], None],
        on_session_change: Callable[[str], None],
    ) -> None:
        self.store = store
        self.clock = clock
        self.settings = settings
        self.counters = counters
        self.on_project_change = on_project_change
        self.on_session_change = on_session_change

    def on_event(self, event: HookEvent) -> None:
        return None

    def start(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def health(self) -> dict[str, object]:
        return {}
