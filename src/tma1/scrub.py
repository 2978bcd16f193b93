"""Make a hook event storable on every backend, in place (`scrub`).

NUL characters and lone surrogates, which PostgreSQL text and UTF-8 cannot hold, become
U+FFFD, and values longer than their bounded column (e.g. session_id, 200) are cut to fit,
before the insert on every backend, so the stored data is the same on SQLite and
PostgreSQL (docs/reliability.md). Live ingest (tma1.ingest) and replay's in-memory sink
(tma1.replay.memory) both scrub what they commit.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from tma1.events import HookEvent
from tma1.storable import is_storable, storable_text
from tma1.store.schema import HOOK_EVENT_LIMITS


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {_clean(k) if isinstance(k, str) else k: _clean(v) for k, v in value.items()}
    return value


def _dirty(value: Any) -> bool:
    """Whether `_clean` would change anything (almost never: check before copying)."""
    if isinstance(value, str):
        return not is_storable(value)
    if isinstance(value, list):
        for v in value:
            if v.__class__ is str and v.isascii() and "\x00" not in v:
                continue  # the paths and test ids of nearly every event
            if _dirty(v):
                return True
        return False
    if isinstance(value, dict):
        return any(_dirty(k) or _dirty(v) for k, v in value.items())
    return False


def scrub(event: HookEvent) -> HookEvent:
    """Make `event` storable on every backend, in place; returns it.

    NUL and lone surrogates become U+FFFD; values longer than their column are cut to fit.
    """
    for name, limit in _EVENT_FIELDS:
        value = getattr(event, name)
        if not value:
            continue  # None, "", [], {}, 0 and False need nothing
        if value.__class__ is str:
            cleaned = storable_text(value)
            if limit and len(cleaned) > limit:
                cleaned = cleaned[:limit]
        elif isinstance(value, list | dict) and _dirty(value):
            cleaned = _clean(value)
        else:
            continue
        if cleaned is not value:
            setattr(event, name, cleaned)
    return event


# Bounded columns (String(n)): PostgreSQL refuses a longer value where SQLite would keep it.
_EVENT_FIELDS = tuple((f.name, HOOK_EVENT_LIMITS.get(f.name, 0)) for f in fields(HookEvent))
