"""An agent adapter: a name and the registrations `tma1 install` applies for it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tma1.adapters.registration import JsonHooksRegistration, Registration


@dataclass
class Adapter:
    name: str
    title: str
    registrations: list[Registration]
    notes: list[str] = field(default_factory=list)
    # What this agent cannot be told through its hooks, one sentence each (docs/hooks.md);
    # `tma1 doctor` can print them. Empty: every channel tma1 uses is there.
    cannot_be_told: list[str] = field(default_factory=list)
    # A line on the agent's state after install (e.g. whether Codex trusts the hooks).
    status: Callable[[], str] | None = None

    @property
    def hooks(self) -> JsonHooksRegistration:
        """The agent's hooks file (every adapter has exactly one)."""
        return next(r for r in self.registrations if isinstance(r, JsonHooksRegistration))
