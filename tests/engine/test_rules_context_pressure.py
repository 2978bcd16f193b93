"""`context_pressure`: the newest request's prompt size against the threshold."""

from __future__ import annotations

from rulekit import SID, at, usage, window

from tma1.engine.anomaly import Channel, Kind, Severity
from tma1.engine.rules.context_pressure import context_pressure
from tma1.engine.window import RuleConfig


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
