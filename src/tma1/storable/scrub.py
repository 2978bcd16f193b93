"""Make a hook event storable on every backend, in place (`scrub`).

NUL characters and lone surrogates, which PostgreSQL text and UTF-8 cannot hold, become
U+FFFD, and values longer than their bounded column (e.g. session_id, 200) are cut to fit,
before the insert on every backend, so the stored data is the same on SQLite and
PostgreSQL (docs/reliability.md). Every text a hook names freely is capped (`FIELD_CAPS`,
the lists at `LIST_CAP`, the indexed project at `KEY_CAP` with a hash), cut and the event
marked `truncated`, never dropped: no field can fill the disk, the memory, or an index
entry past what the database takes. Live ingest (tma1.ingest) and replay's in-memory sink
(tma1.replay.memory) both scrub what they commit.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from tma1.events import FIELD_CAPS, KEY_CAP, LIST_CAP, LIST_FIELDS, PATH_CAP, HookEvent
from tma1.storable.caps import cap_list, cap_text, key_text
from tma1.storable.text import is_storable, storable_text
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

    NUL and lone surrogates become U+FFFD; values longer than their column are cut to fit;
    values over their cap are cut and the event marked `truncated` in its metadata.
    """
    if _cap(event) and isinstance(event.metadata, dict):
        event.metadata = {**event.metadata, "truncated": True}
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


def _cap(event: HookEvent) -> bool:
    """Cut every capped field of `event` that is over its cap, in place: whether one was."""
    cut = False
    for name, limit in FIELD_CAPS.items():
        value = getattr(event, name)
        if value.__class__ is str and len(value) * 4 > limit:  # else it fits unencoded
            capped = cap_text(value, limit)
            if capped is not value:
                setattr(event, name, capped)
                cut = True
    project = event.project
    if project.__class__ is str and len(project) * 4 > KEY_CAP:
        keyed = key_text(project, KEY_CAP)
        if keyed is not project:
            event.project = keyed
            cut = True
    for name in LIST_FIELDS:
        items = getattr(event, name)
        if isinstance(items, list) and items:
            capped_items = cap_list(items, PATH_CAP, LIST_CAP)
            if capped_items is not items:
                setattr(event, name, capped_items)
                cut = True
    return cut


# Bounded columns (String(n)): PostgreSQL refuses a longer value where SQLite would keep it.
_EVENT_FIELDS = tuple((f.name, HOOK_EVENT_LIMITS.get(f.name, 0)) for f in fields(HookEvent))
