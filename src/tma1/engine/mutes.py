"""Muted kinds (design §2.20): computed and shown as muted, never delivered, so never
emitted.

What a mute is (`Mute`) lives here; where the mutes come from is a port
(`tma1.engine.ports.MuteSource`): live, `tma1.live.mutes.Mutes` reads the `mutes.json`
that `tma1 mute` writes; a replay mutes nothing (`NO_MUTES`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Mute:
    kind: str
    project: str | None = None  # None: every project
    until_ms: int | None = None  # None: until unmuted
    since_ms: int = 0

    def matches(self, kind: str, project: str | None, now_ms: int) -> bool:
        if self.kind != kind:
            return False
        if self.until_ms is not None and now_ms >= self.until_ms:
            return False
        return self.project is None or self.project == project

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "project": self.project,
            "until": self.until_ms,
            "since": self.since_ms,
        }

    @classmethod
    def from_json(cls, raw: object) -> Mute | None:
        if not isinstance(raw, dict) or not isinstance(raw.get("kind"), str):
            return None
        project = raw.get("project")
        until = raw.get("until")
        since = raw.get("since")
        return cls(
            kind=raw["kind"],
            project=project if isinstance(project, str) and project else None,
            until_ms=until if isinstance(until, int) else None,
            since_ms=since if isinstance(since, int) else 0,
        )


class NoMutes:
    """A `MuteSource` that mutes nothing (a replay: no user muted anything in it)."""

    def current(self) -> list[Mute]:
        return []

    def muted(self, kind: str, project: str | None, now_ms: int) -> Mute | None:
        return None


NO_MUTES = NoMutes()
