"""An agent adapter: a name and the registrations `tma1 install` applies for it."""

from __future__ import annotations

from dataclasses import dataclass, field

from tma1.adapters.registration import Registration


@dataclass
class Adapter:
    name: str
    title: str
    registrations: list[Registration]
    notes: list[str] = field(default_factory=list)
