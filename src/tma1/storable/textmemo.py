"""`text_cache`: an `lru_cache` for functions of a text that holds no big text.

The checks and rules memoise what they derive from an output or a command (each detection
reads every event of the hour again). A plain `lru_cache` keeps each key, so a cache of
1,024 outputs held 1,024 whole outputs (up to `TOOL_RESULT_CAP` each, after their events
had left every window: issue 31). Here a text up to `max_chars` is its own key, as before;
a longer one is keyed by its 128-bit BLAKE2b digest, so an entry costs at most `max_chars`
characters of key whatever the text, and the answer is the same.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

# A key up to this many characters is kept as it is (a command, most outputs' lines).
MAX_KEY_CHARS = 4096


def digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def text_cache(
    maxsize: int, *, max_chars: int = MAX_KEY_CHARS
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Memoise `fn(text, *rest)` on (text, *rest) like `lru_cache(maxsize)`, with a text
    longer than `max_chars` keyed by its digest (`rest` must be small and hashable). The
    cached function's results must be small too (a flag, a line, a few references)."""

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        small_cache = functools.lru_cache(maxsize=maxsize)(fn)
        small: Callable[..., R] = small_cache
        big: OrderedDict[tuple[Any, ...], R] = OrderedDict()
        lock = threading.Lock()

        @functools.wraps(fn)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            text = args[0] if args else None
            if not isinstance(text, str) or len(text) <= max_chars:
                return small(*args, **kwargs)
            key = (digest(text), *args[1:], *sorted(kwargs.items()))
            with lock:
                if key in big:
                    big.move_to_end(key)
                    return big[key]
            value = fn(*args, **kwargs)
            with lock:
                big[key] = value
                while len(big) > maxsize:
                    big.popitem(last=False)
            return value

        def cache_clear() -> None:
            small_cache.cache_clear()
            with lock:
                big.clear()

        call.cache_clear = cache_clear  # type: ignore[attr-defined]
        call.cache_info = small_cache.cache_info  # type: ignore[attr-defined]
        call.big_keys = lambda: len(big)  # type: ignore[attr-defined]
        return call

    return decorate
