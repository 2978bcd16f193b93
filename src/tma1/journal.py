"""The outage journal: hook events answered while the database was down survive `kill -9`
(docs/reliability.md, "Journal", gives the fsync policy).

`ingest-journal.jsonl` in the data dir (mode 0600) holds one JSON line `{"seq": N, "event":
{…}}` per queued event, written before its hook is answered, and `{"done": [N, …]}` once
the events are in the database; it is emptied when nothing is pending. On start, every
event without a `done` line goes back on the queue. Each line is one `write(2)` on an
`O_APPEND` descriptor; a background `fsync` follows within `SYNC_EVERY_S`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tma1.events import HookEvent

log = logging.getLogger("tma1.ingest")

JOURNAL_FILE = "ingest-journal.jsonl"
SYNC_EVERY_S = 1.0
# What a journal line keeps of an event: all but its row id (it has none yet).
_FIELDS = {f.name for f in dataclasses.fields(HookEvent)} - {"id"}


class Journal:
    """Append-only, thread-safe. An event is known by its object until `done` (it stays
    in the outage queue until then)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._seq = 0
        self._pending: dict[int, int] = {}  # id(event) -> its sequence number
        self._dirty = threading.Event()
        self._closed = threading.Event()
        self._syncer: threading.Thread | None = None

    def recover(self) -> list[HookEvent]:
        """The journalled events that never reached the database, in order."""
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        events: dict[int, HookEvent] = {}
        done: set[int] = set()
        for line in text.splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a line cut by the crash: it was never acknowledged whole
            if not isinstance(rec, dict):
                continue
            if isinstance(rec.get("done"), list):
                done.update(n for n in rec["done"] if isinstance(n, int))
            elif isinstance(rec.get("seq"), int) and isinstance(rec.get("event"), dict):
                fields = {k: v for k, v in rec["event"].items() if k in _FIELDS}
                with contextlib.suppress(TypeError):  # a required field is missing
                    events[rec["seq"]] = HookEvent(**fields)
        pending = sorted((s, e) for s, e in events.items() if s not in done)
        with self._lock:
            self._seq = max([*events, *done, 0])
            self._pending = {id(e): s for s, e in pending}
            if not pending:
                self._truncate_locked()
        if pending:
            log.warning(
                "replaying %d hook events journalled while the database was down", len(pending)
            )
        return [e for _, e in pending]

    def _open_locked(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            if self._syncer is None:
                self._syncer = threading.Thread(
                    target=self._sync_loop, name="tma1-journal-sync", daemon=True
                )
                self._syncer.start()
        return self._fd

    def _write_locked(self, record: dict[str, Any]) -> None:
        data = (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode(
            "utf-8", "replace"
        )
        fd = self._open_locked()
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        self._dirty.set()

    def append(self, event: HookEvent) -> None:
        """Journal `event`, once (a write that fails is logged: the event stays in memory)."""
        with self._lock:
            if id(event) in self._pending:
                return
            self._seq += 1
            try:
                record = {name: getattr(event, name) for name in _FIELDS}
                self._write_locked({"seq": self._seq, "event": record})
            except OSError as exc:
                log.error("cannot write the outage journal %s: %s", self.path, exc)
                return
            self._pending[id(event)] = self._seq

    def done(self, events: Sequence[HookEvent]) -> None:
        """These events are in the database (or refused by it): never replay them."""
        with self._lock:
            seqs = [s for e in events if (s := self._pending.pop(id(e), None)) is not None]
            if not seqs:
                return
            try:
                if self._pending:
                    self._write_locked({"done": seqs})
                else:
                    self._truncate_locked()  # nothing pending: start the next outage afresh
            except OSError as exc:
                log.error("cannot write the outage journal %s: %s", self.path, exc)

    def _truncate_locked(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
        else:
            with contextlib.suppress(FileNotFoundError):
                if self.path.stat().st_size:
                    os.truncate(self.path, 0)

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def _sync_loop(self) -> None:
        while not self._closed.is_set():
            self._dirty.wait(timeout=SYNC_EVERY_S)
            if self._closed.wait(SYNC_EVERY_S if self._dirty.is_set() else 0):
                break
            self.sync()

    def sync(self) -> None:
        """fsync what was written (outside the lock: appends never wait for the disk)."""
        with self._lock:
            if not self._dirty.is_set() or self._fd is None:
                return
            self._dirty.clear()
            fd = os.dup(self._fd)
        try:
            with contextlib.suppress(OSError):
                os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        self._closed.set()
        if self._syncer is not None:
            self._syncer.join(timeout=5)
        self.sync()
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
