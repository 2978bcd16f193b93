"""scripts/evaluate.py end to end on a small corpus: every emit listed, labels applied by
key, unlabelled emits and labels without an emit both shown, the previous run compared, the
misses section written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO
from replaykit import failing_build_session


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / "evaluate.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_evaluate_writes_the_doc_with_labels_and_baseline(tmp_path: Path) -> None:
    corpus = tmp_path / "sessions"
    corpus.mkdir()
    failing_build_session(corpus / "s.jsonl")
    out, labels = tmp_path / "evaluation.md", tmp_path / "labels.json"

    first = run("--sessions", str(corpus), "--out", str(out), "--labels", str(labels))
    # (--misses defaults to the repository's judgements; none of them match this corpus.)
    assert first.returncode == 0, first.stderr
    doc = out.read_text()
    assert "| repeated_failed_build | 1 | 0 | 0 | 1 |" in doc  # one emit, unlabelled
    assert (
        # The subject is the check's identity (design §2.15): `go build ./...` is `go build`.
        "| 10:03:20 | repeated_failed_build | high | stop_block | go build | unlabelled"
        in doc
    )

    key = "drv-1|repeated_failed_build|high|go build|2025-02-03T10:03:20.000Z"
    gone = "drv-1|test_stuck|medium|x|2025-02-03T10:00:00.000Z"
    labels.write_text(
        json.dumps(
            {
                "labels": {
                    key: {"label": "tp", "reason": "the build was still broken"},
                    gone: {"label": "fp", "reason": "an emit of older rules"},
                },
                "previous": {"about": "older rules", "kinds": {"repeated_failed_build": [2, 1, 1]}},
                "flaws": [{"title": "An example flaw", "fix": "do better"}],
            }
        )
    )
    second = run("--sessions", str(corpus), "--out", str(out), "--labels", str(labels))
    assert second.returncode == 0, second.stderr
    doc = out.read_text()
    assert "| repeated_failed_build | 1 | 1 | 0 | 0 | 100% |" in doc
    assert "| TP | the build was still broken |" in doc
    assert "### An example flaw" in doc and "- **fix**: do better" in doc
    assert "## Labels whose emit no longer happens" in doc and "an emit of older rules" in doc
    assert "## Before and after detection v2" in doc
    assert "| repeated_failed_build | 2 | 1 | 1 | 50% | 1 | 1 | 0 | 100% |" in doc
    assert "## Misses: where an agent looped and tma1 said nothing" in doc

    check = run("--sessions", str(corpus), "--out", str(out), "--labels", str(labels), "--check")
    assert check.returncode == 0
    out.write_text(doc + "edited by hand\n")
    stale = run("--sessions", str(corpus), "--out", str(out), "--labels", str(labels), "--check")
    assert stale.returncode == 1 and "out of date" in stale.stderr


def test_evaluate_context_prints_each_unlabelled_emit_with_its_surroundings(
    tmp_path: Path,
) -> None:
    corpus = tmp_path / "sessions"
    corpus.mkdir()
    failing_build_session(corpus / "s.jsonl")
    proc = run("--sessions", str(corpus), "--labels", str(tmp_path / "none.json"), "--context")
    assert proc.returncode == 0, proc.stderr
    assert "drv-1|repeated_failed_build|high|go build|2025-02-03T10:03:20.000Z" in proc.stdout
    assert "PostToolUseFailure Bash go build ./... ERR: Exit code 1" in proc.stdout
    assert "--- before" in proc.stdout and "--- after" in proc.stdout
