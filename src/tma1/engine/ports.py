"""What the engine reads from and writes to, as small protocols (design §5).

The Detector and Delivery never know where windows come from, where emits go or who muted
what: live, `tma1.live.service.build_service` hands them the implementations over the store and
the data dir (`tma1.live`: `StoreWindows`, the store itself for the bundle's reads,
`EmitLog`, `Mutes`; and `tma1.ingest.Ingest`); a replay hands in-memory peers
(`tma1.replay.memory`: `MemoryWindows`, `MemoryEvents`, `MemoryEmits`; nothing muted).
Replay differs from live only by which of them it passes in. Nothing in `tma1.engine`
imports the store, the adapters or the agents' dialects (tests/test_layout.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from tma1.engine.anomaly import Anomaly
from tma1.engine.mutes import Mute
from tma1.engine.window import SessionWindow
from tma1.events import FileChange, HookEvent


class WindowSource(Protocol):
    """A session's `SessionWindow` at `now`: the events of the last hour, the project's
    file changes, the latest usage, the session start and the context epoch."""

    def window(self, session_id: str, now: int) -> SessionWindow: ...

    def forget(self, session_id: str) -> None:
        """The session ended: drop what is held for it (a later window is read afresh)."""

    def health(self) -> dict[str, object]: ...


class BundleReads(Protocol):
    """Where the session bundle's inputs come from: `Store` live; replay's `MemoryWindows`,
    which answers the same reads from what the replay fed so far (so a replay tells the
    bundle the live server told)."""

    def project_shell_results(
        self, project: str, since_ts: int, until_ts: int
    ) -> list[HookEvent]:
        """Every failure keeps its output (the bundle weighs all of a failing run's error
        lines against what ran after it)."""
        ...

    def project_file_creations(
        self, project: str, since_ts: int, until_ts: int
    ) -> list[HookEvent]: ...

    def project_activity(
        self, project: str, since_ts: int, until_ts: int
    ) -> list[tuple[str, int, str, str]]: ...

    def session_last_ts(self, session_id: str, before_ts: int) -> int | None: ...

    def latest_turn_end_ts(self, session_id: str, until_ts: int) -> int | None:
        """When the transcript last said the session's turn ended with no hook (a
        `turn_end` usage row), at or before `until_ts`."""

    def latest_compaction_ts(self, session_id: str, until_ts: int | None = None) -> int | None: ...

    def project_changes(
        self, project: str, since_ts: int, until_ts: int | None = None
    ) -> list[FileChange]: ...

    def session_project(self, session_id: str, until_ts: int | None = None) -> str | None: ...


class EmitSink(Protocol):
    """The emit log: every delivered finding becomes a row (design §2.3)."""

    def record(self, findings: Iterable[Anomaly], *, ts: int) -> None:
        """Log one row per finding; never blocks the hook path."""

    def rows_since(self, ts: int) -> list[dict[str, Any]]:
        """Rows with `ts` at or after `ts`, ordered by (ts, id), as the table holds them."""

    def start(self) -> None: ...

    def stop(self, timeout: float = 10.0) -> None: ...

    def flush(self, timeout: float = 10.0) -> bool:
        """True once every row recorded before the call is where `rows_since` reads."""

    def health(self) -> dict[str, object]: ...


class MuteSource(Protocol):
    """Muted kinds (design §2.20): computed, never delivered."""

    def current(self) -> list[Mute]:
        """Every mute held (expired ones too: `GET /api/mutes` leaves those out)."""

    def muted(self, kind: str, project: str | None, now_ms: int) -> Mute | None:
        """The mute that holds for `kind` in `project` at `now_ms`, if any."""


class EventSink(Protocol):
    """Where a parsed hook event is committed before the engine may see it."""

    def submit_async(self, event: HookEvent, after: Callable[[HookEvent], str]) -> Awaitable[str]:
        """Commit `event`, then answer `after(event)` (the sensors and the engine, right
        after the commit); "" when it could not be committed in time."""

    def start(self) -> None: ...

    def stop(self) -> int:
        """Stop; the number of events lost."""

    def health(self) -> dict[str, object]: ...
