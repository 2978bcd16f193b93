"""`context_pressure`: the newest request's prompt size against the threshold."""

from __future__ import annotations

from dataclasses import replace

from rulekit import SID, at, usage, window

from tma1.engine.anomaly import Channel, Kind, Severity
from tma1.engine.context import context_threshold
from tma1.engine.rules.context_pressure import context_pressure
from tma1.engine.window import RuleConfig
from tma1.events import Usage


def test_at_the_threshold_fires() -> None:
    [a] = context_pressure(window(usage=usage(at(1), 100_000)), at(2), RuleConfig())
    assert (a.kind, a.severity, a.channel, a.subject) == (
        Kind.CONTEXT_PRESSURE,
        Severity.MEDIUM,
        Channel.USER_PROMPT_SUBMIT,
        "",
    )
    assert a.last_evidence_ts == at(1) and a.session_id == SID
    assert "100,000" in a.evidence


def test_below_the_threshold_is_silent() -> None:
    assert context_pressure(window(usage=usage(at(1), 99_999)), at(2), RuleConfig()) == []


def test_no_usage_known_is_silent() -> None:
    assert context_pressure(window(), at(2), RuleConfig()) == []


def test_threshold_comes_from_the_config() -> None:
    w = window(usage=usage(at(1), 60_000))
    assert context_pressure(w, at(2), RuleConfig()) == []
    [a] = context_pressure(w, at(2), RuleConfig(context_pressure_threshold=50_000))
    assert "60,000" in a.evidence and "50,000" in a.evidence


def test_usage_after_now_is_not_seen() -> None:
    assert context_pressure(window(usage=usage(at(3), 150_000)), at(2), RuleConfig()) == []


# --- the threshold is half the model's window (design §2.12; issue 15, pattern 5) ----------


def _usage(occupancy: int, *, model: str | None = None, ctx: int | None = None) -> Usage:
    return replace(usage(at(1), occupancy), model=model, context_window=ctx)


def test_a_recorded_window_makes_the_threshold_half_of_it() -> None:
    # A Codex session on gpt-5.4 (258,400-token window; data/sessions/codex/ship-rollout-…
    # -019ce3fb…): a fixed 100k fired at 126,794 tokens, 49 % of the window.
    w = window(usage=_usage(126_794, model="gpt-5.4", ctx=258_400))
    assert context_pressure(w, at(2), RuleConfig()) == []
    [a] = context_pressure(
        window(usage=_usage(131_712, model="gpt-5.4", ctx=258_400)), at(2), RuleConfig()
    )
    assert "129,200-token threshold" in a.evidence
    assert "50 % of the 258,400-token context window of gpt-5.4" in a.evidence


def test_the_window_from_the_model_name() -> None:
    cases = {
        "claude-sonnet-4-5-20250929": 100_000,  # 200k
        "claude-opus-4-6": 100_000,
        "claude-sonnet-4-5-20250929[1m]": 500_000,  # Claude Code's long-context alias
        "gpt-5-codex": 100_000,  # window unknown without the rollout's number
        "": 100_000,
    }
    for model, threshold in cases.items():
        below = window(usage=_usage(threshold - 1, model=model or None))
        assert context_pressure(below, at(2), RuleConfig()) == [], model
        at_it = window(usage=_usage(threshold, model=model or None))
        assert len(context_pressure(at_it, at(2), RuleConfig())) == 1, model


def test_a_prompt_past_200k_means_the_long_context_window() -> None:
    assert context_threshold(_usage(250_000, model="claude-sonnet-4-5"), None) == 500_000
    assert context_threshold(_usage(150_000, model="claude-sonnet-4-5"), None) == 100_000


def test_the_configured_threshold_wins_over_the_window() -> None:
    u = _usage(60_000, model="gpt-5.4", ctx=258_400)
    [a] = context_pressure(window(usage=u), at(2), RuleConfig(context_pressure_threshold=50_000))
    assert "50,000-token threshold (model gpt-5.4)." in a.evidence


def test_an_unbelievable_recorded_window_is_ignored() -> None:
    assert context_threshold(_usage(1, model="claude-opus-4-6", ctx=12), None) == 100_000
    assert context_threshold(_usage(1, ctx=10**12), None) == 100_000


# --- one-shot per context epoch (design §2.17) --------------------------------------------


def test_the_subject_names_the_context_epoch() -> None:
    w = window(usage=usage(at(10), 150_000))
    [before] = context_pressure(w, at(11), RuleConfig())
    w.epoch_start_ts = at(5)
    [after] = context_pressure(w, at(11), RuleConfig())
    assert before.subject == "" and after.subject == "compacted 2023-11-14T22:18:20.000Z"
    assert before.stable_key != after.stable_key
    assert "filled up again since it was compacted" in after.evidence


def test_a_request_from_before_the_compaction_says_nothing() -> None:
    w = window(usage=usage(at(4), 150_000))
    w.epoch_start_ts = at(5)
    assert context_pressure(w, at(6), RuleConfig()) == []


def test_a_compaction_row_is_not_a_request() -> None:
    u = replace(usage(at(4), 150_000), kind="compaction")
    assert context_pressure(window(usage=u), at(6), RuleConfig()) == []
