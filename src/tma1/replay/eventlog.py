"""tma1's event log (design §4) → replay items. This is what `tma1 export` writes.

One JSON object a line:
- a hook payload exactly as the agent posted it, plus `"ts"` (ISO-8601 or epoch ms) and,
  for Codex, `"agent_source": "codex"` (the live request's `?source=`; the envelope
  follows the source);
- `{"type":"file_change","ts","project","path","change","session_id"}` (+ `size`,
  `content_hash` when known);
- `{"type":"usage","ts","session_id","input_tokens","cache_read_tokens",
  "cache_creation_tokens","output_tokens"}` (+ `occupancy`, `model`, `message_id`,
  `kind`, `context_window` when known; occupancy defaults to the sum of the three
  inputs, design §2.12).
"""

from __future__ import annotations

from typing import Any

from tma1.clock import epoch_ms
from tma1.events import FileChange, Usage
from tma1.replay.formats import EVENTLOG
from tma1.replay.model import FILE_CHANGE, USAGE, Converted, Records, ReplayItem, hook_item

# Keys we add to a hook payload; stripped before the payload goes to the live path.
EXTRA_KEYS = ("ts", "agent_source")
_CHANGES = frozenset({"added", "modified", "deleted"})
# A usage record's token counts; the first three make the prompt (occupancy's default).
_TOKENS = ("input_tokens", "cache_read_tokens", "cache_creation_tokens", "output_tokens")


def _int(value: Any, default: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return int(value)


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def convert(records: Records) -> Converted:
    out = Converted.of(records, EVENTLOG)
    for line, rec in records.records:
        origin = f"{records.path}:{line}"
        if not isinstance(rec, dict):
            out.problem(line, "not a JSON object; skipped")
            continue
        ts = epoch_ms(rec.get("ts"))
        if ts is None:
            out.problem(line, "no readable `ts`; skipped")
            continue
        kind = rec.get("type") if "hook_event_name" not in rec else None
        if kind == FILE_CHANGE:
            project, path = _opt_str(rec.get("project")), _opt_str(rec.get("path"))
            change = rec.get("change")
            if not project or not path or change not in _CHANGES:
                out.problem(
                    line,
                    "file_change needs project, path and change added|modified|deleted",
                )
                continue
            writer = _opt_str(rec.get("session_id"))
            out.items.append(
                ReplayItem(
                    ts=ts,
                    kind=FILE_CHANGE,
                    session_id=writer or "",
                    change=FileChange(
                        ts=ts,
                        project=project,
                        path=path,
                        change=change,
                        size=rec.get("size") if isinstance(rec.get("size"), int) else None,
                        content_hash=_opt_str(rec.get("content_hash")),
                        writer_session=writer,
                    ),
                    origin=origin,
                    seq=line,
                    # Exports of two sessions of one project both carry its changes.
                    key=f"change:{project}:{path}:{ts}:{change}:{writer or ''}",
                )
            )
        elif kind == USAGE:
            sid = _opt_str(rec.get("session_id"))
            if not sid:
                out.problem(line, "usage without session_id")
                continue
            tokens = {k: _int(rec.get(k)) for k in _TOKENS}
            prompt = sum(tokens[k] for k in _TOKENS[:3])
            out.items.append(
                ReplayItem(
                    ts=ts,
                    kind=USAGE,
                    session_id=sid,
                    usage=Usage(
                        ts=ts,
                        session_id=sid,
                        occupancy=_int(rec.get("occupancy"), prompt),
                        **tokens,
                        model=_opt_str(rec.get("model")),
                        message_id=_opt_str(rec.get("message_id")),
                        kind=_opt_str(rec.get("kind")) or "usage",
                        context_window=_int(rec.get("context_window")) or None,
                    ),
                    origin=origin,
                    seq=line,
                )
            )
        elif "hook_event_name" in rec:
            source = "codex" if rec.get("agent_source") == "codex" else None
            payload = {k: v for k, v in rec.items() if k not in EXTRA_KEYS}
            sid = payload.get("session_id")
            sid = sid if isinstance(sid, str) else ""
            out.items.append(hook_item(ts, sid, payload, origin, line, source=source))
        else:
            out.problem(line, "neither a hook payload, file_change nor usage")
    return out
