"""Acceptance (issue 29, "a rule is one module"): the toy rule of docs/rules.md, taken out
of that page and dropped — under another name: its module and its kind both differ from the
docs' `force_push` — into a copy of the rules package, is found by the package's own
discovery and passes the tests that know the kinds, and goes every way a kind goes
(`toy_rule_paths.py`), with nothing else changed. `scripts/toy_rule_suite.py` runs the
whole suite so (tests/README.md)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from toykit import DOCS_NAME, TOY_KIND, TOY_MODULE, drop_toy, toy_blocks

import tma1.engine.rules

REPO = Path(__file__).resolve().parents[3]
TESTS = REPO / "tests"
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


@pytest.fixture(scope="module")
def toy_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of src/tma1 with the docs' toy rule in its rules package, and the toy's own
    test file beside it, under another name than the docs': (root)/src and (root)/toytests."""
    root = tmp_path_factory.mktemp("toy")
    pkg = root / "src" / "tma1"
    shutil.copytree(REPO / "src" / "tma1", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    drop_toy(root / "src", root / "toytests", TOY_MODULE, TOY_KIND)
    return root


def test_the_toy_is_the_docs_text_under_another_name(toy_tree: Path) -> None:
    """Only the name changed: put the docs' name back and the dropped files are the page's."""
    assert DOCS_NAME not in (TOY_MODULE, TOY_KIND) and TOY_MODULE != TOY_KIND
    rule = toy_tree / "src" / "tma1" / "engine" / "rules" / f"{TOY_MODULE}.py"
    test = toy_tree / "toytests" / f"test_{TOY_MODULE}.py"
    dropped = [rule.read_text(encoding="utf-8"), test.read_text(encoding="utf-8")]
    # (a test function's name, `test_a_force_push_is_…`, may keep the words)
    assert not any(re.search(rf"\b{DOCS_NAME}\b", text) for text in dropped)
    assert f'KIND = "{TOY_KIND}"' in dropped[0]
    assert f"from tma1.engine.rules.{TOY_MODULE} import {TOY_KIND}" in dropped[1]
    back = [
        text.replace(f"rules.{TOY_MODULE} ", f"rules.{DOCS_NAME} ").replace(TOY_KIND, DOCS_NAME)
        for text in dropped
    ]
    assert back == list(toy_blocks())


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # No daemon setting leaks in; the test cluster does (the PostgreSQL leg runs too).
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TMA1_") or k.startswith(("TMA1_TEST_", "TMA1_REQUIRE_"))
    }
    # The copy first: it is the `tma1` Python imports (the editable install comes later).
    env["PYTHONPATH"] = os.pathsep.join([str(root / "src"), str(TESTS)])
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=900
    )


def test_the_package_discovers_the_toy_after_the_seeds_six(toy_tree: Path) -> None:
    probe = (
        "import json, tma1.engine.rules as r, tma1.gates as g;"
        "print(json.dumps([r.__file__, list(r.SPECS), list(g.KINDS),"
        f" r.SPECS[{TOY_KIND!r}].run.__module__]))"
    )
    r = _run(toy_tree, "-c", probe)
    assert r.returncode == 0, r.stderr
    where, specs, kinds, module = json.loads(r.stdout)
    assert Path(where).is_relative_to(toy_tree / "src")
    # The seed's six first, then every other rule by kind: the toy among the rules this
    # tree already has (scripts/toy_rule_suite.py runs this test in a tree with another toy).
    here = list(tma1.engine.rules.SPECS)
    assert specs == kinds == [*SEED, *sorted([*here[len(SEED) :], TOY_KIND])]
    assert here[: len(SEED)] == SEED and DOCS_NAME not in specs
    assert module == f"tma1.engine.rules.{TOY_MODULE}"


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
        str(toy_tree / "toytests" / f"test_{TOY_MODULE}.py"),
        *KIND_AWARE,
    )
    tail = (r.stdout + r.stderr)[-4000:]
    assert r.returncode == 0, tail
    passed = re.search(r"(\d+) passed", r.stdout)
    assert passed and int(passed.group(1)) > 50, tail
    assert " failed" not in r.stdout and " error" not in r.stdout, tail
