"""`tma1 --version`: the installed package's version, the same as the source's."""

from __future__ import annotations

import subprocess
import tomllib
from importlib.metadata import version

from conftest import REPO, tma1_cmd

import tma1


def test_version_is_the_package_metadata_version() -> None:
    r = subprocess.run(tma1_cmd("--version"), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert r.stdout.strip() == f"tma1 {version('tma1')}"
    assert version("tma1") == declared == tma1.__version__
