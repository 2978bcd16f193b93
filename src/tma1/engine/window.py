"""`SessionWindow`: everything the rules may look at, loaded with a few indexed queries."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tma1.clock import MINUTE_MS
from tma1.events import FileChange, HookEvent, Usage

if TYPE_CHECKING:
    from tma1.config import Settings

EVENTS_WINDOW_MS = 60 * MINUTE_MS
CHANGES_WINDOW_MS = 90 * MINUTE_MS
# Per session, the engine holds at most this many events of the hour (the newest ones):
# ≈ 1.5 KB each, so a session costs at most ≈ 7.5 MB however fast it posts. A real agent
# posts well under one hook a second (docs/reliability.md), i.e. under 3,600 an hour.
MAX_WINDOW_EVENTS = 5_000
# How far before a session's start the project's other sessions' check runs are read, for
# what was already failing when it began (`SessionWindow.failing_at_start`).
PRIOR_RUNS_MS = 12 * 60 * MINUTE_MS


@dataclass(slots=True)
class SessionWindow:
    session_id: str
    project: str | None
    events: list[HookEvent] = field(default_factory=list)  # ts ascending, last 60 min
    changes: list[FileChange] = field(default_factory=list)  # project's, last 90 min
    usage: Usage | None = None  # latest context occupancy
    session_start_ts: int | None = None  # first event we ever saw of this session
    # When the session's context was last compacted (design §2.17); None: never, or not
    # loaded because the context is under its threshold (the only reader is
    # context_pressure, which has nothing to say then).
    epoch_start_ts: int | None = None
    # The project's checks open when the session began (the other sessions' runs of the
    # last `PRIOR_RUNS_MS`): identity → error lines of their failing runs since their last
    # pass (`checkruns.failing_at`). A failure with only these errors is pre-existing
    # (design §2.22), whichever session saw it first.
    failing_at_start: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # What several rules derive from the same events at the same `now` (the session's
    # check runs): computed once per detection, never compared or shown.
    memo: dict[object, object] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class RuleConfig:
    # None: half the model's context window when known, else 100,000 (engine/context.py).
    context_pressure_threshold: int | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> RuleConfig:
        """The rules' settings, read once at start-up (TMA1_CONTEXT_PRESSURE_THRESHOLD)."""
        return cls(context_pressure_threshold=settings.context_pressure_threshold)
