"""Every real recorded session in ../shared/data/sessions goes through its converter
without an exception, is recognised, and yields hook events (skips when absent)."""

from __future__ import annotations

from collections import Counter

from conftest import require_sessions

from tma1.replay.claude_transcript import FORMAT as CLAUDE_TRANSCRIPT
from tma1.replay.codex_rollout import FORMAT as CODEX_ROLLOUT
from tma1.replay.driver import load, merge_items
from tma1.replay.formats import CLAUDE_HOOKLOG
from tma1.replay.model import HOOK


def test_every_corpus_file_converts_without_error() -> None:
    root = require_sessions()
    inputs, problems = load([root])
    assert problems == []
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix != ".md")
    assert sorted(c.path for c in inputs) == sorted(str(f) for f in files)
    for conv in inputs:
        where = conv.path
        assert conv.format in (CLAUDE_TRANSCRIPT, CLAUDE_HOOKLOG, CODEX_ROLLOUT), where
        assert conv.records > 0, where
        events = Counter(i.hook_event for i in conv.items if i.kind == HOOK)
        # (A PostToolUse-only hook log has its PreToolUses in another file.)
        assert events["PreToolUse"] + events["PostToolUse"] > 0, where
        # Every PostToolUse answers a PreToolUse of the same call that came no later —
        # within one file; a hook log's PreToolUses are in its other file, and
        # test_corpus_hook_logs_merge_posts_after_their_pres checks those once merged.
        pre_ts = {
            (i.session_id, i.payload.get("tool_use_id")): i.ts
            for i in conv.items
            if i.hook_event == "PreToolUse" and i.payload and i.payload.get("tool_use_id")
        }
        for i in conv.items:
            if conv.format == CLAUDE_HOOKLOG:
                break
            if i.hook_event in ("PostToolUse", "PostToolUseFailure") and i.payload:
                key = (i.session_id, i.payload.get("tool_use_id"))
                if key[1] is not None:
                    assert key in pre_ts and pre_ts[key] <= i.ts, (where, i.origin)
        for p in conv.problems:
            # Whatever a real file holds that we cannot read is named with file and line.
            assert p.path == conv.path
    items, _ = merge_items(inputs)
    assert [i.ts for i in items] == sorted(i.ts for i in items)
    by_format = Counter(c.format for c in inputs)
    assert by_format[CLAUDE_TRANSCRIPT] and by_format[CODEX_ROLLOUT]


def test_corpus_hook_logs_merge_posts_after_their_pres() -> None:
    root = require_sessions()
    hooks_dir = root / "claude-code-hooks"
    if not hooks_dir.is_dir():
        return
    inputs, _ = load([hooks_dir])
    items, _ = merge_items(inputs)
    assert all(c.synthetic_time for c in inputs)
    posts = [i for i in items if i.hook_event == "PostToolUse"]
    assert posts
    for post in posts:
        earlier = [
            i
            for i in items
            if i.hook_event == "PreToolUse" and i.ts < post.ts and i.session_id == post.session_id
        ]
        assert earlier, post.origin
