"""Fingerprint `tma1 replay --json` over a corpus, for refactors that must not change behaviour.

Prints one `sha256  path` line per recorded session and a last line for the whole corpus.
Wall-clock figures (`elapsed_s`) are dropped: they are the only part of the document that
differs between two runs of the same code.

    python scripts/replay_fingerprint.py ../shared/data/sessions > before.txt
    ... change the code ...
    python scripts/replay_fingerprint.py ../shared/data/sessions | diff before.txt -
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

VOLATILE = {"elapsed_s"}


def _strip(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _strip(v) for k, v in doc.items() if k not in VOLATILE}
    if isinstance(doc, list):
        return [_strip(v) for v in doc]
    return doc


def fingerprint(path: Path) -> str:
    out = subprocess.run(
        [str(Path(sys.executable).with_name("tma1")), "replay", "--json", str(path)],
        capture_output=True, text=True, check=False,
    )
    body = json.dumps(_strip(json.loads(out.stdout)), sort_keys=True) if out.stdout else ""
    return hashlib.sha256(f"{out.returncode}\n{body}".encode()).hexdigest()


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: replay_fingerprint.py DIR_OR_FILE ...", file=sys.stderr)
        return 2
    files = sorted(p for a in argv for p in ([Path(a)] if Path(a).is_file() else Path(a).rglob("*"))
                   if p.is_file() and p.suffix in {".json", ".jsonl"})
    whole = hashlib.sha256()
    for path in files:
        digest = fingerprint(path)
        whole.update(digest.encode())
        print(f"{digest}  {path}", flush=True)
    print(f"{whole.hexdigest()}  (all {len(files)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
