"""The toy rule of docs/rules.md, taken out of that page and dropped into a tree under a name
of the caller's choosing. `test_toy_rule.py` and `scripts/toy_rule_suite.py` both use it, so
the test and the whole-suite run drop in the very same text.

The page names the rule `force_push` (its module, its run function and its kind). Dropping
it in as `module`/`kind` rewrites only that name: the module file is `<module>.py`, the test
file imports `tma1.engine.rules.<module>`, and every other `force_push` (the `KIND`
string, the function) becomes `kind` — so a rule whose module and kind both differ from the
docs' proves nothing downstream knows the docs' name."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "rules.md"
DOCS_NAME = "force_push"
# The names test_toy_rule.py (and toy_rule_paths.py, which it runs) drop the toy in under.
# scripts/toy_rule_suite.py uses others, since this test runs inside its copy too.
TOY_MODULE = "shove"
TOY_KIND = "branch_shoved"


def toy_blocks(doc: Path = DOC) -> tuple[str, str]:
    """The toy rule's module and its test file, exactly as docs/rules.md shows them."""
    module, tests = re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)
    return module, tests


def renamed(text: str, module: str, kind: str) -> str:
    """`text` with the docs' module path pointing at `module` and every other use of the
    docs' name (the kind, the run function) become `kind`."""
    text = text.replace(f"tma1.engine.rules.{DOCS_NAME} ", f"tma1.engine.rules.{module} ")
    return re.sub(rf"\b{DOCS_NAME}\b", kind, text)


def drop_toy(src: Path, tests_dir: Path, module: str, kind: str) -> tuple[Path, Path]:
    """Write the toy's module into `src`'s rules package as `<module>.py` and its test file
    into `tests_dir` as `test_<module>.py`; return both paths."""
    if not (module.isidentifier() and kind.isidentifier()):
        raise ValueError(f"module {module!r} and kind {kind!r} must be Python identifiers")
    rules = src / "tma1" / "engine" / "rules"
    if (rules / f"{module}.py").exists():
        raise ValueError(f"{rules / module}.py already exists: pick another module name")
    code, tests = toy_blocks()
    rule_file, test_file = rules / f"{module}.py", tests_dir / f"test_{module}.py"
    rule_file.write_text(renamed(code, module, kind), encoding="utf-8")
    tests_dir.mkdir(parents=True, exist_ok=True)
    test_file.write_text(renamed(tests, module, kind), encoding="utf-8")
    return rule_file, test_file
