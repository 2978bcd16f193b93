"""The six rules over real recorded sessions (skipped when ../shared/data is absent).

Each session is converted by the replay converter into hook payloads, parsed by the real
parser, and the rules run at every Stop/UserPromptSubmit on the last 60 minutes — what
the live detector would see. The assertions pin the findings a human reading these
sessions agrees with, and the ones that must not appear.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import require_sessions

from tma1.checks import runs_only_plumbing
from tma1.engine.anomaly import Anomaly, Kind
from tma1.engine.rules import RULES
from tma1.engine.window import CHANGES_WINDOW_MS, EVENTS_WINDOW_MS, RuleConfig, SessionWindow
from tma1.events import HookEvent, parse_payload


def findings_of(*paths: Path) -> dict[str, list[Anomaly]]:
    from tma1.replay.driver import load, merge_items

    converted, _ = load(list(paths))
    items, _ = merge_items(converted)
    events: dict[str, list[HookEvent]] = defaultdict(list)
    usage = {}
    changes = []
    start: dict[str, int] = {}
    seen: set[tuple[str, str]] = set()
    out: dict[str, list[Anomaly]] = defaultdict(list)
    for it in items:
        if it.kind == "usage" and it.usage is not None:
            usage[it.session_id] = it.usage
        elif it.kind == "file_change" and it.change is not None:
            changes.append(it.change)
        elif it.kind == "hook" and it.payload is not None:
            ev = parse_payload(it.payload, ts=it.ts, source=it.source or "claude-code")
            events[ev.session_id].append(ev)
            start.setdefault(ev.session_id, ev.ts)
            if ev.event_type not in ("Stop", "UserPromptSubmit"):
                continue
            window = SessionWindow(
                session_id=ev.session_id,
                project=ev.project,
                events=[e for e in events[ev.session_id] if e.ts >= ev.ts - EVENTS_WINDOW_MS],
                changes=[c for c in changes if c.ts >= ev.ts - CHANGES_WINDOW_MS],
                usage=usage.get(ev.session_id),
                session_start_ts=start[ev.session_id],
            )
            for kind, rule in RULES.items():
                for a in rule(window, ev.ts, RuleConfig()):
                    if (ev.session_id, a.stable_key) not in seen:
                        seen.add((ev.session_id, a.stable_key))
                        out[kind].append(a)
    return out


def session(name: str) -> Path:
    path = require_sessions() / "claude-code" / name
    if not path.is_file():
        pytest.skip(f"{name} is absent")
    return path


def test_go_session_repeated_build_and_broken_build_name_file_and_line() -> None:
    found = findings_of(session("templar-a46211b7.chat.json"))
    # Subjects are check identities (design §2.15): `go build -o templar main.go` is `go build`.
    repeated = {a.subject: a for a in found[Kind.REPEATED_FAILED_BUILD]}
    assert "go build" in repeated
    assert re.search(r"\.go:\d+:\d+: ", repeated["go build"].suggestion)
    broken = {a.subject: a for a in found[Kind.BUILD_BROKEN_AFTER_MY_EDIT]}
    high = broken["go build"]
    assert high.severity == "high" and high.channel == "stop_block"
    assert high.related_files
    for a in broken.values():
        if "stop" in a.extra:
            continue  # a Stop's fresh break or unverified fix (design §2.22): no location
        # "Fix <file>:<line>": the file the finding is about, and the line the output gave.
        m = re.match(r"Fix (\S+\.go):(\d+) \(`(.+)`\)", a.suggestion)
        assert m, a.suggestion
        assert f"{m.group(1)}:{m.group(2)}" in m.group(3), a.suggestion  # the quote's own line


def test_lint_session_reports_the_open_streak_and_not_the_fixed_one() -> None:
    # One session over two files: bodyclose was still failing at the 18:57 Stop;
    # usestdlibvars failed 12 times but passed ("0 issues") before the next Stop.
    found = findings_of(
        session("templar-373740ff.chat.json"), session("templar-d423c9b0.chat.json")
    )
    # One check, `golangci-lint run`, whatever linters are enabled (they are its scope).
    repeated = [a for a in found[Kind.REPEATED_FAILED_BUILD] if a.subject == "golangci-lint run"]
    assert any("--enable-only bodyclose" in a.suggestion for a in repeated)
    for a in [*repeated, *found[Kind.BUILD_BROKEN_AFTER_MY_EDIT]]:
        assert "run --enable-only usestdlibvars`" not in a.suggestion, a.suggestion


def test_vitest_session_has_no_stuck_test_once_the_whole_file_passed() -> None:
    # `regression.test.ts -t "should create record within budget"` failed in three masked
    # runs (16:34–16:42), then the whole file passed at 16:43:03 ("Tests 13 passed (13)").
    # The only moment a finding could be said (the prompt at 16:47) is after that pass:
    # a finding then would be false (issue 15, pattern 1).
    found = findings_of(session("attio-7c4ca6ea.chat.json"))
    assert Kind.TEST_STUCK not in found


@pytest.mark.parametrize(
    "name",
    [
        "templar-373740ff.chat.json",
        "templar-a46211b7.chat.json",
        "templar-d423c9b0.chat.json",
        "attio-7c4ca6ea.chat.json",
        "attio-aa5474ad.chat.json",
        "attio-aaeb53d1.chat.json",
    ],
)
def test_no_finding_on_file_plumbing_and_every_finding_is_well_formed(name: str) -> None:
    found = findings_of(session(name))
    assert found, "these sessions all contain trouble"
    for kind, anomalies in found.items():
        for a in anomalies:
            assert a.kind == kind and a.evidence and a.suggestion
            assert len(a.suggestion) < 700 and len(a.evidence) < 900
            if kind in (Kind.BUILD_BROKEN_AFTER_MY_EDIT, Kind.REPEATED_FAILED_BUILD):
                assert not runs_only_plumbing(a.subject), a.subject
            if kind == Kind.BUILD_BROKEN_AFTER_MY_EDIT:
                assert "command not found" not in a.suggestion
