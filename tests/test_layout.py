"""The house rules of src/ (issue 16), checked: SQL only in store/, no module over 600
lines, no import cycle between tma1's modules."""

from __future__ import annotations

import ast
import re
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


# What the engine may not import (design §5: the engine is pure; its live ports are in
# tma1.live, the agents' knowledge in adapters/). A module counts as every module under it.
_ENGINE_FORBIDDEN = ("tma1.store", "tma1.adapters", "tma1.dialects")
# engine/digest.py still names the agents' hook events through tma1.dialects until the
# AgentSpec work (issue 29) moves that out; the lead drops this entry after merging it.
_ENGINE_ALLOWED = {("tma1.engine.digest", "tma1.dialects")}


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
    assert _engine_reaches() - _ENGINE_ALLOWED == set()


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
