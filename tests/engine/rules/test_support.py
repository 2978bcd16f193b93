"""The rules' shared helpers where a quick path stands in for a plain one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tma1.engine.rules._support import _heads_naming, _scan_named_files

_PATHISH = st.lists(
    st.sampled_from(
        ["main.go", "config.go", "a/", "internal/", "./", "../", "\\\\", "cmd\\\\", ":", ":12",
         " ", "\n", ".", "-", "x", "é/", "@", "+", "~", "(", ")", "'", "src/main.go."]
    ),
    max_size=10,
).map("".join)  # fmt: skip


@settings(max_examples=3000, deadline=None)
@given(_PATHISH, st.sampled_from(["main.go", "config.go", "x", "go", ".", "a"]))
def test_heads_naming_is_the_full_scan_for_one_name(text: str, name: str) -> None:
    assert _heads_naming(text, name) == _scan_named_files(text).get(name, frozenset())
