"""storable_text: NUL and lone surrogates become U+FFFD, and nothing else changes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tma1.storable.text import REPLACEMENT, is_storable, storable_text


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("plain", "plain"),
        ("a\x00b", f"a{REPLACEMENT}b"),
        ("caf\udce9", f"caf{REPLACEMENT}"),
        ("\ud83d\ude00", f"{REPLACEMENT}{REPLACEMENT}"),  # a pair in a str: two lone halves
        ("😀 ü", "😀 ü"),
        ("", ""),
    ],
)
def test_storable_text(raw: str, want: str) -> None:
    assert storable_text(raw) == want
    assert is_storable(raw) == (raw == want)


@given(st.text(alphabet=st.characters(codec=None, exclude_categories=())))
def test_adversarial_text_becomes_storable(raw: str) -> None:
    clean = storable_text(raw)
    clean.encode("utf-8")  # raises on a lone surrogate
    assert "\x00" not in clean
    assert is_storable(clean)
    assert storable_text(clean) == clean
    assert len(clean) == len(raw)
    assert all(c in (r, REPLACEMENT) for c, r in zip(clean, raw, strict=True))
    if is_storable(raw):
        assert clean is raw
