"""Context occupancy from agent transcripts (design §2.12; docs/sensors.md, "The
transcript tailer", gives what each agent's lines count for).

Two layers: pure parsers over decoded JSON objects (`parse_claude_usage_lines`,
`parse_codex_usage_lines`), shared by the live tailer and by replay; and `TranscriptTailer`,
which reads the new complete lines of a transcript incrementally, at most a small slice on
the hook's critical path, and hands the rest of a large backlog to a background thread.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from tma1.adapters.agents import SPECS
from tma1.clock import Clock, epoch_ms
from tma1.counters import Counters
from tma1.events import TURN_END, Usage
from tma1.sensors.turn_ends import CLAUDE_INTERRUPTED, claude_interrupted, turn_end
from tma1.store import Store

log = logging.getLogger("tma1.sensors.transcripts")

INLINE_BYTES = 256 * 1024
CHUNK_BYTES = 4 * 1024 * 1024
MAX_SEEN_KEYS = 200_000
MAX_FILES = 2_000
TAIL_BYTES = 64


def open_regular(path: str | os.PathLike[str]) -> BinaryIO | None:
    """`path` opened for reading if it is a regular file; else None (missing, unreadable,
    a FIFO, a device, a socket, a directory).

    A hook names the path, and an `open` of a FIFO with no writer blocks its thread for
    good (32 such hooks held every ingest worker). So: stat first; open with O_NONBLOCK
    (a FIFO or device swapped in after the stat cannot block the open); fstat what was
    opened. O_NONBLOCK changes nothing for the reads of a regular file; callers bound
    each read in bytes."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return os.fdopen(fd, "rb")
    except OSError:
        pass
    os.close(fd)
    return None


def _ts(obj: dict[str, Any], default_ts: int) -> int:
    ts = epoch_ms(obj.get("timestamp"))
    return default_ts if ts is None else ts


def _int(value: Any) -> int:
    """A token count: a non-negative int, 0 for anything that is not a number."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return max(0, int(value))
    return 0


# --- Claude Code ---------------------------------------------------------------------------


def claude_usage_key(obj: dict[str, Any]) -> str | None:
    """The dedup key of an assistant line: `message.id|requestId` (either may be missing)."""
    msg = obj.get("message")
    mid = msg.get("id") if isinstance(msg, dict) else None
    rid = obj.get("requestId")
    if not mid and not rid:
        uuid = obj.get("uuid")
        return f"uuid:{uuid}" if isinstance(uuid, str) else None
    return f"{mid or ''}|{rid or ''}"


def parse_claude_usage_lines(
    objs: Iterable[Any],
    *,
    session_id: str | None = None,
    seen: set[str] | None = None,
    default_ts: int = 0,
) -> list[Usage]:
    """Usage rows of the main chain, one per API response, in file order; a compaction
    and a user interruption (`TURN_END`) are rows of their own kind.

    `seen` carries dedup keys across calls (the tailer passes its per-file set; the first
    line of a response wins, all its lines carry the same prompt size). `session_id` None
    takes each line's own `sessionId`. Lines without a timestamp get `default_ts`.
    """
    seen = set() if seen is None else seen
    out: list[Usage] = []
    for obj in objs:
        if not isinstance(obj, dict):
            continue
        kind = obj.get("type")
        if obj.get("isSidechain") is True:
            continue
        sid = session_id or obj.get("sessionId")
        if not isinstance(sid, str) or not sid:
            continue
        if (kind == "system" and obj.get("subtype") == "compact_boundary") or (
            # Claude Code 1.0.x notes a compaction only as the summary it starts over with.
            kind == "user" and obj.get("isCompactSummary") is True
        ):
            ts = _ts(obj, default_ts)
            compact_key = f"compact:{obj.get('uuid') or ts}"
            if compact_key in seen:
                continue
            seen.add(compact_key)
            # The context was just replaced by a summary: its size is unknown until the next
            # request reports it, and it is certainly not the pre-compaction size.
            out.append(
                Usage(ts=ts, session_id=sid, occupancy=0, kind="compaction", message_id=compact_key)
            )
            continue
        if kind == "user" and claude_interrupted(obj.get("message")):
            ts = _ts(obj, default_ts)
            end_key = str(obj.get("uuid") or ts)
            if f"{TURN_END}:{end_key}" not in seen:
                seen.add(f"{TURN_END}:{end_key}")
                out.append(turn_end(ts, sid, end_key))
            continue
        if kind != "assistant":
            continue
        msg = obj.get("message")
        if not isinstance(msg, dict):
            continue
        usage = msg.get("usage")
        if not isinstance(usage, dict):
            continue
        model = msg.get("model") if isinstance(msg.get("model"), str) else None
        if model == "<synthetic>":
            continue  # a client-made message (API error, interruption): no request was sent
        key = claude_usage_key(obj)
        if key is None or key in seen:
            continue
        seen.add(key)
        inp = _int(usage.get("input_tokens"))
        cr = _int(usage.get("cache_read_input_tokens"))
        cc = _int(usage.get("cache_creation_input_tokens"))
        out.append(
            Usage(
                ts=_ts(obj, default_ts),
                session_id=sid,
                occupancy=inp + cr + cc,
                input_tokens=inp,
                cache_read_tokens=cr,
                cache_creation_tokens=cc,
                output_tokens=_int(usage.get("output_tokens")),
                model=model,
                message_id=msg.get("id") if isinstance(msg.get("id"), str) else key,
            )
        )
    return out


# --- Codex --------------------------------------------------------------------------------


@dataclass(slots=True)
class CodexState:
    """What a Codex rollout parser carries from one slice of lines to the next."""

    session_id: str | None = None
    model: str | None = None
    last_total: tuple[int, ...] | None = None
    compactions: int = 0
    turn_ends: int = 0
    context_window: int | None = None  # token_count's `model_context_window`


def parse_codex_usage_lines(
    objs: Iterable[Any],
    *,
    session_id: str | None = None,
    state: CodexState | None = None,
    default_ts: int = 0,
) -> list[Usage]:
    """Usage rows from a Codex rollout: occupancy = `last_token_usage.input_tokens`; a
    compaction and a `turn_aborted` event (the user interrupted the turn: Codex sends no
    hook for it) are rows of their own kind.

    `cached_input_tokens` is a subset of `input_tokens`: it is stored as cache_read and
    the rest as input, so input + cache_read = occupancy as for Claude.
    """
    state = CodexState() if state is None else state
    out: list[Usage] = []
    for obj in objs:
        if not isinstance(obj, dict):
            continue
        kind, payload = obj.get("type"), obj.get("payload")
        if not isinstance(payload, dict):
            payload = {}
        if kind == "session_meta":
            pid = payload.get("id")
            if isinstance(pid, str) and state.session_id is None:
                state.session_id = pid
            continue
        if kind == "turn_context":
            model = payload.get("model")
            if isinstance(model, str):
                state.model = model
            continue
        sid = session_id or state.session_id
        if not sid:
            continue
        ptype = payload.get("type")
        if kind == "compacted" or (kind == "event_msg" and ptype == "context_compacted"):
            state.compactions += 1
            state.last_total = None
            out.append(
                Usage(
                    ts=_ts(obj, default_ts),
                    session_id=sid,
                    occupancy=0,
                    kind="compaction",
                    model=state.model,
                    message_id=f"compact:{state.compactions}",
                    context_window=state.context_window,
                )
            )
            continue
        if kind == "event_msg" and ptype == "turn_aborted":
            state.turn_ends += 1
            ts = _ts(obj, default_ts)
            out.append(turn_end(ts, sid, f"{ts}:{state.turn_ends}", state.model))
            continue
        if kind != "event_msg" or ptype != "token_count":
            continue
        info = payload.get("info")
        if not isinstance(info, dict):
            continue
        if window := _int(info.get("model_context_window")):
            state.context_window = window
        last = info.get("last_token_usage")
        if not isinstance(last, dict):
            continue
        total = info.get("total_token_usage")
        total_key: tuple[int, ...] | None = None
        if isinstance(total, dict):
            total_key = (
                _int(total.get("input_tokens")),
                _int(total.get("cached_input_tokens")),
                _int(total.get("output_tokens")),
                _int(total.get("total_tokens")),
            )
            if total_key == state.last_total:
                continue  # the same request reported again
            state.last_total = total_key
        inp = _int(last.get("input_tokens"))
        cached = min(inp, _int(last.get("cached_input_tokens")))
        out.append(
            Usage(
                ts=_ts(obj, default_ts),
                session_id=sid,
                occupancy=inp,
                input_tokens=inp - cached,
                cache_read_tokens=cached,
                output_tokens=_int(last.get("output_tokens")),
                model=state.model,
                message_id=f"codex:{total_key[-1]}" if total_key else None,
                context_window=state.context_window,
            )
        )
    return out


_CODEX_TYPES = frozenset(
    {"session_meta", "turn_context", "event_msg", "response_item", "compacted"}
)


def detect_format(obj: Any) -> str | None:
    """'codex' for a rollout line ({timestamp, type, payload}), 'claude' for a transcript line."""
    if not isinstance(obj, dict):
        return None
    if obj.get("type") in _CODEX_TYPES and "payload" in obj:
        return "codex"
    if "sessionId" in obj or "uuid" in obj or "message" in obj:
        return "claude"
    return None


# Lines the parsers could use; anything else is skipped without being decoded (most of a
# transcript's bytes are tool output on user lines).
_CLAUDE_MARKERS = (
    b'"usage"', b"compact_boundary", b"isCompactSummary", CLAUDE_INTERRUPTED.encode()
)  # fmt: skip
_CODEX_MARKERS = (
    b"token_count", b'"turn_context"', b'"session_meta"', b"compacted", b"turn_aborted"
)  # fmt: skip


def wanted_lines(chunk: bytes, fmt: str) -> list[bytes]:
    """The lines of `chunk` holding a marker, in file order. The markers are found with
    `bytes.find` over the whole chunk, so the many lines without one cost no Python step."""
    markers = _CODEX_MARKERS if fmt == "codex" else _CLAUDE_MARKERS
    spans: dict[int, int] = {}
    for marker in markers:
        i = chunk.find(marker)
        while i != -1:
            start = chunk.rfind(b"\n", 0, i) + 1
            end = chunk.find(b"\n", i)
            if end == -1:
                end = len(chunk)
            spans[start] = end
            i = chunk.find(marker, end)
    return [chunk[a : spans[a]] for a in sorted(spans)]


_REQUEST_ID = b'"requestId":"'


def _request_id(line: bytes) -> bytes | None:
    """The top-level requestId of a Claude line, read without decoding it. Inside a JSON
    string the quotes would be escaped, so the raw sequence only occurs as a key."""
    i = line.find(_REQUEST_ID)
    if i < 0:
        return None
    start = i + len(_REQUEST_ID)
    end = line.find(b'"', start)
    return line[start:end] if end > start else None


def _codex_repeat(state: _FileState, raw: bytes) -> bool:
    """True when `raw` repeats the previous line of its kind byte for byte after the
    timestamp (so parsing it would change nothing)."""
    i = raw.find(b'"payload"')
    if i < 0:
        return False
    if b"compacted" in raw:
        state.codex_raw.clear()  # after a compaction the same numbers count again
        return False
    kind = b"turn" if b'"turn_context"' in raw[:i] else b"token" if b"token_count" in raw else None
    if kind is None:
        return False
    body = raw[i:]
    if state.codex_raw.get(kind) == body:
        return True
    state.codex_raw[kind] = body
    return False


def _is_main_usage(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and obj.get("type") == "assistant"
        and obj.get("isSidechain") is not True
        and isinstance(obj.get("message"), dict)
        and isinstance(obj["message"].get("usage"), dict)
    )


# --- the tailer ---------------------------------------------------------------------------


@dataclass
class _FileState:
    path: str
    session_id: str
    fmt: str | None
    offset: int = 0
    dev: int = -1
    ino: int = -1
    seen: set[str] = field(default_factory=set)
    codex: CodexState = field(default_factory=CodexState)
    lock: threading.Lock = field(default_factory=threading.Lock)
    tail: bytes = b""  # the last bytes consumed, to notice an in-place rewrite
    requests: set[bytes] = field(default_factory=set)  # Claude requestIds already counted
    # The last raw payload of each Codex line kind: Codex writes every token_count twice
    # and repeats the same turn_context each turn.
    codex_raw: dict[bytes, bytes] = field(default_factory=dict)


@dataclass(kw_only=True, eq=False)
class TranscriptTailer:
    """Incremental reader of transcripts named by hook events; thread-safe."""

    store: Store
    clock: Clock
    counters: Counters
    on_session_change: Callable[[str], None]
    inline_bytes: int = INLINE_BYTES
    chunk_bytes: int = CHUNK_BYTES
    _files: OrderedDict[str, _FileState] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _queue: queue.Queue[str | None] = field(default_factory=queue.Queue)
    _queued: set[str] = field(default_factory=set)
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    # --- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._background, name="tma1-transcripts", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=5)
            self._thread = None

    def health(self) -> dict[str, object]:
        with self._lock:
            return {"transcripts": len(self._files), "backlog": len(self._queued)}

    # --- the hook path -------------------------------------------------------------------

    def notice(self, session_id: str, path: str, agent_source: str | None = None) -> None:
        """Read what is new in `path` now, up to the inline budget; queue the rest."""
        state = self._state(session_id, path, agent_source)
        if not state.lock.acquire(blocking=False):
            self._enqueue(path)  # the background reader is on it; it re-checks when done
            return
        try:
            more = self._read(state, self.inline_bytes)
        finally:
            state.lock.release()
        if more:
            self._enqueue(path)

    def catch_up(self, session_id: str, path: str, agent_source: str | None = None) -> None:
        """Read everything that is new (tests, benchmarks, replay of a live file)."""
        state = self._state(session_id, path, agent_source)
        with state.lock:
            while self._read(state, self.chunk_bytes):
                pass

    def _state(self, session_id: str, path: str, agent_source: str | None) -> _FileState:
        with self._lock:
            state = self._files.get(path)
            if state is None:
                # The agent's transcript format (its AgentSpec), else told by content.
                spec = SPECS.get(agent_source or "")
                fmt = spec.transcript if spec is not None else None
                state = _FileState(path=path, session_id=session_id, fmt=fmt)
                self._files[path] = state
                while len(self._files) > MAX_FILES:
                    self._files.popitem(last=False)
            else:
                self._files.move_to_end(path)
                state.session_id = session_id
            return state

    def _enqueue(self, path: str) -> None:
        with self._lock:
            if path in self._queued:
                return
            self._queued.add(path)
        self.counters.inc("transcripts.background")
        self._queue.put(path)

    def _background(self) -> None:
        while not self._stop.is_set():
            path = self._queue.get()
            if path is None:
                return
            with self._lock:
                self._queued.discard(path)
                state = self._files.get(path)
            if state is None:
                continue
            try:
                with state.lock:
                    while not self._stop.is_set() and self._read(state, self.chunk_bytes):
                        pass
            except Exception:
                self.counters.inc("errors.transcripts")
                log.exception("background transcript read failed: %s", path)

    # --- reading -------------------------------------------------------------------------

    def _read(self, state: _FileState, budget: int) -> bool:
        """Consume up to `budget` bytes of complete lines. True when more is waiting."""
        try:
            st = os.stat(state.path)
        except (OSError, ValueError):
            return False
        if not stat.S_ISREG(st.st_mode):
            return False  # a FIFO or a device never ends, and may never answer
        if (st.st_dev, st.st_ino) != (state.dev, state.ino) or st.st_size < state.offset:
            if state.ino != -1:
                # Rotated or truncated: start over; the dedup keys stop a rewrite of the same
                # responses from counting twice.
                self.counters.inc("transcripts.rewound")
            state.dev, state.ino, state.offset = st.st_dev, st.st_ino, 0
        fh = open_regular(state.path)
        if fh is None:
            return False
        try:
            with fh:
                if state.offset and state.tail:
                    # Rewritten in place to the same size or longer: the bytes before our
                    # offset are no longer the ones we read.
                    fh.seek(state.offset - len(state.tail))
                    if fh.read(len(state.tail)) != state.tail:
                        self.counters.inc("transcripts.rewound")
                        state.offset = 0
                if st.st_size <= state.offset:
                    return False
                fh.seek(state.offset)
                data = fh.read(min(budget, st.st_size - state.offset))
                end = data.rfind(b"\n")
                if end < 0 and len(data) == budget:
                    # One line longer than the budget: finish it (the background reader
                    # takes over when this was the inline slice).
                    if budget < self.chunk_bytes:
                        return True
                    rest = fh.readline()
                    if not rest.endswith(b"\n"):
                        return False  # still being written
                    data += rest
                    end = len(data) - 1
        except OSError:
            return False
        if end < 0:
            return False  # a partial last line: wait for its newline
        chunk = data[: end + 1]
        state.offset += len(chunk)
        state.tail = chunk[-TAIL_BYTES:]
        self.counters.inc("transcripts.bytes", len(chunk))
        usages = self._parse(state, chunk)
        if usages:
            self.store.insert_usages(usages)
            self.counters.inc("transcripts.rows", len(usages))
            self.on_session_change(state.session_id)
        return state.offset < st.st_size

    def _parse(self, state: _FileState, chunk: bytes) -> list[Usage]:
        objs: list[Any] = []
        pos = 0
        while state.fmt is None and pos < len(chunk):
            # Until the format is known, decode line by line from the top.
            end = chunk.find(b"\n", pos)
            end = len(chunk) if end == -1 else end
            raw, pos = chunk[pos:end], end + 1
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError:
                self.counters.inc("transcripts.bad_lines")
                continue
            state.fmt = detect_format(obj)
            if state.fmt is not None:
                objs.append(obj)
        if state.fmt is not None and pos < len(chunk):
            for raw in wanted_lines(chunk[pos:], state.fmt):
                rid = _request_id(raw) if state.fmt == "claude" else None
                if rid is not None and rid in state.requests:
                    continue  # another line of a response already counted: not decoded
                if state.fmt == "codex" and _codex_repeat(state, raw):
                    continue
                try:
                    obj = json.loads(raw)
                except ValueError:
                    self.counters.inc("transcripts.bad_lines")
                    continue
                objs.append(obj)
                if rid is not None and _is_main_usage(obj):
                    state.requests.add(rid)
        if not objs:
            return []
        now = self.clock.now_ms()
        if state.fmt == "codex":
            return parse_codex_usage_lines(
                objs, session_id=state.session_id, state=state.codex, default_ts=now
            )
        if len(state.seen) > MAX_SEEN_KEYS:
            state.seen.clear()
            state.requests.clear()
        return parse_claude_usage_lines(
            objs, session_id=state.session_id, seen=state.seen, default_ts=now
        )
