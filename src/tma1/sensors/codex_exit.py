"""What a Codex session's rollout says of a call that its hook does not: a shell call's
exit status (design §2.18) and the lines an apply_patch call wrote (docs/hooks.md, "Codex:
the exit status of a shell call", gives the rollout's formats and the wait policy).

Only the tail of the file is read, and only the lines that contain the call id are decoded.
The caller bounds the wait (`WAIT_S`) for an item not written yet.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from tma1.adapters.agents import SPECS
from tma1.events import EDITED_LINES, HookEvent
from tma1.sensors.transcripts import open_regular
from tma1.storable.editlines import WHOLE_FILE, diff_ranges

T = TypeVar("T")

TAIL_BYTES = 128 * 1024
# A command's item holds its whole output: reach back this far for the start of its line.
MAX_LINE_BYTES = 8 * 1024 * 1024
# The longest a hook waits for an item Codex has not written yet, and how often it looks.
WAIT_S = 0.25
POLL_S = 0.02

# A rollout that has never shown a call's end after this many looks is not waited on
# again (a Codex whose rollout says it some other way must not cost every shell call the
# whole wait): one look, no wait.
MISSES_BEFORE_NO_WAIT = 2
_TRACKED_MAX = 1024

_EXITED = re.compile(r"(?:Process exited with code|Exit code:)\s*(-?\d+)")


@dataclass(frozen=True, slots=True)
class CommandEnd:
    """How a shell call ended: `exit_code` (None when the item has none) and Codex's
    `status` ("completed", "failed", "declined", …; None when the item has none)."""

    exit_code: int | None
    status: str | None
    # "item": the command-end item; "output": the call's output text (a fallback).
    source: str = "item"

    @property
    def failed(self) -> bool:
        if self.exit_code is not None:
            return self.exit_code != 0
        return self.status == "failed"


class WaitPolicy:
    """How long the next look into a rollout may wait: the full `wait_s` while the
    rollout has shown an end before (or has been asked fewer than
    `MISSES_BEFORE_NO_WAIT` times); 0 once it has only ever missed. Thread-safe enough:
    a lost update only costs one wait more or less."""

    def __init__(self, wait_s: float = WAIT_S) -> None:
        self.wait_s = wait_s
        self._seen: dict[str, tuple[bool, int]] = {}  # path -> (found once, misses)

    async def look(self, read: Callable[[str, str], T | None], path: str, call_id: str) -> T | None:
        """`await_found` for as long as this policy lets the rollout at `path` wait; the
        outcome is recorded."""
        was_found, misses = self._seen.get(path, (False, 0))
        wait_s = self.wait_s if was_found or misses < MISSES_BEFORE_NO_WAIT else 0.0
        found = await await_found(read, path, call_id, wait_s=wait_s)
        was_found, misses = self._seen.pop(path, (False, 0))
        self._seen[path] = (was_found or found is not None, misses + (found is None))
        if len(self._seen) > _TRACKED_MAX:
            del self._seen[next(iter(self._seen))]  # the least recently asked
        return found


def _codex_post(event: HookEvent) -> bool:
    """A PostToolUse of an agent whose transcript is a Codex rollout (its AgentSpec)."""
    spec = SPECS.get(event.agent_source or "")
    return (
        spec is not None
        and spec.transcript == "codex"
        and event.event_type == "PostToolUse"
        and bool(event.tool_use_id)
        and bool(event.transcript_path)
    )


def wants_exit_status(event: HookEvent) -> bool:
    """A Codex shell PostToolUse whose response did not already say it failed."""
    return (
        _codex_post(event)
        and event.tool_command is not None
        # A refused call (unsuccessful, no failure kind) ran nothing; a masked failure
        # (markers in the output) is made an exit failure by a non-zero status.
        and (event.tool_success is not False or event.failure_kind == "masked")
    )


def wants_patch_lines(event: HookEvent) -> bool:
    """A Codex apply_patch PostToolUse that applied, whose lines are not known yet."""
    return (
        _codex_post(event)
        and event.tool_name == "apply_patch"
        and event.tool_success is True
        and EDITED_LINES not in event.metadata
    )


def _int(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def _completed_item(payload: Any, call_id: str, types: tuple[str, str]) -> dict[str, Any] | None:
    """The item of an `item_completed` payload for `call_id`, of one of `types`."""
    if not isinstance(payload, dict) or payload.get("type") != "item_completed":
        return None
    item = payload.get("item")
    if not isinstance(item, dict) or item.get("id") != call_id:
        return None
    return item if item.get("type") in types else None


def command_end(line: dict[str, Any], call_id: str) -> CommandEnd | None:
    """The command end that one rollout line records for `call_id`, if it is one."""
    payload = line.get("payload")
    if not isinstance(payload, dict):
        return None
    kind = payload.get("type")
    if kind == "item_completed":
        item = _completed_item(payload, call_id, ("CommandExecution", "commandExecution"))
        if item is None:
            return None
        code, status = _int(item.get("exit_code", item.get("exitCode"))), item.get("status")
    elif kind == "exec_command_end" and payload.get("call_id") == call_id:
        code, status = _int(payload.get("exit_code")), payload.get("status")
    elif kind == "function_call_output" and payload.get("call_id") == call_id:
        return _output_end(payload.get("output"))
    else:
        return None
    status = status if isinstance(status, str) else None
    if code is None and status is None:
        return None
    return CommandEnd(code, status)


def _output_end(output: Any) -> CommandEnd | None:
    data: Any = output
    if isinstance(output, str) and output.startswith("{"):
        try:
            data = json.loads(output)
        except ValueError:
            data = output
    if isinstance(data, dict):
        meta = data.get("metadata")
        code = _int(meta.get("exit_code")) if isinstance(meta, dict) else None
        if code is not None:
            return CommandEnd(code, None, "output")
        data = data.get("output")
    if not isinstance(data, str):
        return None
    m = _EXITED.search(data[:400])
    return CommandEnd(int(m.group(1)), None, "output") if m else None


def read_command_end(
    path: str | os.PathLike[str], call_id: str, *, tail_bytes: int = TAIL_BYTES
) -> CommandEnd | None:
    """The end of call `call_id` in the rollout at `path`, from the file's tail; None when
    the file is missing or unreadable or holds no end of that call there (yet). The
    command-end item wins over the call's output line (written after the hook, and only
    as text)."""
    fallback: CommandEnd | None = None
    for line in _call_lines(path, call_id, tail_bytes):
        found = command_end(line, call_id)
        if found is not None and found.source == "item":
            return found
        fallback = fallback or found
    return fallback


# Per file path: the line ranges a patch wrote (None: unknown).
PatchLines = dict[str, list[tuple[int, int]] | None]


def patch_lines(line: dict[str, Any], call_id: str) -> PatchLines | None:
    """Per file, the line ranges an apply_patch call wrote, if `line` is that call's
    file-change item (Codex 0.17x: `item_completed` of a `FileChange` whose `changes` map
    each path to its `unified_diff`); a new file is wholly written, a deleted one is left
    out, a diff without hunks is unknown (None)."""
    item = _completed_item(line.get("payload"), call_id, ("FileChange", "fileChange"))
    if item is None or not isinstance(item.get("changes"), dict):
        return None
    lines: PatchLines = {}
    for path, change in item["changes"].items():
        if not isinstance(change, dict):
            continue
        kind, diff = change.get("type"), change.get("unified_diff")
        if kind == "add":
            lines[path] = [WHOLE_FILE]
        elif kind == "update":
            lines[path] = diff_ranges(diff) if isinstance(diff, str) else None
    return lines


def read_patch_lines(
    path: str | os.PathLike[str], call_id: str, *, tail_bytes: int = TAIL_BYTES
) -> PatchLines | None:
    """`patch_lines` of call `call_id` in the rollout at `path`; None when not found."""
    for line in _call_lines(path, call_id, tail_bytes):
        found = patch_lines(line, call_id)
        if found is not None:
            return found
    return None


def _call_lines(
    path: str | os.PathLike[str], call_id: str, tail_bytes: int
) -> Iterator[dict[str, Any]]:
    """The complete lines of the rollout's tail that name `call_id`, newest first, decoded;
    nothing when the file is missing or unreadable.

    The tail is widened back to the start of the line it begins inside (at most
    `MAX_LINE_BYTES`): a command item holds the whole output after its id, so a long one
    names the call only near its start. A line still being written is not read."""
    needle = json.dumps(call_id).encode("utf-8")
    f = open_regular(path)  # never a FIFO: the read runs on the server's event loop
    if f is None:
        return
    try:
        with f:
            size = os.fstat(f.fileno()).st_size
            start = max(0, size - tail_bytes)
            f.seek(start)
            data = f.read(size - start)
            widened, step = 0, 8 * 1024
            while start > 0 and widened < MAX_LINE_BYTES:
                step = min(start, step * 2)  # 16 KB, 32 KB, …: most cuts are near a newline
                f.seek(start - step)
                chunk = f.read(step)
                start -= step
                widened += step
                nl = chunk.rfind(b"\n")
                data = chunk[nl + 1 :] + data  # all of it when there is no newline
                if nl != -1:
                    break
            else:
                if start > 0:  # a line longer than we ever read: skip its head
                    data = data[data.find(b"\n") + 1 :]
    except OSError:
        return
    pos = data.rfind(needle)
    while pos != -1:
        line_start = data.rfind(b"\n", 0, pos) + 1
        line_end = data.find(b"\n", pos)
        if line_end != -1:
            try:
                line = json.loads(data[line_start:line_end])
            except ValueError:
                line = None
            if isinstance(line, dict):
                yield line
        pos = data.rfind(needle, 0, line_start)


async def await_found(
    read: Callable[[str, str], T | None],
    path: str,
    call_id: str,
    *,
    wait_s: float = WAIT_S,
    poll_s: float = POLL_S,
) -> T | None:
    """`read(path, call_id)` (`read_command_end`, `read_patch_lines`), looking again every
    `poll_s` for at most `wait_s`, on the event loop: each look is one small read of the
    file's tail; between looks the loop serves other hooks. No wait when the file does not
    exist."""
    if not os.path.isfile(path):
        return None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while True:
        found = read(path, call_id)
        if found is not None or loop.time() + poll_s > deadline:
            return found
        await asyncio.sleep(poll_s)
