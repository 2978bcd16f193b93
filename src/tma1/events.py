"""Hook payload → `HookEvent`: lenient parsing, derived fields, failure detection.

Claude Code and Codex differ by version (docs/agent-protocols.md): unknown fields are kept
in `metadata`, missing optional fields are None, and only the two fields without which an
event means nothing (`session_id`, `hook_event_name`) are required.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

from tma1.checks import (
    check_of,
    error_line,
    extract_passed_ids,
    extract_test_ids,
    failure_kind_of_exit,
    masked_kind,
)
from tma1.storable.caps import cap_text as cap_text
from tma1.storable.caps import capped_metadata, capped_text, clip_value, to_text
from tma1.storable.caps import json_text as json_text
from tma1.storable.editlines import edited_lines

TOOL_INPUT_CAP = 8 * 1024
TOOL_RESULT_CAP = 16 * 1024
# Every other text a hook names freely is capped too (docs/reliability.md, "Field caps"):
# a path at PATH_MAX, a command at 16 KB, a list's items at 64 K characters together, and
# the indexed `project` key at 1 KB (PostgreSQL's btree holds an entry of at most 2,704
# bytes; `key_text` keeps two long projects apart by a hash).
PATH_CAP = 4096
COMMAND_CAP = 16 * 1024
SUMMARY_CAP = 4096
LIST_CAP = 64 * 1024
KEY_CAP = 1024
FIELD_CAPS = {
    "tool_input": TOOL_INPUT_CAP,
    "tool_result": TOOL_RESULT_CAP,
    "tool_file_path": PATH_CAP,
    "tool_command": COMMAND_CAP,
    "tool_error_summary": SUMMARY_CAP,
    "cwd": PATH_CAP,
    "transcript_path": PATH_CAP,
}
LIST_FIELDS = ("tool_files", "test_ids", "passed_test_ids")
CUT_MARK = "…[truncated]"
COMMAND_PREFIX_LEN = 60

WRITE_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit", "apply_patch"})
READ_TOOLS = frozenset({"Read", "NotebookRead"})
# Metadata key of the line ranges an edit wrote (`tma1.storable.editlines`).
EDITED_LINES = "edited_lines"
SHELL_TOOLS = frozenset({"Bash", "shell", "local_shell", "exec_command", "shell_command"})
# A compaction hook: `PreCompact`/`PostCompact`, or a `SessionStart` whose source is
# COMPACT_SOURCE (Claude Code's start of the compacted conversation). The store's SQL
# (`Store.latest_compaction_ts`) and the follow gate read these too.
COMPACTION_HOOKS = frozenset({"PreCompact", "PostCompact"})
COMPACT_SOURCE = "compact"

_STRING_FIELDS = (
    "session_id",
    "hook_event_name",
    "tool_name",
    "tool_use_id",
    "cwd",
    "transcript_path",
    "permission_mode",
)
# Fields that become columns (or drive delivery); everything else goes into metadata.
_KNOWN_FIELDS = frozenset(_STRING_FIELDS) | {
    "tool_input",
    "tool_response",
    "tool_result",
    "error",
    "duration_ms",
    "ts",
    "agent_id",
    "agent_type",
}


class PayloadError(ValueError):
    """The payload cannot become an event. `reason` is a short counter key."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(slots=True)
class HookEvent:
    ts: int
    session_id: str
    event_type: str
    hook_event_name: str
    agent_source: str = "claude-code"
    tool_name: str | None = None
    tool_use_id: str | None = None
    tool_input: str | None = None
    tool_result: str | None = None
    tool_file_path: str | None = None
    tool_files: list[str] = field(default_factory=list)
    tool_command: str | None = None
    tool_command_prefix: str | None = None
    tool_success: bool | None = None
    # "exit" | "masked" | None, or a failed call that is no failure of a check, no
    # verdict (design §2.15, §2.21): "invocation" | "no_verdict" | "coverage" |
    # "interrupted" | "fixed".
    failure_kind: str | None = None
    tool_error_summary: str | None = None
    test_ids: list[str] = field(default_factory=list)
    cwd: str | None = None
    project: str | None = None
    transcript_path: str | None = None
    permission_mode: str | None = None
    duration_ms: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    id: int | None = None
    # Tests and test files the output reports passing (closes a stuck test, §2.15).
    passed_test_ids: list[str] = field(default_factory=list)
    # Claude Code sub-agent hooks carry these; None on the main agent (lanes, §2.16).
    agent_id: str | None = None
    agent_type: str | None = None

    @property
    def is_failure(self) -> bool:
        """Native failure, derived exit failure, or a masked one (design §2.8)."""
        return self.event_type == "PostToolUseFailure" or self.failure_kind == "masked"

    @property
    def lane(self) -> str:
        """The agent within the session: a sub-agent's id, or "" for the main agent."""
        return self.agent_id or ""

    @property
    def is_success(self) -> bool:
        """A tool result that no rule may count as a failure (resolution checks use it)."""
        return self.event_type == "PostToolUse" and self.tool_success is True

    @property
    def is_shell(self) -> bool:
        return self.tool_name in SHELL_TOOLS

    @property
    def stop_hook_active(self) -> bool:
        return bool(self.metadata.get("stop_hook_active"))


def keeps_metadata(ev: HookEvent) -> bool:
    """The engine's lean window read keeps this event's metadata: a Stop's (its final
    message) and an edit's (the lines it wrote). `Store.window_events` says the same in SQL."""
    return ev.hook_event_name == "Stop" or ev.tool_name in WRITE_TOOLS


# --- helpers ---------------------------------------------------------------------------


def is_compaction_hook(hook_event_name: str | None, source: object = None) -> bool:
    """A hook that marks a compaction (COMPACTION_HOOKS, or a SessionStart from one)."""
    return hook_event_name in COMPACTION_HOOKS or (
        hook_event_name == "SessionStart" and source == COMPACT_SOURCE
    )


def command_prefix(command: str | None) -> str | None:
    if not command:
        return None
    return " ".join(command.split())[:COMMAND_PREFIX_LEN] or None


@lru_cache(maxsize=4096)
def project_for(cwd: str) -> str:
    """The git top-level of `cwd`, or `cwd` itself (design §2.9). Never a basename."""
    path = cwd.rstrip("/\\") or cwd
    probe = path
    for _ in range(64):
        if os.path.exists(os.path.join(probe, ".git")):
            return probe
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    return path


_SHELLS = ("bash", "sh", "zsh")


def shell_script(cmd: Any) -> str | None:
    """A command as the script a human reads: a string as it is, argv joined (Codex sends
    argv; `bash -lc "<script>"` is the script the user sees)."""
    if isinstance(cmd, list) and all(isinstance(c, str) for c in cmd):
        if len(cmd) >= 3 and cmd[1] in ("-c", "-lc") and cmd[0].rsplit("/", 1)[-1] in _SHELLS:
            return cmd[2]
        return shlex.join(cmd)
    return cmd if isinstance(cmd, str) else None


_PATCH_FILE = re.compile(
    r"^\*\*\* (?:Update|Add|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$", re.MULTILINE
)


def patch_files(patch: str, cwd: str | None) -> list[str]:
    """Files an apply_patch envelope touches, made absolute against `cwd`."""
    out: dict[str, None] = {}
    for m in _PATCH_FILE.finditer(patch):
        p = (m.group(1) or m.group(2)).strip()
        out.setdefault(absolutize(p, cwd), None)
    return list(out)


def absolutize(path: str, cwd: str | None) -> str:
    if PurePosixPath(path).is_absolute() or PureWindowsPath(path).is_absolute() or not cwd:
        return path
    return os.path.normpath(os.path.join(cwd, path))


def _response_text(resp: Any, clip_at: int | None = None) -> str | None:
    """The human-readable output of a tool response (stdout + stderr for Bash).

    `clip_at`: the caller keeps at most that many bytes, so structured parts are encoded
    only that far (see `clip_value`); strings are returned whole either way."""
    if resp is None:
        return None
    if isinstance(resp, str):
        return resp
    if clip_at is not None:
        resp = clip_value(resp, clip_at)
    if isinstance(resp, dict):
        parts = [resp.get(k) for k in ("stdout", "stderr", "output", "error", "content")]
        texts = [p if isinstance(p, str) else to_text(p) for p in parts if p not in (None, "")]
        if texts:
            return "\n".join(t for t in texts if t)
    return to_text(resp)


_CODEX_EXIT = re.compile(
    r"(?:Exit code:?\s*|Process exited with code\s+|exit_code\"?:\s*)(-?\d+)", re.IGNORECASE
)
_CLAUDE_EXIT = re.compile(
    r"^\s*(?:Exit code|Command exited with non-zero status code)\s*(-?\d+)", re.IGNORECASE
)
_REFUSALS = (
    "operation blocked by hook",
    "hook error",
    "doesn't want to proceed",
    "user doesn't want",
    "<tool_use_error>",
)


_REFUSAL_HEAD = 400


def is_refusal(text: str | None) -> bool:
    """A call refused by a hook, by the user, or by validation is not a failure."""
    if not text:
        return False
    head = text[:_REFUSAL_HEAD]
    return any(r in head for r in _REFUSALS)


def is_refused_response(resp: Any) -> bool:
    """`is_refusal` of a tool response: of its text, or of its JSON text when structured.

    A refusal marker has no character that JSON escapes, and none begins like an escape
    sequence's tail, so it can be in the JSON text only inside one of the structure's
    strings. When no string that reaches into the head names one — nearly every response
    — the answer is no without encoding anything."""
    if isinstance(resp, str):
        return is_refusal(resp)
    # Joined by a newline, which no marker holds: one scan per marker.
    heads = "\n".join(_heads(resp, _REFUSAL_HEAD))
    if not any(r in heads for r in _REFUSALS):
        return False
    return is_refusal(to_text(clip_value(resp, _REFUSAL_HEAD)))


def _heads(value: Any, n: int) -> list[str]:
    """The first `n` characters of every string (keys too) whose text can start within
    the first `n` characters of `value`'s JSON text — the strings `clip_value(value, n)` keeps.
    A value JSON has no type for is encoded with `str`: its whole `str` is taken."""
    out: list[str] = []

    def walk(v: Any, used: int) -> int:
        # `used` as in `_clip`: a lower bound of the text written before `v`.
        if isinstance(v, str):
            out.append(v[:n])
            return used + len(v) + 2
        if isinstance(v, dict):
            for k, item in v.items():
                if used > n:
                    break
                if isinstance(k, str):
                    out.append(k[:n])
                    used += len(k) + 2
                used = walk(item, used)
            return used
        if isinstance(v, list | tuple):
            for item in v:
                if used > n:
                    break
                used = walk(item, used)
            return used
        if v is not None and not isinstance(v, int | float):
            out.append(str(v))
        return used

    walk(value, 0)
    return out


def response_failure(resp: Any) -> bool:
    """Failure markers inside a PostToolUse `tool_response` (design §2.8)."""
    if isinstance(resp, str):
        head = resp[:300]
        m = _CODEX_EXIT.search(head) or _CLAUDE_EXIT.search(head)
        return bool(m and int(m.group(1)) != 0) and not is_refusal(resp)
    if not isinstance(resp, dict):
        return False
    if resp.get("is_error") is True or resp.get("isError") is True:
        return True
    if resp.get("success") is False or resp.get("interrupted") is True:
        return True
    err = resp.get("error")
    if isinstance(err, str) and err.strip() and not is_refusal(err):
        return True
    for key in ("code", "exitCode", "exit_code"):
        code = resp.get(key)
        if isinstance(code, int) and not isinstance(code, bool) and code != 0:
            return True
        if isinstance(code, str) and code.strip().lstrip("-").isdigit() and int(code) != 0:
            return True
    return False


def _exit_kind(command: str | None, output: str | None) -> str:
    """A failed call's `failure_kind`: a shell call's by its output, any other's `exit`."""
    return failure_kind_of_exit(command, output) if command else "exit"


def _note_failure_output(ev: HookEvent) -> None:
    """The error line and failing test ids of a failed call's result, when it has one."""
    if ev.tool_result:
        # The tool's own line, never the agent's framing (`Exit code: 1`, `Wall time: …`,
        # design §2.21): an output that is only framing has no error line.
        ev.tool_error_summary = error_line(ev.tool_result)
        ev.test_ids = extract_test_ids(ev.tool_result)


def _short_str(value: Any) -> str | None:
    """An id-like field: a non-blank string, capped (a lane id is no place for a novel);
    anything else is no id (a hook that sends a number is not refused for it)."""
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip()[:200]


# --- the parser --------------------------------------------------------------------------


def parse_payload(payload: Any, *, ts: int, source: str = "claude-code") -> HookEvent:
    """Turn a decoded hook payload into a `HookEvent`, or raise `PayloadError`.

    In steps, each its own concern: the payload's shape, the event's identity, what the
    tool touched, what it answered (and whether that is a failure), what else it said."""
    _check_shape(payload)
    tool_input_raw = payload.get("tool_input")
    # None, an object or (checked) a string: a bare command.
    tool_input: dict[str, Any] = (
        {"command": tool_input_raw} if isinstance(tool_input_raw, str) else tool_input_raw or {}
    )
    ev = _event_of(payload, ts=ts, source=source)
    _note_target(ev, tool_input)
    resp = payload.get("tool_response", payload.get("tool_result"))
    text = _note_result(ev, payload, resp)
    if ev.tool_success is False and ev.failure_kind:
        _note_failure_output(ev)
    _note_passed_tests(ev, text)
    extra = {k: v for k, v in payload.items() if k not in _KNOWN_FIELDS}
    if extra:
        ev.metadata = capped_metadata(extra)
    if ev.tool_name in WRITE_TOOLS and ev.tool_success is True:
        ranges = edited_lines(ev.tool_name, resp)
        if ranges is not None:
            note_edited_lines(ev, ranges)
    return ev


def _check_shape(payload: Any) -> None:
    """Raise `PayloadError` for a payload that is no hook event: not an object, a field of
    the wrong type, no session or hook name."""
    if not isinstance(payload, dict):
        raise PayloadError("not_object", f"payload is a JSON {type(payload).__name__}")
    for key in _STRING_FIELDS:
        value = payload.get(key)
        if value is not None and not isinstance(value, str):
            raise PayloadError("bad_field_type", f"{key} must be a string")
    for key in ("session_id", "hook_event_name"):
        if not (payload.get(key) or "").strip():
            raise PayloadError(f"missing_{key}", f"{key} is missing or empty")
    tool_input_raw = payload.get("tool_input")
    if tool_input_raw is not None and not isinstance(tool_input_raw, dict | str):
        raise PayloadError("bad_field_type", "tool_input must be an object")
    duration = payload.get("duration_ms")
    if duration is not None and (
        isinstance(duration, bool) or not isinstance(duration, int | float)
    ):
        raise PayloadError("bad_field_type", "duration_ms must be a number")


def _event_of(payload: dict[str, Any], *, ts: int, source: str) -> HookEvent:
    """The event's identity and context, every field capped."""
    # Capped before anything reads them: a 10 MB cwd must not be walked up for a `.git`
    # (and cached), nor a 10 MB transcript path stat'ed.
    cwd = cap_text(payload.get("cwd"), PATH_CAP)
    duration = payload.get("duration_ms")
    return HookEvent(
        ts=ts,
        session_id=payload["session_id"].strip(),
        event_type=payload["hook_event_name"].strip(),
        hook_event_name=payload["hook_event_name"].strip(),
        agent_source=source,
        tool_name=payload.get("tool_name"),
        tool_use_id=payload.get("tool_use_id"),
        tool_input=capped_text(payload.get("tool_input"), TOOL_INPUT_CAP),
        cwd=cwd,
        project=project_for(cwd) if cwd else None,
        transcript_path=cap_text(payload.get("transcript_path"), PATH_CAP),
        permission_mode=payload.get("permission_mode"),
        duration_ms=int(duration) if duration is not None else None,
        agent_id=_short_str(payload.get("agent_id")),
        agent_type=_short_str(payload.get("agent_type")),
    )


def _note_target(ev: HookEvent, tool_input: dict[str, Any]) -> None:
    """The files the call touched and the command it ran."""
    tool_name = ev.tool_name
    command = tool_input.get("command")
    if tool_name == "apply_patch" or (isinstance(command, str) and "*** Begin Patch" in command):
        patch = command or tool_input.get("input") or tool_input.get("patch")
        files = patch_files(patch, ev.cwd) if isinstance(patch, str) else []
        ev.tool_files = files
        ev.tool_file_path = files[0] if files else None
        ev.tool_name = "apply_patch"
        return
    fp = tool_input.get("file_path") or tool_input.get("notebook_path") or tool_input.get("path")
    if isinstance(fp, str) and fp:
        ev.tool_file_path = cap_text(fp, PATH_CAP) or fp
        ev.tool_files = [ev.tool_file_path]
    if tool_name in SHELL_TOOLS or (tool_name is None and "command" in tool_input):
        script = shell_script(tool_input.get("command", tool_input.get("cmd")))
        ev.tool_command = cap_text(script, COMMAND_CAP)
        ev.tool_command_prefix = command_prefix(ev.tool_command)


def _note_result(ev: HookEvent, payload: dict[str, Any], resp: Any) -> str | None:
    """The call's result and whether it failed (design §2.8); returns the text its passing
    tests are read from (a shell's whole output, uncapped)."""
    if ev.event_type == "PostToolUseFailure":
        return _note_failure_result(ev, payload.get("error"), resp)
    if ev.event_type == "PostToolUse":
        return _note_post_result(ev, resp)
    return None


def _note_failure_result(ev: HookEvent, err: Any, resp: Any) -> str | None:
    # Only the capped text is kept (and a refusal is told by its first 400 characters).
    text = (
        capped_text(err, TOOL_RESULT_CAP)
        if err is not None
        else cap_text(_response_text(resp, TOOL_RESULT_CAP), TOOL_RESULT_CAP)
    )
    ev.tool_result = text
    ev.tool_success = False
    ev.failure_kind = _exit_kind(ev.tool_command, text)
    if is_refusal(text):
        # A refusal is not a failure: keep it as a plain, unsuccessful result.
        ev.event_type = "PostToolUse"
        ev.failure_kind = None
    return text


def _note_post_result(ev: HookEvent, resp: Any) -> str | None:
    # A shell's whole output is searched for masked failures; other tools' results are
    # only kept, capped.
    text = _response_text(resp) if ev.tool_command else None
    if is_refused_response(resp):
        ev.tool_success = False
    elif response_failure(resp):
        ev.event_type = "PostToolUseFailure"
        ev.tool_success = False
        ev.failure_kind = _exit_kind(ev.tool_command, text)
    elif ev.tool_command and (hidden := masked_kind(ev.tool_command, text)):
        # A failure the pipe hid (`masked`), or one that says nothing about the code
        # (`no_verdict`: neither a pass nor a failure of the check, design §2.21).
        ev.tool_success = False
        ev.failure_kind = hidden
    else:
        ev.tool_success = True
    if text is None:
        text = _response_text(resp, TOOL_RESULT_CAP)
    ev.tool_result = cap_text(text, TOOL_RESULT_CAP)
    return text


def _note_passed_tests(ev: HookEvent, text: str | None) -> None:
    """Passing tests are read from the whole output (replay keeps no passing text), and
    only for checks: a `cat` of a test log reports nothing."""
    if ev.tool_command and ev.event_type in ("PostToolUse", "PostToolUseFailure"):
        out = text if ev.event_type == "PostToolUse" else ev.tool_result
        if out and check_of(ev.tool_command) is not None:
            ev.passed_test_ids = extract_passed_ids(out)


def was_cut(ev: HookEvent) -> bool:
    """Whether a field of `ev` was cut to its cap (`FIELD_CAPS`, the metadata cap)."""
    if isinstance(ev.metadata, dict) and ev.metadata.get("_truncated"):
        return True
    for name in FIELD_CAPS:
        value = getattr(ev, name)
        if isinstance(value, str) and value.endswith(CUT_MARK):
            return True
    return False


def note_edited_lines(ev: HookEvent, ranges: list[tuple[int, int]]) -> None:
    """Keep the [first, last] line ranges the edit wrote (`tma1.storable.editlines`) in metadata."""
    ev.metadata = {**ev.metadata, EDITED_LINES: [list(r) for r in ranges]}


def mark_exit_failure(ev: HookEvent, exit_code: int | None) -> None:
    """A PostToolUse whose call, we learnt elsewhere, ended with a non-zero exit (a Codex
    rollout, design §2.18): stored as a failure the way a native one is (`exit`). The
    output the response carried stays the tool result; `exit_code` goes to metadata."""
    ev.event_type = "PostToolUseFailure"
    ev.tool_success = False
    # Classified like any exit failure (design §2.15: invocation error, coverage-only,
    # sandbox timeout); the rollout's status stands in for the `Exit code N` line.
    said = f"Exit code {exit_code}\n{ev.tool_result or ''}" if exit_code is not None else None
    ev.failure_kind = _exit_kind(ev.tool_command, said or ev.tool_result)
    if exit_code is not None:
        ev.metadata = {**ev.metadata, "exit_code": exit_code}
    _note_failure_output(ev)


@dataclass(slots=True, frozen=True)
class FileChange:
    """One change on disk in a project (design §2.10). `writer_session` None: nobody we know."""

    ts: int
    project: str
    path: str
    change: str  # added | modified | deleted
    size: int | None = None
    content_hash: str | None = None
    writer_session: str | None = None
    id: int | None = None


# A usage row of this kind says the agent's turn ended with no `Stop` hook (the user
# interrupted it; only the transcript says so): no context size (docs/semantics.md,
# "Active sessions").
TURN_END = "turn_end"


@dataclass(slots=True, frozen=True)
class Usage:
    """One main-chain model request's token usage; `occupancy` is its prompt size."""

    ts: int
    session_id: str
    occupancy: int
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    output_tokens: int = 0
    model: str | None = None
    message_id: str | None = None
    kind: str = "usage"  # usage | compaction | turn_end (TURN_END)
    # The model's context window when the recording says it (Codex `model_context_window`);
    # None: derive it from `model` (tma1.engine.context).
    context_window: int | None = None
