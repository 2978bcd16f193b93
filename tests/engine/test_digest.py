"""The digest and the Stop reason: limits, order, and what must survive when a finding's
text is too long. Their envelopes are each agent's (tests/adapters/test_agents.py)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tma1.engine.anomaly import Anomaly, delivery_order
from tma1.engine.digest import (
    CLOSE_TAG,
    DIGEST_MAX_CHARS,
    OPEN_TAG,
    STOP_MAX_CHARS,
    digest,
    stop_block_reason,
    stop_reason,
)


def mk(i: int, *, severity: str = "medium", evidence: str = "", suggestion: str = "",
       files: tuple[str, ...] = (), ts: int = 0) -> Anomaly:  # fmt: skip
    return Anomaly(
        kind="test_stuck",
        severity=severity,
        channel="user_prompt_submit",
        evidence=evidence or f"evidence {i}",
        suggestion=suggestion or f"FIX-{i} do the thing",
        related_files=files,
        subject=f"s{i}",
        last_evidence_ts=ts,
    )


def test_nothing_to_say_is_an_empty_answer() -> None:
    assert digest([]) == "" and stop_reason([]) == ""


def test_digest_carries_at_most_four_findings_in_the_order_given() -> None:
    text = digest([mk(i) for i in range(6)])
    assert text.startswith(OPEN_TAG + "\n") and text.endswith("\n" + CLOSE_TAG)
    assert "has 4 findings" in text
    assert [f"FIX-{i}" in text for i in range(6)] == [True] * 4 + [False] * 2
    assert text.index("FIX-0") < text.index("FIX-1") < text.index("FIX-3")


def test_delivery_order_is_high_first_then_newest_evidence() -> None:
    fs = [mk(0, ts=5), mk(1, severity="high", ts=1), mk(2, ts=9), mk(3, severity="high", ts=7)]
    assert [a.subject for a in delivery_order(fs)] == ["s3", "s1", "s2", "s0"]


def test_long_findings_are_cut_but_every_suggestion_survives() -> None:
    huge = [mk(i, evidence="x" * 9_000, suggestion=f"FIX-{i} " + "y" * 5_000) for i in range(4)]
    text = digest(huge)
    assert len(text) < DIGEST_MAX_CHARS and text.endswith(CLOSE_TAG)
    assert all(f"FIX-{i}" in text for i in range(4))
    reason = stop_reason(huge)
    assert len(reason) < STOP_MAX_CHARS
    assert all(f"FIX-{i}" in reason for i in range(3)) and "FIX-3" not in reason


def test_related_files_are_listed_and_capped() -> None:
    files = tuple(f"/p/f{i}.py" for i in range(8))
    text = digest([mk(0, files=files)])
    assert "/p/f0.py, /p/f1.py, /p/f2.py, /p/f3.py, /p/f4.py (+3 more)" in text
    assert "/p/f5.py" not in text


def test_stop_reason_names_each_suggestion() -> None:
    reason = stop_reason([mk(0), mk(1)])
    assert reason.startswith("tma1: do not stop yet, 2 problems are unresolved:")
    assert "FIX-0 do the thing" in reason and "FIX-1 do the thing" in reason
    # Either form an agent's envelope writes (Claude Code's context, the others' block).
    body = {"hookSpecificOutput": {"hookEventName": "Stop", "additionalContext": reason}}
    for form in (body, {"decision": "block", "reason": reason}):
        assert stop_block_reason(json.dumps(form)) == reason
    assert stop_block_reason("") is None and stop_block_reason("<tma1-context>x") is None


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=6_000)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(_text, _text, st.lists(st.text(max_size=300), max_size=12)),
        min_size=1,
        max_size=8,
    )
)
def test_limits_hold_for_any_text(items: list[tuple[str, str, list[str]]]) -> None:
    fs = [
        mk(i, evidence=ev or "e", suggestion=sg or "s", files=tuple(files))
        for i, (ev, sg, files) in enumerate(items)
    ]
    text = digest(fs)
    assert len(text) < DIGEST_MAX_CHARS
    assert text.startswith(OPEN_TAG) and text.endswith(CLOSE_TAG)
    assert 0 < len(stop_reason(fs)) < STOP_MAX_CHARS
