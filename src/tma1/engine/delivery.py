"""Delivery: turn a stored hook event into the body the agent receives (design §2.6–2.7).

Placeholder until the engine lands: every answer is empty.
"""

from __future__ import annotations

from tma1.clock import Clock
from tma1.config import Settings
from tma1.counters import Counters
from tma1.events import HookEvent
from tma1.store import Store


class Delivery:
    def __init__(
        self, *, store: Store, clock: Clock, settings: Settings, counters: Counters
    ) -> None:
        self.store = store
        self.clock = clock
        self.settings = settings
        self.counters = counters

    def respond(self, event: HookEvent, *, envelope: str | None = None) -> str:
        return ""

    def invalidate(self, session_id: str) -> None:
        return None

    def invalidate_project(self, project: str) -> None:
        return None

    def start(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def health(self) -> dict[str, object]:
        return {}
