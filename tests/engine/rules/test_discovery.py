"""Adding a rule is adding its module: the toy rule of docs/rules.md, taken from that page,
is found, run and gated with nothing else changed."""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import tma1.engine.rules as rules_pkg
from tma1.engine.anomaly import Kind
from tma1.engine.following import Call, EmitRef
from tma1.engine.rules import SPECS, _discover
from tma1.gates.follow import followed

DOC = Path(__file__).resolve().parents[3] / "docs" / "rules.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


@pytest.fixture
def toy_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    module, _test = _python_blocks()
    (tmp_path / "force_push.py").write_text(module, encoding="utf-8")
    monkeypatch.setattr(rules_pkg, "__path__", [*rules_pkg.__path__, str(tmp_path)])
    yield
    sys.modules.pop("tma1.engine.rules.force_push", None)


def test_every_module_of_the_package_is_a_rule_in_the_seeds_order() -> None:
    assert list(SPECS) == [k.value for k in Kind]
    modules = {p.stem for p in Path(rules_pkg.__file__).parent.glob("*.py")}
    assert {m for m in modules if not m.startswith("_")} == set(SPECS)


def test_the_toy_rule_of_the_docs_is_found_after_the_seeds_six(toy_rule: None) -> None:
    kinds = [s.kind for s in sorted(_discover(), key=rules_pkg._order)]
    assert kinds == [*(k.value for k in Kind), "force_push"]


def test_the_toy_rules_own_tests_pass(toy_rule: None) -> None:
    _module, tests = _python_blocks()
    space: dict[str, object] = {}
    exec(compile(tests, str(DOC), "exec"), space)
    ran = [name for name, fn in space.items() if name.startswith("test_") and callable(fn)]
    for name in ran:
        space[name]()  # type: ignore[operator]
    assert len(ran) == 2
    assert importlib.import_module("tma1.engine.rules.force_push").SPEC.kind == "force_push"


def test_a_rule_beyond_the_seed_is_followed_by_a_read_of_its_files() -> None:
    emit = EmitRef(id=1, ts=10, session_id="s", kind="force_push", subject="x",
                   related_files=("/p/a.py",))  # fmt: skip
    read = Call(ts=11, id=2, event_type="PreToolUse", tool_name="Read", file_path="/p/a.py",
                files=("/p/a.py",))  # fmt: skip
    other = Call(ts=11, id=2, event_type="PreToolUse", tool_name="Read", file_path="/p/b.py",
                 files=("/p/b.py",))  # fmt: skip
    assert followed(emit, [read], 5)
    assert not followed(emit, [other], 5)
