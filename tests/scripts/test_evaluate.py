"""scripts/evaluate.py end to end on a small corpus: every emit listed, labels applied by
key, unlabelled emits and labels without an emit both shown, the previous run compared, the
misses section written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO
from replaykit import Transcript, failing_build_session


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


def _project_corpus(tmp_path: Path) -> tuple[Path, Path]:
    """Two corpus folders (the old layout and batch 3's) holding two sessions of one
    repository: the first breaks `go build` and stops on it, the second starts after."""
    first, second = tmp_path / "sessions", tmp_path / "batch"
    (first / "claude-code").mkdir(parents=True)
    (second / "claude-code" / "app-0123abcd" / "logs").mkdir(parents=True)
    t = Transcript(sid="aaaaaaaa-0001", cwd="/work/app")
    t.prompt(0, "make it build")
    t.bash(5, "go build ./...", "", error=False)
    for k in range(3):
        out = "Exit code 1\n./main.go:7:2: undefined: x"
        t.bash(60 + 30 * k, "go build ./...", out, error=True)
    t.say(200, "Done: it builds now.")
    t.write(first / "claude-code" / "app-1.jsonl")
    u = Transcript(sid="bbbbbbbb-0002", cwd="/work/app")
    u.prompt(600, "carry on")
    u.say(610, "Looking.")
    u.write(second / "claude-code" / "app-0123abcd" / "logs" / "s2.jsonl")
    return first, second


def test_evaluate_replays_a_projects_sessions_together_for_bundles_and_stops(
    tmp_path: Path,
) -> None:
    first, second = _project_corpus(tmp_path)
    out, items, stop_file = tmp_path / "e.md", tmp_path / "items.json", tmp_path / "stops.json"
    args = ("--sessions", str(first), "--sessions", str(second),
            "--sessions", str(tmp_path / "absent"), "--out", str(out),
            "--labels", str(tmp_path / "labels.json"), "--bundle-items", str(items),
            "--stops", str(stop_file))  # fmt: skip
    proc = run(*args)
    assert proc.returncode == 0, proc.stderr
    assert "absent is absent; left out" in proc.stderr
    doc = out.read_text()
    # Both folders are read, the batch-3 file named by its repository folder.
    assert "app-1.jsonl" in doc and "app-0123abcd/s2.jsonl" in doc
    # The second session's start is answered with what the first left: the build it broke
    # (the project replay; each session alone would have said nothing) and the session.
    bundle = doc.split("## Session bundle items", 1)[1].split("## Stops whose", 1)[0]
    assert "| `bbbbbbbb` | 2025-02-03T10:10:00 | check |" in bundle
    assert "broken by session aaaaaaaa (claude-code)" in bundle
    # The first session ended its turn (its Stop) 6 min before: idle, not "active".
    assert "| peer |" not in bundle
    assert "0 of 0 judged items true**, 1 unjudged" in bundle
    stops = doc.split("## Stops whose newest check failed", 1)[1]
    row = "| `aaaaaaaa` | 2025-02-03T10:03:20 | 10:02:02 `go build ./...` | block | unjudged"
    assert row in stops

    items.write_text(json.dumps({"items": {
        "bbbbbbbb-0002|check|go build": {"failing": True, "broke": "aaaaaaaa", "reason": "r1"},
        "bbbbbbbb-0002|peer|aaaaaaaa-0001": {"true": False, "pattern": "not active",
                                             "reason": "r2"},
    }}))  # fmt: skip
    stop_file.write_text(json.dumps({"stops": {
        "aaaaaaaa-0001|2025-02-03T10:03:20.000Z": {"should": "block", "why": "fresh break",
                                                   "reason": "r3"},
    }}))  # fmt: skip
    assert run(*args).returncode == 0
    doc = out.read_text()
    assert "Session bundle items (project replay): **1 of 1 true**" in doc
    assert "| true | r1 (broken: aaaaaaaa) |" in doc
    gone = "Judged items the replay no longer produces: `bbbbbbbb-0002\\|peer\\|aaaaaaaa-0001`"
    assert gone in doc
    assert "Stops whose newest check failed: **1 of 1 right** — blocked rightly 1 of 1" in doc
    assert "| block | block | right | fresh break: r3 |" in doc
    assert run(*args, "--check").returncode == 0

    # The blame is a fact of the session: a text naming another session is false.
    items.write_text(json.dumps({"items": {
        "bbbbbbbb-0002|check|go build": {"failing": True, "broke": "", "reason": "r1"},
    }}))  # fmt: skip
    assert run(*args).returncode == 0
    assert "| **false** | r1 (broken: before the recordings) | wrong blame |" in out.read_text()
