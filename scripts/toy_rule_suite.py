"""Run the whole test suite on a copy of this tree with the toy rule of docs/rules.md dropped in.

Issue 29's claim is "a rule is one module": the toy rule, added under another name (its
module and its kind both differ from the docs' `force_push`), passes every test there is.
This script shows it:

1. copies the working tree (the files `git ls-files` lists, tracked and untracked-but-not-
   ignored, as they are on disk) into `<dir>/tma1`, with `<dir>/shared` linked to this
   checkout's `../shared` (the recorded sessions the replay tests read) when it exists;
2. drops the toy's module into `src/tma1/engine/rules/<module>.py` and its test file into
   `tests/engine/rules/test_<module>.py` — the exact text of docs/rules.md, taken out by the
   same function `tests/engine/rules/test_toy_rule.py` uses (`toykit`);
3. gives the copy its own `.venv` (the dev extras, the copy installed editable) and checks
   that the copy's `tma1`, with the toy in its registry, is the one Python imports;
4. regenerates the generated docs (`scripts/kinds_table.py --write`: the README's kinds
   table, the one file that changes with a rule);
5. runs `scripts/test` (ruff, mypy, then pytest: what the README's "Tests" names) there,
   the PostgreSQL cluster of TMA1_TEST_POSTGRES_URL if set, the agents of `.agents/`
   linked in, and prints pytest's summary line.

    python scripts/toy_rule_suite.py                    # the whole suite (15-30 min, 2 cores)
    python scripts/toy_rule_suite.py -- tests/engine -x # extra arguments go to pytest
    python scripts/toy_rule_suite.py --keep             # leave the copy for a rerun

Exit code: scripts/test's (0 when everything passed); 2 on a bad argument or a copy whose
`tma1` is not the one imported.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "engine" / "rules"))
from toykit import drop_toy  # noqa: E402  (the test's own extraction, not a copy of it)

# Not the docs' `force_push`, and not the names test_toy_rule.py drops in (it runs inside
# this suite too, with this toy already in the registry).
MODULE = "push_rewrite"
KIND = "remote_history_rewritten"
SUMMARY = re.compile(r"^=+ .*\b(passed|failed|error|errors|skipped|deselected)\b.* in [\d.]+s.*=+$")


def _files(repo: Path) -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout
    return [f for f in out.decode().split("\0") if f]


def copy_tree(repo: Path, dest: Path) -> int:
    """Copy the working tree's files (as on disk, uncommitted edits included) into `dest`."""
    n = 0
    for rel in _files(repo):
        src = repo / rel
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the working tree, not yet in the index
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel, follow_symlinks=False)
        n += 1
    return n


def _step(what: str, cmd: list[str], cwd: Path, env: dict[str, str]) -> str:
    print(f"toy_rule_suite: {what}", flush=True)
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
        raise SystemExit(f"toy_rule_suite: {what} failed (exit {r.returncode})")
    return r.stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--module", default=MODULE, help=f"the toy's module name ({MODULE})")
    ap.add_argument("--kind", default=KIND, help=f"the toy's kind ({KIND})")
    ap.add_argument("--dir", type=Path, help="work in this (new or empty) directory")
    ap.add_argument("--keep", action="store_true", help="leave the copy in place afterwards")
    ap.add_argument("pytest_args", nargs="*", help="passed on to pytest (after `--`)")
    args = ap.parse_args(argv)

    if args.dir:
        root = args.dir.resolve()
        if root.exists() and any(root.iterdir()):
            print(f"toy_rule_suite: {root} is not empty; give a new directory", file=sys.stderr)
            return 2
        root.mkdir(parents=True, exist_ok=True)
    else:
        root = Path(tempfile.mkdtemp(prefix="tma1-toy-suite-"))
    try:
        return _run(root, args)
    finally:
        if args.keep or args.dir:
            print(f"toy_rule_suite: the copy stays in {root}", flush=True)
        else:
            shutil.rmtree(root, ignore_errors=True)


def _run(work: Path, args: argparse.Namespace) -> int:
    # The tests read ../shared (the spec, the recorded sessions): the copy gets it too.
    root = work / "tma1"
    root.mkdir()
    if (REPO.parent / "shared").is_dir():
        (work / "shared").symlink_to((REPO.parent / "shared").resolve(), target_is_directory=True)
    print(f"toy_rule_suite: copied {copy_tree(REPO, root)} files into {root}", flush=True)
    try:
        rule, test = drop_toy(
            root / "src", root / "tests" / "engine" / "rules", args.module, args.kind
        )
    except ValueError as exc:
        print(f"toy_rule_suite: {exc}", file=sys.stderr)
        return 2
    print(
        f"toy_rule_suite: the docs' toy rule is {rule.relative_to(root)} (kind "
        f"{args.kind!r}), its test {test.relative_to(root)}",
        flush=True,
    )
    agents = REPO / ".agents"
    if agents.exists():
        (root / ".agents").symlink_to(agents.resolve(), target_is_directory=True)

    # The copy's own environment: nothing of this checkout's venv or PYTHONPATH leaks in.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    py = str(root / ".venv" / "bin" / "python")
    _step("creating the copy's .venv", [sys.executable, "-m", "venv", ".venv"], root, env)
    _step(
        "installing the copy (editable, dev extras) into it",
        [py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-e", ".[dev]"],
        root,
        env,
    )
    probe = (
        "import json, tma1, tma1.engine.rules as r;"
        "print(json.dumps([tma1.__file__, list(r.SPECS)]))"
    )
    where, specs = json.loads(_step("checking which tma1 it imports", [py, "-c", probe], root, env))
    print(f"toy_rule_suite: tma1 is {where}; its rules: {', '.join(specs)}", flush=True)
    if not Path(where).resolve().is_relative_to(root / "src") or args.kind not in specs:
        print(
            f"toy_rule_suite: the copy's tma1 (with {args.kind}) is not the one imported",
            file=sys.stderr,
        )
        return 2
    _step(
        "regenerating the README's kinds table",
        [py, "scripts/kinds_table.py", "--write"],
        root,
        env,
    )

    print("toy_rule_suite: running scripts/test (ruff, mypy, pytest)", flush=True)
    summary = ""
    with subprocess.Popen(
        ["bash", "scripts/test", *args.pytest_args],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            if SUMMARY.match(line.strip()):
                summary = line.strip()
        rc = proc.wait()
    print(
        f"toy_rule_suite: with {args.module}.py (kind {args.kind}) dropped in: "
        f"{summary or '(no pytest summary: ruff or mypy failed first?)'}; scripts/test exit {rc}",
        flush=True,
    )
    return rc


if __name__ == "__main__":
    sys.exit(main())
