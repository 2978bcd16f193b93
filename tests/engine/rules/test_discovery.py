"""Adding a rule is adding its module: every module of the rules package not named `_…`
is a rule, the seed's six first. (The docs' toy rule, dropped into a copy of the package,
is test_toy_rule.py.)"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import tma1.engine.rules as rules_pkg
from tma1.engine.anomaly import Kind, Severity
from tma1.engine.following import READ_OR_EDIT_OF_RELATED, Call, EmitRef
from tma1.engine.resolution import never
from tma1.engine.rules import SPECS, _discover
from tma1.engine.spec import RuleSpec, Severities


def test_every_module_of_the_package_is_a_rule_the_seeds_six_first() -> None:
    assert list(SPECS)[: len(Kind)] == [k.value for k in Kind]
    modules = {p.stem for p in Path(rules_pkg.__file__).parent.glob("*.py")}
    # A module's name need not be its kind (the toy goes in as module `shove`, kind
    # `branch_shoved`): each module's own SPEC is in SPECS, and nothing else is.
    found = [importlib.import_module(f"tma1.engine.rules.{m}").SPEC for m in modules if m[0] != "_"]
    assert sorted(s.kind for s in found) == sorted(SPECS)
    assert all(SPECS[s.kind] is s for s in found)


@pytest.fixture
def extra_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory the package's discovery also looks in."""
    monkeypatch.setattr(rules_pkg, "__path__", [*rules_pkg.__path__, str(tmp_path)])
    yield tmp_path
    for p in tmp_path.glob("*.py"):
        sys.modules.pop(f"tma1.engine.rules.{p.stem}", None)


def test_a_module_without_a_spec_is_refused_by_name(extra_dir: Path) -> None:
    (extra_dir / "half_done.py").write_text("KIND = 'half_done'\n", encoding="utf-8")
    with pytest.raises(TypeError, match=r"rules\.half_done exports no SPEC"):
        _discover()


def test_a_private_module_is_not_a_rule(extra_dir: Path) -> None:
    (extra_dir / "_helpers.py").write_text("X = 1\n", encoding="utf-8")
    assert sorted(s.kind for s in _discover()) == sorted(SPECS)


def test_a_rule_without_a_follow_action_is_followed_by_a_read_or_edit_of_its_files() -> None:
    spec = RuleSpec(
        kind="k",
        run=lambda w, n, c: [],
        channels=frozenset(),
        severity=Severities(Severity.LOW),
        resolution=never,
    )
    assert spec.follow is READ_OR_EDIT_OF_RELATED
    emit = EmitRef(id=1, ts=10, session_id="s", kind="k", subject="x", related_files=("/p/a.py",))
    read = Call(11, 2, "PreToolUse", "Read", "/p/a.py")
    edit = Call(11, 2, "PreToolUse", "Edit", "p/a.py")
    other = Call(11, 2, "PreToolUse", "Read", "/p/b.py")
    check = spec.follow.check
    assert check(emit, [read], [read], True) and check(emit, [edit], [edit], True)
    assert not check(emit, [other], [other], True)
