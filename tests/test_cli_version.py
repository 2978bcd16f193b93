"""`tma1 --version`: the installed package's version, the same as the source's."""

from __future__ import annotations

import subprocess
import sys
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


def test_the_command_line_starts_without_the_database_or_web_libraries() -> None:
    """Every `tma1` command builds the whole parser first (`--help` lists them all), and
    agents start `tma1 mcp` at every session: importing SQLAlchemy and Alembic there made
    `tma1 --version` take 0.75 s instead of 0.17 s. Only a command that needs them loads
    them."""
    heavy = ("sqlalchemy", "alembic", "fastapi", "starlette", "uvicorn", "httpx", "watchfiles")
    code = (
        "import sys, tma1.cli; tma1.cli.build_parser(); "
        f"print(' '.join(m for m in {heavy!r} if m in sys.modules))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == []
