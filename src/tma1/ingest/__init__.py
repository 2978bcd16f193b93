"""Hook ingest: how a parsed hook event is committed before the engine may see it, and
kept when the database is slow or gone (docs/reliability.md, "Database slow or gone").

- `commit.Ingest`: the live `EventSink` (tma1.engine.ports) — a budgeted insert with group
  commit on worker threads, then the answer computed right after the commit; a breaker
  in front of
- `outage.OutageQueue`: events the database could not take yet, written back in order,
- `journal.Journal`: kept on disk until written (`kill -9` loses nothing queued), and
  `journal.Spool`: big hook bodies kept on disk from their answer until their event is.

Replay's peer of `Ingest` is `tma1.replay.memory.MemoryEvents`.
"""

from tma1.ingest.commit import Ingest

__all__ = ["Ingest"]
