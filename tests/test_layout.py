"""The house rules of src/ (issue 16), checked: SQL only in store/, no module over 600
lines, no import cycle between tma1's modules."""

from __future__ import annotations

import ast
import re
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "tma1"
MAX_LINES = 600


def _modules(root: Path = SRC) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for f in root.rglob("*.py"):
        rel = f.relative_to(root.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out[".".join(parts)] = f
    return out


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """tma1 modules `name` imports (at any depth of its code), its own packages left out."""
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            targets = [base, *(f"{base}.{a.name}" for a in node.names)]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name and not name.startswith(t + "."):
                found.add(t)
    return found


def _cycle(root: Path) -> list[str] | None:
    known = _modules(root)
    graph = {name: _imports(name, path, known) for name, path in known.items()}
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as exc:
        return list(exc.args[1])
    return None


def test_no_import_cycle() -> None:
    assert _cycle(SRC) is None


def test_an_import_inside_a_function_still_makes_a_cycle(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from pkg.a import x\n")
    assert sorted(set(_cycle(pkg) or [])) == ["pkg.a", "pkg.b"]


def test_no_module_over_600_lines() -> None:
    long = {
        str(p.relative_to(SRC)): n
        for p in SRC.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


_SQL = re.compile(r"^\s*(from sqlalchemy|import sqlalchemy)|\.execute\(", re.M)


def test_sql_lives_in_store_only() -> None:
    outside = [
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if "store" not in p.relative_to(SRC).parts[:1] and _SQL.search(p.read_text("utf-8"))
    ]
    assert outside == []


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_reaches(root: Path = SRC) -> list[str]:
    """`from m import _x` and `m._x` where `m` is another of root's modules: a name kept
    private to its module, used from outside it (what is shared gets a public name)."""
    known = _modules(root)
    found: list[str] = []
    for name, path in known.items():
        pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules: dict[str, str] = {}  # local name → the module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        modules[a.asname] = a.name
                    else:
                        modules[a.name.split(".")[0]] = a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                for a in node.names:
                    if f"{base}.{a.name}" in known:
                        modules[a.asname or a.name] = f"{base}.{a.name}"
                    elif _private(a.name) and base in known and base != name:
                        found.append(f"{name}: from {base} import {a.name}")
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            chain: list[str] = []
            value: ast.expr = node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in modules:
                target = ".".join([modules[value.id], *reversed(chain)])
                if target in known and target != name:
                    found.append(f"{name}: {target}.{node.attr}")
    return sorted(found)


def test_no_private_name_used_across_modules() -> None:
    assert _private_reaches() == []


def test_a_private_name_reached_from_another_module_is_found(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("_x = 1\ny = 2\n\ndef _f():\n    return _x\n")
    (pkg / "b.py").write_text("from pkg.a import _x, y\n")
    (pkg / "sub" / "c.py").write_text("from .. import a\n\ndef g():\n    return a._f()\n")
    (pkg / "d.py").write_text("import pkg.a as m\nfrom pkg import a\n\nv = m._x + a.y\n")
    assert _private_reaches(pkg) == [
        "pkg.b: from pkg.a import _x",
        "pkg.d: pkg.a._x",
        "pkg.sub.c: pkg.a._f",
    ]


MAX_LOOSE = 8


def _loose_modules(root: Path = SRC) -> list[str]:
    """The modules that sit directly in the package, outside any sub-package."""
    return sorted(p.stem for p in root.glob("*.py") if p.name != "__init__.py")


def test_at_most_8_loose_top_level_modules() -> None:
    loose = _loose_modules()
    assert len(loose) <= MAX_LOOSE, f"{len(loose)} loose modules in src/tma1/: {loose}"


def test_a_module_that_shadows_the_standard_library_is_no_top_level_module() -> None:
    # `tma1/token.py` was one: run from src/tma1, `import token` (tokenize's) found it.
    assert [m for m in _loose_modules() if m in sys.stdlib_module_names] == []


# What the engine may not import (design §5: the engine is pure; its live ports are in
# tma1.live, the agents' knowledge in adapters/). A module counts as every module under it.
_ENGINE_FORBIDDEN = ("tma1.store", "tma1.adapters", "tma1.live")


def _engine_reaches(root: Path = SRC) -> set[tuple[str, str]]:
    """(engine module, forbidden module) for every such import, at any depth of its code."""
    known = _modules(root)
    return {
        (name, target)
        for name, path in known.items()
        if name == "tma1.engine" or name.startswith("tma1.engine.")
        for target in _imports(name, path, known)
        if any(target == f or target.startswith(f + ".") for f in _ENGINE_FORBIDDEN)
    }


def test_the_engine_imports_no_store_adapter_or_dialect() -> None:
    assert _engine_reaches() == set()


def test_an_engine_import_of_the_store_inside_a_function_is_found(tmp_path: Path) -> None:
    root = tmp_path / "tma1"
    for pkg in ("", "engine", "store", "adapters"):
        (root / pkg).mkdir(exist_ok=True)
        (root / pkg / "__init__.py").write_text("")
    (root / "store" / "db.py").write_text("class Store: ...\n")
    (root / "adapters" / "files.py").write_text("def atomic_write(): ...\n")
    (root / "engine" / "pure.py").write_text("import json\n")
    (root / "engine" / "stored.py").write_text("def f():\n    from tma1.store.db import Store\n")
    (root / "engine" / "mutes.py").write_text("from ..adapters import files\n")
    found = _engine_reaches(root)
    assert ("tma1.engine.stored", "tma1.store.db") in found
    assert ("tma1.engine.mutes", "tma1.adapters.files") in found
    assert {name for name, _ in found} == {"tma1.engine.stored", "tma1.engine.mutes"}
