"""README.md's kinds table is generated from the rule registry (scripts/kinds_table.py):
the suite fails when the two drift apart, and `--write` brings them back together."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REPO

from tma1.engine.rules import SPECS

SCRIPT = REPO / "scripts" / "kinds_table.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60
    )


def test_the_readme_table_is_the_registrys() -> None:
    r = _run()
    assert r.returncode == 0, r.stderr
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("<!-- kinds-table:", 1)[1].split("<!-- /kinds-table -->", 1)[0]
    kinds = [line.split("`")[1] for line in block.splitlines() if line.startswith("| `")]
    assert kinds == list(SPECS)
    # Severity as the specs declare it, which is what the rules emit.
    assert f"| `stale_file_view` | {SPECS['stale_file_view'].severity} |" in block
    assert "| `external_modified_during_session` | medium |" in block


def test_a_drifted_table_fails_the_check_and_write_repairs_it(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    good = (REPO / "README.md").read_text(encoding="utf-8")
    readme.write_text(good.replace("| `stale_file_view` | high |", "| `stale_file_view` | low |"))
    r = _run("--readme", str(readme))
    assert r.returncode == 1
    assert "differs from the rule registry" in r.stderr and "--write" in r.stderr
    assert _run("--readme", str(readme), "--write").returncode == 0
    assert readme.read_text(encoding="utf-8") == good
    assert _run("--readme", str(readme)).returncode == 0


def test_a_readme_without_the_markers_is_refused_in_one_line(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# tma1\n")
    r = _run("--readme", str(readme), "--write")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "no '<!-- kinds-table" in r.stderr
    assert readme.read_text() == "# tma1\n"
