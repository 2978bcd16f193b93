"""Text kept of a hook payload: capped to a byte budget without encoding more than the
cap keeps (tool inputs, tool outputs, metadata). Pure functions, shared by the parser and
the store.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

METADATA_CAP = 4 * 1024
# A Stop's final message keeps its head and its tail: what the agent says is still open
# comes at the end of a long report as often as at its start.
MESSAGE_HEAD = 1_000
MESSAGE_TAIL = 2_000


def cap_text(text: str | None, limit: int) -> str | None:
    """Cut to at most `limit` UTF-8 bytes without splitting a character."""
    if text is None:
        return None
    n = len(text)
    if n * 4 <= limit:
        return text  # at most 4 bytes a character: it fits without encoding it
    # More than `limit` characters is more than `limit` bytes, and the cut is inside the
    # first `limit` characters: encode only those.
    data = (text if n <= limit else text[:limit]).encode("utf-8", "surrogatepass")
    if n <= limit and len(data) <= limit:
        return text
    marker = "…[truncated]"
    cut = data[: max(0, limit - len(marker.encode()))]
    return cut.decode("utf-8", "ignore") + marker


KEY_MARK = "…#"


def key_text(text: str, limit: int) -> str:
    """`text` when it fits in `limit` UTF-8 bytes; else its head, cut to fit, with `KEY_MARK`
    and 16 hex digits of its SHA-256: an indexed key (a project) must fit the index, and
    two long keys that share their head must stay two keys."""
    if len(text) * 4 <= limit:
        return text
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    digest = hashlib.sha256(data).hexdigest()[:16]
    head = data[: max(0, limit - len(KEY_MARK.encode()) - len(digest))]
    return head.decode("utf-8", "ignore") + KEY_MARK + digest


def cap_list(items: list[Any], item_limit: int, total_limit: int) -> list[Any]:
    """`items` (strings, as paths and test ids) each cut to `item_limit` bytes, ending with
    the item that reaches `total_limit` bytes together; `items` itself when nothing is cut."""
    total = 0
    out: list[Any] = []
    changed = False
    for item in items:
        if isinstance(item, str):
            kept = cap_text(item, item_limit) or ""
            changed = changed or kept is not item
            total += len(kept)
        else:
            kept = item
        if total > total_limit:
            return [*out, "…[truncated]"]
        out.append(kept)
    return out if changed else items


# One encoder: json.dumps with any option builds a new JSONEncoder per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)


def json_text(value: Any) -> str:
    """`json.dumps(value, ensure_ascii=False, default=str)`, through one shared encoder."""
    return _ENCODER.encode(value)


def to_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json_text(value)


def clip_value(value: Any, n: int) -> Any:
    """`value` cut down to what the first `n` characters of its JSON text need.

    Strings longer than `n` are cut to `n + 1` characters, and a list or dict stops at
    the first item that starts after `n` characters of text. The JSON text of the result
    starts with the same `n` characters as `value`'s (for a string: the string itself),
    and is longer than `n` exactly when `value`'s is, so
    `cap_text(to_text(clip_value(v, n)), n) == cap_text(to_text(v), n)` — without encoding the
    100 KB file a tool response can carry only to keep 16 KB of it.
    """
    return _clip(value, n, 0)[0]


def _clip(value: Any, n: int, used: int) -> tuple[Any, int]:
    """(`value` cut down, a lower bound of the text written once it is): `used` counts
    only string characters and quotes, never more than the encoder writes."""
    if isinstance(value, str):
        if len(value) > n:
            return value[: n + 1], used + n + 3
        return value, used + len(value) + 2
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            if used > n:
                break  # the text so far already fills the cap: nothing after it is kept
            if isinstance(k, str):
                used += len(k) + 2
            out[k], used = _clip(v, n, used)
        return out, used
    if isinstance(value, list | tuple):
        items: list[Any] = []
        for v in value:
            if used > n:
                break
            kept, used = _clip(v, n, used)
            items.append(kept)
        return items, used
    return value, used


def capped_text(value: Any, limit: int) -> str | None:
    """`cap_text(to_text(value), limit)`, encoding no more than the cap needs."""
    return cap_text(to_text(clip_value(value, limit)), limit)


def _shrink_metadata(extra: dict[str, Any]) -> dict[str, Any]:
    """Keep small scalar fields whole (stop_hook_active must survive) and cap the rest."""
    out: dict[str, Any] = {}
    budget = METADATA_CAP
    for key, value in sorted(extra.items(), key=lambda kv: len(to_text(kv[1]) or "")):
        text = to_text(value) or ""
        size = len(text.encode("utf-8", "surrogatepass")) + len(key) + 8
        if size <= budget:
            out[key] = value
            budget -= size
        elif budget > 64:
            out[key] = cap_text(text, budget - 32)
            budget = 0
        else:
            out[key] = "…[truncated]"
    out["_truncated"] = True
    return out


def capped_metadata(extra: dict[str, Any]) -> dict[str, Any]:
    """The payload's unknown fields, within `METADATA_CAP` bytes of JSON text; a long
    final message keeps its head and its tail, marked where it was cut."""
    message = extra.get("last_assistant_message")
    if isinstance(message, str) and len(message) > MESSAGE_HEAD + MESSAGE_TAIL + 20:
        kept = message[:MESSAGE_HEAD] + "\n…[cut]…\n" + message[-MESSAGE_TAIL:]
        extra = {**extra, "last_assistant_message": kept, "_truncated": True}
    meta_text = to_text(clip_value(extra, METADATA_CAP)) or ""
    if len(meta_text.encode("utf-8", "surrogatepass")) > METADATA_CAP:
        return _shrink_metadata(extra)
    return extra
