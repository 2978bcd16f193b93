"""The rule registry and the contract every finding keeps, over one busy window."""

from __future__ import annotations

from rulekit import (
    OTHER,
    SID,
    at,
    bash_fail,
    change,
    edit,
    read,
    src,
    usage,
    window,
)

from tma1.engine.anomaly import Channel, Kind, Severity
from tma1.engine.rules import RULES, SPECS
from tma1.engine.window import RuleConfig


def test_registry_maps_every_kind_to_its_rule_the_seeds_six_first() -> None:
    assert list(RULES)[: len(Kind)] == [k.value for k in Kind]
    for kind, rule in RULES.items():
        assert rule.__name__ == kind


def test_every_rule_is_silent_on_an_empty_window() -> None:
    for kind, rule in RULES.items():
        assert rule(window(), at(1), RuleConfig()) == [], kind


def busy_window():  # type: ignore[no-untyped-def]
    foo = src("internal/foo.go")
    out = "internal/foo.go:12:3: undefined: bar\n--- FAIL: TestFoo (0.00s)\nFAIL\tex.com/x\t0.1s"
    events = [
        read(at(1), foo),
        edit(at(3), foo),
        *(bash_fail(at(4 + i), "go test ./...", out) for i in range(3)),
    ]
    changes = [change(at(2), foo, writer=OTHER)]
    return window(events, changes, usage=usage(at(6), 150_000))


def test_each_rule_fires_on_the_busy_window_and_keeps_the_contract() -> None:
    w = busy_window()
    now = at(10)
    snapshot = (list(w.events), list(w.changes), w.usage)
    seen: dict[str, int] = {}
    for kind, rule in RULES.items():
        for a in rule(w, now, RuleConfig()):
            seen[kind] = seen.get(kind, 0) + 1
            assert a.kind == kind
            assert a.session_id == SID
            assert a.first_emitted_at == 0
            assert a.evidence and a.suggestion
            assert isinstance(a.related_files, tuple)
            assert 0 < a.last_evidence_ts <= now
            assert Severity(a.severity) and Channel(a.channel)
            # The spec says what the rule emits: its severities and channels.
            assert a.severity in SPECS[kind].severity.levels
            assert a.channel in SPECS[kind].channels
            if a.channel == Channel.STOP_BLOCK:
                assert a.severity == Severity.HIGH
    # The seed's six each fire once here; a rule added since may or may not.
    assert {k: n for k, n in seen.items() if k in set(Kind)} == {k.value: 1 for k in Kind}
    assert all(n == 1 for n in seen.values())
    # Rules are pure: the window is left as it was.
    assert (list(w.events), list(w.changes), w.usage) == snapshot


def test_rules_are_deterministic() -> None:
    w = busy_window()
    for rule in RULES.values():
        assert rule(w, at(10), RuleConfig()) == rule(w, at(10), RuleConfig())
