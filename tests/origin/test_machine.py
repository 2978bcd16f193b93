"""This machine's id (tma1.origin.machine): made once per data dir, private, overridable."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tma1.config import ConfigError, Settings, load_settings
from tma1.origin.machine import MACHINE_ID_FILE, ensure_machine_id, read_machine_id


def test_made_once_private_and_stable(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert read_machine_id(data) is None
    first = ensure_machine_id(data)
    assert len(first) == 36 and first.count("-") == 4  # a uuid4
    assert stat.S_IMODE((data / MACHINE_ID_FILE).stat().st_mode) == 0o600
    assert ensure_machine_id(data) == first == read_machine_id(data)
    assert Settings(data_dir=data).effective_machine_id == first


def test_a_damaged_file_is_replaced(tmp_path: Path) -> None:
    (tmp_path / MACHINE_ID_FILE).write_text("not an id!\n")
    made = ensure_machine_id(tmp_path)
    assert made != "not an id!" and read_machine_id(tmp_path) == made


def test_the_environment_overrides_the_file(tmp_path: Path) -> None:
    settings = load_settings({"TMA1_DATA_DIR": str(tmp_path), "TMA1_MACHINE_ID": "ci-box-1"})
    assert settings.effective_machine_id == "ci-box-1"
    assert not (tmp_path / MACHINE_ID_FILE).exists()


@pytest.mark.parametrize("bad", ["has space", "x" * 65, "-leading", "ü"])
def test_a_bad_machine_id_names_the_variable(bad: str) -> None:
    with pytest.raises(ConfigError, match="TMA1_MACHINE_ID"):
        load_settings({"TMA1_MACHINE_ID": bad})
