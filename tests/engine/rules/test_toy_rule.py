"""Acceptance (issue 29, "a rule is one module"): the toy rule of docs/rules.md, taken out
of that page and dropped into a copy of the rules package, is found by the package's own
discovery and passes the tests that know the kinds — and goes every way a kind goes
(`toy_rule_paths.py`) — with nothing else changed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
TESTS = REPO / "tests"
DOC = REPO / "docs" / "rules.md"
SEED = [
    "stale_file_view",
    "build_broken_after_my_edit",
    "repeated_failed_build",
    "test_stuck",
    "external_modified_during_session",
    "context_pressure",
]
# Every test file that knows the kinds (registry, detector, gates, the API), and the walk
# of a finding along the paths a kind takes (suppression, delivery, bundle, gates, API).
KIND_AWARE = [
    "tests/engine/rules/test_registry.py",
    "tests/engine/rules/test_discovery.py",
    "tests/engine/test_detector.py",
    "tests/gates/test_gates_pure.py",
    "tests/gates/test_follow_judge_events.py",
    "tests/server/test_routes_gates.py",
    "tests/engine/rules/toy_rule_paths.py",
]

pytestmark = pytest.mark.slow


def toy_blocks() -> tuple[str, str]:
    """The toy rule's module and its test file, as docs/rules.md shows them."""
    module, tests = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    return module, tests


@pytest.fixture(scope="module")
def toy_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of src/tma1 with the docs' toy rule in its rules package, and the toy's own
    test file beside it: (root)/src and (root)/toytests."""
    root = tmp_path_factory.mktemp("toy")
    pkg = root / "src" / "tma1"
    shutil.copytree(REPO / "src" / "tma1", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    module, tests = toy_blocks()
    (pkg / "engine" / "rules" / "force_push.py").write_text(module, encoding="utf-8")
    (root / "toytests").mkdir()
    (root / "toytests" / "test_force_push.py").write_text(tests, encoding="utf-8")
    return root


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMA1_")}
    # The copy first: it is the `tma1` Python imports (the editable install comes later).
    env["PYTHONPATH"] = os.pathsep.join([str(root / "src"), str(TESTS)])
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=900
    )


def test_the_package_discovers_the_toy_after_the_seeds_six(toy_tree: Path) -> None:
    probe = (
        "import json, tma1.engine.rules as r, tma1.gates as g;"
        "print(json.dumps([r.__file__, list(r.SPECS), list(g.KINDS)]))"
    )
    r = _run(toy_tree, "-c", probe)
    assert r.returncode == 0, r.stderr
    where, specs, kinds = json.loads(r.stdout)
    assert Path(where).is_relative_to(toy_tree / "src")
    assert specs == kinds == [*SEED, "force_push"]


def test_the_kind_aware_tests_pass_with_the_toy_dropped_in(toy_tree: Path) -> None:
    r = _run(
        toy_tree,
        "-m",
        "pytest",
        "-q",
        "-n",
        "0",
        "-p",
        "no:cacheprovider",
        str(toy_tree / "toytests" / "test_force_push.py"),
        *KIND_AWARE,
    )
    tail = (r.stdout + r.stderr)[-4000:]
    assert r.returncode == 0, tail
    passed = re.search(r"(\d+) passed", r.stdout)
    assert passed and int(passed.group(1)) > 50, tail
    assert " failed" not in r.stdout and " error" not in r.stdout, tail
