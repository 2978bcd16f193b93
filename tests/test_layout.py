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
