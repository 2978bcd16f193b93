"""Text every backend can store: PostgreSQL text cannot hold NUL, and UTF-8 (so neither
database) cannot hold a lone surrogate, which Python strings decoded with `surrogateescape`
or built from JSON `\\ud800` escapes can carry. Both become U+FFFD, the same substitution on
every path in (hook events, query parameters), so a lookup by such a value finds what was
stored."""

from __future__ import annotations

import re

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")


def is_storable(text: str) -> bool:
    """Whether `text` holds neither NUL nor a lone surrogate. (Encoding runs at memory speed;
    a regex crawls through a wide string a character at a time.)"""
    if "\x00" in text:
        return False
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def storable_text(text: str) -> str:
    """`text` with NUL and lone surrogates replaced by U+FFFD; `text` itself when clean."""
    if is_storable(text):
        return text
    return _SURROGATE.sub(REPLACEMENT, text.replace("\x00", REPLACEMENT))
