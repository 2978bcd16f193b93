"""`text_cache`: `lru_cache` answers, but no text over `max_chars` is ever held (its
digest is the key), and the entries of big texts are bounded in number as well."""

from __future__ import annotations

import sys

from tma1.storable.textmemo import text_cache


def test_a_big_text_is_not_held_and_is_answered_from_the_cache() -> None:
    calls: list[int] = []

    @text_cache(maxsize=4, max_chars=100)
    def count_x(text: str, extra: int = 0) -> int:
        calls.append(len(text))
        return text.count("x") + extra

    big = "x" * 101 + "".join(chr(65 + i % 26) for i in range(500))  # a fresh object
    refs = sys.getrefcount(big)
    assert count_x(big) == 101
    assert sys.getrefcount(big) == refs  # not a key, not kept anywhere
    same_text = "".join(["x" * 101, big[101:]])  # equal, another object: a hit
    assert same_text is not big and count_x(same_text) == 101
    assert count_x(big, 1) == 102  # the other arguments are part of the key
    assert calls == [601, 601]


def test_a_small_text_is_its_own_key_as_with_lru_cache() -> None:
    @text_cache(maxsize=2, max_chars=100)
    def upper(text: str) -> str:
        return text.upper()

    small = "".join(["a", "b"])
    assert upper(small) == upper("ab") == "AB"
    info = upper.cache_info()  # type: ignore[attr-defined]
    assert (info.hits, info.misses, info.maxsize) == (1, 1, 2)


def test_big_entries_are_bounded_in_number() -> None:
    @text_cache(maxsize=3, max_chars=10)
    def size(text: str) -> int:
        return len(text)

    for i in range(20):
        assert size(str(i) * 50) == 50 * len(str(i))
    assert size.big_keys() == 3  # type: ignore[attr-defined]
    size.cache_clear()  # type: ignore[attr-defined]
    assert size.big_keys() == 0  # type: ignore[attr-defined]
