"""How many lines `src/` has, and how many of them were last written for behaviour added
after 7726d91 (the commit issue 16 measured: 16,066 lines).

Issue 16 asks for a smaller `src/` "for the same behaviour". Six issues landed behaviour
after that commit, so the whole count is not that comparison. This script splits the
lines by `git blame -w -M -C -C -C`: whitespace is ignored, and a line moved or copied
from any file of any earlier commit keeps that origin (the strictest git offers). A line
last written by a commit of one of those features is the feature's; every other line
(older, or rewritten since by a refactor, a fix or this issue) counts as the old
behaviour's. A refactor that rewrote feature code therefore counts against the old
behaviour, never for it.

    .venv/bin/python scripts/src_lines.py [REV] [--files]

Needs the whole history (a full clone).
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys

BASE = "7726d91"

# Each feature: the merge commits that landed it on main (its branch's own commits count)
# and the commits made on main directly.
FEATURES: dict[str, tuple[list[str], list[str]]] = {
    "14 real agents (Codex exit status and patches, trust, hook cost, suite)": (
        ["d6d829e", "59c594f", "60bda7b"],
        ["e3ad023", "71d18cf"],
    ),
    "15 detection v2 (checks, lanes, context epochs, hand-back, edited lines)": (
        ["227be5c", "2e64d05", "995cf3d", "8d57dfd", "3f0d75e"],
        ["2be0508"],
    ),
    "17 trust and polish (doctor, muting, journal, dashboard)": (
        ["ea39eca", "0181d73", "41b508c"],
        [],
    ),
    "18 session bundle": (["925b60c"], []),
    "19 more agents (Gemini CLI, Copilot CLI)": (["601b2aa"], ["8154a93"]),
    "20 always on (tma1 service)": (["bccc7d9"], ["30eeec5"]),
}


def git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout


def commits_of(merges: list[str], direct: list[str]) -> set[str]:
    found: set[str] = set()
    for merge in merges:
        found |= set(git("rev-list", f"{merge}^1..{merge}^2").split())
    found |= {git("rev-parse", c).strip() for c in direct}
    return found


def line_origins(rev: str, path: str) -> list[str]:
    """The commit that last wrote each line of `path` at `rev`."""
    out = git("blame", "-w", "-M", "-C", "-C", "-C", "--porcelain", rev, "--", path)
    origins: list[str] = []
    for line in out.splitlines():
        head = line.split(" ", 1)[0]
        # In --porcelain, a group header is "<sha> <orig> <final> [<count>]"; content lines
        # start with a tab, and no other key is 40 hex digits.
        is_sha = len(head) == 40 and all(c in "0123456789abcdef" for c in head)
        if is_sha and len(line.split()) >= 3:
            origins.append(head)
    return origins


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rev", nargs="?", default="HEAD")
    parser.add_argument("--files", action="store_true", help="list feature lines per file")
    args = parser.parse_args(argv)
    owner: dict[str, str] = {}
    for name, (merges, direct) in FEATURES.items():
        for sha in commits_of(merges, direct):
            owner.setdefault(sha, name)
    paths = [p for p in git("ls-tree", "-r", "--name-only", args.rev, "src").split()
             if p.endswith(".py")]
    totals: collections.Counter[str] = collections.Counter()
    per_file: dict[str, collections.Counter[str]] = {}
    for path in paths:
        counts = collections.Counter(owner.get(sha, "") for sha in line_origins(args.rev, path))
        per_file[path] = counts
        totals.update(counts)
    whole = sum(totals.values())
    print(f"src/ at {args.rev}: {whole} lines")
    for name in FEATURES:
        print(f"  {totals[name]:6}  issue {name}")
    print(f"  {totals['']:6}  everything else: the behaviour of {BASE} (16,066 lines there)")
    if args.files:
        for path, counts in sorted(per_file.items()):
            added = sum(n for k, n in counts.items() if k)
            if added:
                print(f"{added:5} {counts['']:5}  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
