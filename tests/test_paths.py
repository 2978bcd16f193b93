"""paths.norm_path: the spelling every path comparison in tma1 uses."""

from __future__ import annotations

import posixpath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tma1.paths import display_path, norm_path


@pytest.mark.parametrize(
    ("path", "base", "want"),
    [
        ("src/a.py", "/r", "/r/src/a.py"),
        ("./src/../src/a.py", "/r/", "/r/src/a.py"),
        ("src\\a.py", "C:\\r", "C:/r/src/a.py"),
        ("/r//src/./a.py", "/elsewhere", "/r/src/a.py"),
        ("C:\\r\\a.py", "/elsewhere", "C:/r/a.py"),
        ("a.py", None, "a.py"),
        ("", "/r", "/r"),
        ("", None, ""),
    ],
)
def test_norm_path(path: str, base: str | None, want: str) -> None:
    assert norm_path(path, base) == want


def test_display_path() -> None:
    assert display_path("/r/src/a.py", "/r/") == "src/a.py"
    assert display_path("/rx/a.py", "/r") == "/rx/a.py"
    assert display_path("C:\\r\\a.py", "C:\\r") == "a.py"
    assert display_path("/r/a.py", None) == "/r/a.py"


_segment = st.sampled_from(["a", "b.py", ".", "..", "", "src", "x y", "ü"])
_path = st.lists(_segment, max_size=6).map("/".join)
_sep = st.sampled_from(["/", "\\"])


@given(_path, st.one_of(st.none(), _path.map(lambda p: "/" + p)), _sep)
def test_one_spelling_per_file(path: str, base: str | None, sep: str) -> None:
    once = norm_path(path, base)
    assert norm_path(once, base) == once  # a spelling is its own spelling
    assert norm_path(path.replace("/", sep), base) == once  # either separator
    assert "\\" not in once
    if base and once:
        assert once.startswith("/")  # relative paths land under their base
        assert once == posixpath.normpath(once)
