"""Every file, test and module README.md and docs/*.md name exists: a module or test that
moves takes its references along (issue 29's first pass left `tests/test_editlines.py`,
`tma1/textmemo.py` and `tests/test_service_session_end.py` behind).

Checked: a repository path in backticks (`tests/…`, `src/tma1/…` or `tma1/…`, `scripts/…`,
`bench/…`, with `::test_name`, which that file must define), a pytest node id written bare (as
docs/evaluation.md cites its fixes), `…name.py::test` (a file of tests/ named so), and a
dotted `tma1.module.name`. `{a,b}` in a path stands for each of its parts; `…` for any
path.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src"
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# What the docs name without its being in the repository, and why.
NOT_IN_REPO = {
    "tests/x.py": "docs/gates.md: how a path in a command matches a read of it",
    "tests/screenshots/": "docs/gates.md: where the browser tests write (git-ignored)",
    "src/tma1/engine/rules/force_push.py": "docs/rules.md: the toy rule a reader adds",
    "tests/engine/rules/test_force_push.py": "docs/rules.md: the toy rule's test",
    "tma1.engine.rules.force_push": "docs/rules.md: the toy rule's module",
    "src/tma1/engine/rules/push_rewrite.py": "docs/rules.md: where toy_rule_suite.py drops it",
}

_ROOTS = r"(?:tests|src/tma1|tma1|scripts|bench)/"
_BACKTICKED = re.compile(rf"`({_ROOTS}[^`\s]*?)(?:::(\w+)(?:\[[^`\]]*\])?)?`")
_NODE_ID = re.compile(rf"(?<![\w/.…`-])({_ROOTS}[\w/.{{}},-]*\.py)::(\w+)")
_ELIDED = re.compile(r"`…([\w.-]+\.py)::(\w+)`")
_MODULE = re.compile(r"(?<![\w/.~-])tma1(?:\.\w+)+(?![\w.-])")


def _refs(text: str) -> Iterator[tuple[int, str, str | None]]:
    """(line, path, test name or None) of every path reference in a doc."""
    for no, line in enumerate(text.splitlines(), start=1):
        for m in _BACKTICKED.finditer(line):
            yield no, m.group(1), m.group(2)
        for m in _NODE_ID.finditer(line):
            yield no, m.group(1), m.group(2)
        for m in _ELIDED.finditer(line):
            yield no, f"tests/…{m.group(1)}", m.group(2)


def _expand(path: str) -> list[str]:
    """`a_{x,y}.py` → `a_x.py`, `a_y.py`."""
    m = re.search(r"\{([^{}]*)\}", path)
    if m is None:
        return [path]
    head, tail = path[: m.start()], path[m.end() :]
    return [p for part in m.group(1).split(",") for p in _expand(head + part.strip() + tail)]


def _files(path: str) -> list[Path]:
    if "…" in path:
        return [p for p in REPO.glob(path.replace("…", "**/*")) if p.is_file()]
    p = (SRC if path.startswith("tma1/") else REPO) / path
    return [p] if p.exists() else []


@cache
def _defines(path: Path) -> frozenset[str]:
    """The functions and classes a Python file defines, at any depth."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return frozenset(n.name for n in ast.walk(tree) if isinstance(n, kinds))


def _missing(path: str, test: str | None) -> str | None:
    for one in _expand(path):
        files = _files(one)
        if not files:
            return f"no {one}"
        if test and not any(f.suffix == ".py" and test in _defines(f) for f in files):
            return f"{one} defines no {test}"
    return None


def test_every_path_the_docs_name_exists() -> None:
    wrong = []
    for doc in DOCS:
        for no, path, test in _refs(doc.read_text(encoding="utf-8")):
            if path in NOT_IN_REPO:
                continue
            if why := _missing(path, test):
                wrong.append(f"{doc.relative_to(REPO)}:{no}: {why}")
    assert wrong == [], "\n".join(wrong)


@cache
def _top_level_names(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, (ast.Assign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return frozenset(names)


def _module_missing(dotted: str) -> str | None:
    """None when `dotted` is a module of src/tma1, or a name one defines at its top."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        base = SRC.joinpath(*parts[:i])
        source = (
            base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        )
        if source.is_file():
            rest = parts[i:]
            if rest and rest[0] not in _top_level_names(source):
                return f"{'.'.join(parts[:i])} defines no {rest[0]}"
            return None
    return f"no module {dotted}"


def test_every_module_the_docs_name_exists() -> None:
    wrong = []
    for doc in DOCS:
        for no, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), start=1):
            for m in _MODULE.finditer(line):
                if m.group(0) not in NOT_IN_REPO and (why := _module_missing(m.group(0))):
                    wrong.append(f"{doc.relative_to(REPO)}:{no}: {m.group(0)}: {why}")
    assert wrong == [], "\n".join(wrong)


def test_the_readmes_map_of_the_package_is_true() -> None:
    """README's "Where things are" names each module and package of src/tma1 in its first
    column (`service.py` stayed there after the first pass moved it to live/)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("## Where things are", 1)[1].split("```", 2)[1]
    named = [
        word
        for line in block.splitlines()
        if line.startswith("  ") and not line.startswith("   ")
        for word in line.split("  ", 2)[1].split()
    ]
    assert len(named) >= 20, named
    missing = [w for w in named if not (SRC / "tma1" / w).exists()]
    assert missing == [], f"README.md, Where things are: no src/tma1/{missing}"


def test_a_moved_path_or_test_is_caught() -> None:
    """The checks above see what they must: a moved file, a renamed test, a gone module."""
    text = (
        "`tests/test_editlines.py` and tests/storable/test_editlines.py::test_gone and "
        "`…test_editlines.py::test_also_gone` and `tests/storable/test_{editlines,nope}.py`"
    )
    assert [_missing(path, test) for _, path, test in _refs(text)] == [
        "no tests/test_editlines.py",
        "no tests/storable/test_nope.py",
        "tests/storable/test_editlines.py defines no test_gone",
        "tests/…test_editlines.py defines no test_also_gone",
    ]
    assert _module_missing("tma1.service") == "tma1 defines no service"
    assert (
        _module_missing("tma1.checks.identity.no_such") == "tma1.checks.identity defines no no_such"
    )
    assert _module_missing("tma1.checks.identity.check_of") is None
