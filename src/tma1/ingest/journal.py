"""The outage journal: hook events answered while the database was down survive `kill -9`,
and the disk, not memory, bounds how long an outage may last (docs/reliability.md,
"Journal", gives the fsync policy).

`ingest-journal.jsonl` in the data dir (mode 0600) holds one JSON line `{"seq": N, "event":
{…}}` per queued event, written before its hook is answered, and `{"done": [N, …]}` once
the events are in the database. An event the in-memory queue has no room for is written
as `{"seq": N, "spill": 1, "event": {…}}` and kept on disk only, read back in order when
the queue has drained (`unspill`). The file is emptied when nothing is pending, and on
start rewritten with only what is pending (compacted). Each line is one `write(2)` on an
`O_APPEND` descriptor; a background `fsync` follows within `SYNC_EVERY_S`. A write that
fails (a full disk) is cut back off the file, counted, and logged.

`Spool` keeps a hook body over 1 MiB on disk from before its answer until its event is
committed or journalled: such a body is answered before it is parsed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tma1.events import HookEvent

log = logging.getLogger("tma1.ingest")

JOURNAL_FILE = "ingest-journal.jsonl"
SPOOL_DIR = "ingest-spool"
SYNC_EVERY_S = 1.0
FILE_MODE = 0o600
READ_CHUNK = 1024 * 1024
# What a journal line keeps of an event: all but its row id (it has none yet).
_FIELDS = {f.name for f in dataclasses.fields(HookEvent)} - {"id"}


def _event(rec: Any) -> HookEvent | None:
    if not isinstance(rec, dict) or not isinstance(rec.get("event"), dict):
        return None
    fields = {k: v for k, v in rec["event"].items() if k in _FIELDS}
    try:
        return HookEvent(**fields)
    except TypeError:  # a required field is missing
        return None


def _lines(fd: int, offset: int) -> Iterator[tuple[int, bytes]]:
    """(offset, line without its newline) of each complete line from `offset` on."""
    buf = b""
    pos = offset
    while True:
        chunk = os.pread(fd, READ_CHUNK, pos + len(buf))
        if not chunk:
            return  # a last line without its newline was cut by a crash: never whole
        buf += chunk
        start = 0
        while (nl := buf.find(b"\n", start)) != -1:
            yield pos + start, buf[start:nl]
            start = nl + 1
        pos += start
        buf = buf[start:]


class Journal:
    """Append-only, thread-safe. An event in memory is known by its object until `done`
    (it stays in the outage queue until then); a spilled one only by its place in the
    file until `unspill` reads it back."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._size = 0  # bytes in the file: the offset of the next line
        self._seq = 0
        self._pending: dict[int, int] = {}  # id(event) -> its sequence number
        self._spilled = 0  # events on disk only, from `_spill_at` on
        self._spill_at = 0
        self.unreadable = 0  # lines found cut at start: their events are lost
        self._failed = 0  # event writes failed since the last that succeeded
        self._dirty = threading.Event()
        self._closed = threading.Event()
        self._syncer: threading.Thread | None = None

    # --- start ---------------------------------------------------------------------------

    def recover(self, keep_in_memory: int | None = None) -> list[HookEvent]:
        """The journalled events that never reached the database, in order: the first
        `keep_in_memory` of them (all when None); the rest stay spilled on disk. The file
        is rewritten with only those (compacted) and made private (0600)."""
        with self._lock:
            with contextlib.suppress(OSError):
                os.chmod(self.path, FILE_MODE)  # an older install's journal was 0666
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                return []
            try:
                done: set[int] = set()
                records: dict[int, tuple[int, int]] = {}  # seq -> (offset, length)
                for offset, line in _lines(fd, 0):
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        self.unreadable += 1  # cut by a crash or a full disk
                        continue
                    if not isinstance(rec, dict):
                        continue
                    if isinstance(rec.get("done"), list):
                        done.update(n for n in rec["done"] if isinstance(n, int))
                    elif isinstance(rec.get("seq"), int):
                        records[rec["seq"]] = (offset, len(line))
                self._seq = max([*records, *done, 0])
                pending = sorted(s for s in records if s not in done)
                events = self._compact_locked(fd, pending, records, keep_in_memory)
            finally:
                os.close(fd)
        if self.unreadable:
            log.error(
                "the outage journal %s held %d unreadable lines (cut by a crash or a full "
                "disk): those hook events are lost",
                self.path,
                self.unreadable,
            )
        if pending:
            log.warning(
                "replaying %d hook events journalled while the database was down "
                "(%d read now, %d left on disk until the queue has room)",
                len(pending),
                len(events),
                self._spilled,
            )
        return events

    def _compact_locked(
        self,
        fd: int,
        pending: list[int],
        records: dict[int, tuple[int, int]],
        keep_in_memory: int | None,
    ) -> list[HookEvent]:
        """Rewrite the journal with only `pending` (a temporary file, then a rename)."""
        if not pending:
            self._truncate_locked()
            return []
        keep = len(pending) if keep_in_memory is None else max(1, keep_in_memory)
        events: list[HookEvent] = []
        tmp = self.path.with_name(self.path.name + ".compact")
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        size, spill_at, spilled = 0, 0, 0
        try:
            for seq in pending:
                offset, length = records[seq]
                rec = json.loads(os.pread(fd, length, offset))
                event = _event(rec)
                if event is None:
                    self.unreadable += 1
                    continue
                if len(events) < keep:
                    rec.pop("spill", None)
                    events.append(event)
                    self._pending[id(event)] = seq
                else:
                    if not spilled:
                        spill_at = size
                    rec = {"seq": seq, "spill": 1, "event": rec["event"]}
                    spilled += 1
                data = (json.dumps(rec, ensure_ascii=False, default=str) + "\n").encode()
                os.write(out, data)
                size += len(data)
            os.fsync(out)
        finally:
            os.close(out)
        os.replace(tmp, self.path)
        self._size, self._spill_at, self._spilled = size, spill_at, spilled
        return events

    # --- writing -------------------------------------------------------------------------

    def _open_locked(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
            self._size = os.fstat(self._fd).st_size
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
        try:
            while view:
                n = os.write(fd, view)
                view = view[n:]
        except OSError:
            # A full disk took part of the line: cut it off, or the next line would be
            # glued to it and lost as well.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, self._size)
            raise
        self._size += len(data)
        self._dirty.set()

    def _record(self, event: HookEvent) -> dict[str, Any]:
        return {name: getattr(event, name) for name in _FIELDS}

    def _write_event_locked(self, record: dict[str, Any]) -> bool:
        """Write an event's line; False when the disk refused it. A full disk is logged
        once when it starts and once when it ends, with what it cost (not once a hook)."""
        try:
            self._write_locked(record)
        except OSError as exc:
            if not self._failed:
                log.error(
                    "cannot write the outage journal %s (%s): hook events are kept in memory "
                    "while the queue has room and dropped past it, each one counted",
                    self.path,
                    exc,
                )
            self._failed += 1
            return False
        if self._failed:
            log.warning(
                "the outage journal %s is writable again: %d hook events could not be "
                "written to it (dropped_disk_full + not_durable under ingest in /api/health)",
                self.path,
                self._failed,
            )
            self._failed = 0
        return True

    def append(self, event: HookEvent) -> bool:
        """Journal `event`, once. False when the write failed (logged by the caller's
        count: the event stays in memory only)."""
        with self._lock:
            if id(event) in self._pending:
                return True
            try:
                self._open_locked()
            except OSError as exc:
                log.error("cannot open the outage journal %s: %s", self.path, exc)
                return False
            if not self._write_event_locked({"seq": self._seq + 1, "event": self._record(event)}):
                return False
            self._seq += 1
            self._pending[id(event)] = self._seq
            return True

    def spill(self, event: HookEvent) -> bool:
        """Journal `event` on disk only (the queue is full); False when the write failed."""
        with self._lock:
            try:
                self._open_locked()  # `_size` is the end of the file from here on
            except OSError as exc:
                log.error("cannot open the outage journal %s: %s", self.path, exc)
                return False
            at = self._size
            record = {"seq": self._seq + 1, "spill": 1, "event": self._record(event)}
            if not self._write_event_locked(record):
                return False
            self._seq += 1
            if not self._spilled:
                self._spill_at = at
            self._spilled += 1
            return True

    def unspill(self, n: int) -> list[HookEvent]:
        """Read back the oldest `n` spilled events, in order; they are in memory from now
        on (known by their objects, as appended ones are)."""
        with self._lock:
            if not self._spilled:
                return []
            out: list[HookEvent] = []
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except OSError as exc:
                log.error(
                    "cannot read the outage journal %s back (%s): %d spilled events lost",
                    self.path,
                    exc,
                    self._spilled,
                )
                self.unreadable += self._spilled
                self._spilled = 0
                return []
            next_at = self._size
            try:
                for offset, line in _lines(fd, self._spill_at):
                    if len(out) >= n:
                        next_at = offset
                        break
                    if b'"spill": 1' not in line[:40]:
                        continue  # a done line, or an event already in memory
                    self._spilled -= 1
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        rec = None
                    event = _event(rec)
                    if event is None:
                        self.unreadable += 1
                        continue
                    self._pending[id(event)] = rec["seq"]
                    out.append(event)
            finally:
                os.close(fd)
            if len(out) < n or not self._spilled:
                if self._spilled:  # the file ended first: nothing more can be read back
                    log.error("the outage journal lost %d spilled events", self._spilled)
                    self.unreadable += self._spilled
                self._spilled = 0
            self._spill_at = next_at
            return out

    def done(self, events: Sequence[HookEvent]) -> None:
        """These events are in the database (or refused by it): never replay them."""
        with self._lock:
            seqs = [s for e in events if (s := self._pending.pop(id(e), None)) is not None]
            if not seqs:
                return
            try:
                if self._pending or self._spilled:
                    self._write_locked({"done": seqs})
                else:
                    self._truncate_locked()  # nothing pending: start the next outage afresh
            except OSError as exc:
                log.error("cannot write the outage journal %s: %s", self.path, exc)

    def _truncate_locked(self) -> None:
        self._size = self._spill_at = 0
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
        else:
            with contextlib.suppress(FileNotFoundError):
                if self.path.stat().st_size:
                    os.truncate(self.path, 0)

    # --- state ---------------------------------------------------------------------------

    def has(self, event: HookEvent) -> bool:
        with self._lock:
            return id(event) in self._pending

    def pending(self) -> int:
        """Events journalled and in memory, not yet written."""
        with self._lock:
            return len(self._pending)

    def spilled(self) -> int:
        """Events on disk only, not yet read back."""
        with self._lock:
            return self._spilled

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


class Spool:
    """Hook bodies over 1 MiB, each in a file of its own (0600, in a 0700 dir) from before
    the hook is answered until its event is committed or journalled. No fsync: like the
    journal, it holds against `kill -9`, the power cut is the fsync policy's."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def put(self, body: bytes, source: str | None) -> Path | None:
        """`body` on disk; None when it cannot be written (a full disk: logged)."""
        name = f"{time.time_ns():020d}-{secrets.token_hex(4)}.json"
        target = self.path / name
        head = (json.dumps({"source": source}) + "\n").encode()
        try:
            self.path.mkdir(mode=0o700, exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
            try:
                view = memoryview(head + body)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
        except OSError as exc:
            log.error("cannot keep a %d-byte hook body on disk (%s): %s", len(body), target, exc)
            with contextlib.suppress(OSError):
                target.unlink()
            return None
        return target

    def remove(self, held: Path) -> None:
        with contextlib.suppress(OSError):
            held.unlink()

    def held(self) -> list[Path]:
        """The bodies left by a process that died before their events were kept."""
        try:
            return sorted(p for p in self.path.iterdir() if p.suffix == ".json")
        except OSError:
            return []

    @staticmethod
    def read(held: Path) -> tuple[bytes, str | None] | None:
        try:
            data = held.read_bytes()
        except OSError:
            return None
        head, _, body = data.partition(b"\n")
        try:
            source = json.loads(head).get("source")
        except (ValueError, AttributeError):
            return None
        return body, source if isinstance(source, str) else None
