"""The rules' shared helpers."""

from __future__ import annotations

import pytest

from tma1.engine.rules._support import mentions_path


@pytest.mark.parametrize(
    ("text", "path", "named"),
    [
        ("cmd/config.go:142:23: undefined", "internal/config/config.go", False),
        ("config.go:3: bad", "internal/config/config.go", True),
        ("internal/config/config.go:3: bad", "/repo/internal/config/config.go", True),
        ("./internal/config/config.go:3: bad", "/repo/internal/config/config.go", True),
        ("internal\\config\\config.go:3", "internal/config/config.go", True),
        ("see main.go.", "src/main.go", True),
        ("notmain.go:1", "src/main.go", False),
        ("", "src/main.go", False),
    ],
)
def test_mentions_path_names_a_file_by_a_directory_that_fits(
    text: str, path: str, named: bool
) -> None:
    assert mentions_path(text, path) is named
