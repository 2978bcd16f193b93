"""The rules' shared helpers where a quick path stands in for a plain one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tma1.engine.rules._support import _heads_naming, _scan_named_files, mentions_path

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


@settings(max_examples=1000, deadline=None)
@given(_PATHISH, st.sampled_from(["/r/internal/config.go", "/r/main.go", "cmd/config.go"]))
def test_mentions_path_is_the_same_with_and_without_the_cache(text: str, path: str) -> None:
    assert mentions_path(text, path, cache=False) == mentions_path(text, path, cache=True)
