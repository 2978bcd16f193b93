"""Properties: the stale-edit merge against a brute-force reading of the seed, and the
rules and extractors never raising and always keeping their contract on random input."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rulekit import OTHER, SID, at, bash_fail, bash_masked, change, edit, read, src, usage, window

from tma1.checks import error_line, extract_test_ids, is_masked_failure, refs
from tma1.engine.anomaly import Channel, Severity
from tma1.engine.rules import RULES
from tma1.engine.rules.stale_file_view import detect_stale_edit
from tma1.engine.window import RuleConfig
from tma1.events import FileChange

FOO = src("foo.go")
times = st.lists(st.integers(min_value=0, max_value=40), max_size=8)


def brute_force(reads: list[int], edits: list[int], changes: list[FileChange]) -> int | None:
    """The seed's words, literally: the ts of the latest change some edit missed."""
    missed: list[int] = []
    for e in edits:
        before = [r for r in reads if r < e]
        if not before:
            continue
        last = max(before)
        missed += [c.ts for c in changes if last < c.ts < e]
    return max(missed) if missed else None


@settings(deadline=None)  # a loaded shared machine must not fail a correct example
@given(reads=times, edits=times, change_ts=times)
def test_detect_stale_edit_matches_the_seed_read_literally(
    reads: list[int], edits: list[int], change_ts: list[int]
) -> None:
    changes = [change(t, FOO) for t in change_ts]
    found = detect_stale_edit(reads, edits, changes)
    expected = brute_force(reads, edits, changes)
    assert (found.ts if found else None) == expected


_text = st.text(
    alphabet=st.sampled_from(list("abc.:/()[]-_ >×✕●\t\nFAILEDok0123456789e:rorTS\x1b")),
    max_size=400,
)


@settings(max_examples=200, deadline=None)
@given(_text)
def test_extractors_never_raise_and_stay_bounded(text: str) -> None:
    ids = extract_test_ids(text)
    assert len(ids) == len(set(ids)) and "FAIL" not in ids
    line = error_line(text)
    assert line is None or (len(line) <= 300 and "\n" not in line)
    assert all(r.path.strip() for r in refs(text))
    is_masked_failure("npm test | tail", text)


_step = st.tuples(
    st.sampled_from(["read", "edit", "fail", "masked", "change", "other_change"]),
    st.integers(min_value=0, max_value=70),
    st.sampled_from(["a.go", "b.go", "README.md"]),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(_step, max_size=30), st.integers(min_value=0, max_value=80))
def test_rules_keep_their_contract_on_random_windows(steps: list, now_min: int) -> None:  # type: ignore[type-arg]
    events, changes = [], []
    for kind, minute, name in steps:
        path, ts = src(name), at(minute)
        if kind == "read":
            events.append(read(ts, path))
        elif kind == "edit":
            events.append(edit(ts, path))
        elif kind == "fail":
            events.append(
                bash_fail(ts, "go build ./...", f"{name}:3:1: undefined: x\n--- FAIL: TestA")
            )
        elif kind == "masked":
            events.append(bash_masked(ts, "go test ./... | tail", f"--- FAIL: TestB\n{name}:9: no"))
        else:
            changes.append(change(ts, path, writer=OTHER if kind == "other_change" else None))
    w = window(events, changes, usage=usage(at(1), 120_000), start=at(0) - 1)
    now = at(now_min)
    for kind, rule in RULES.items():
        for a in rule(w, now, RuleConfig()):
            assert a.kind == kind and a.session_id == SID and a.first_emitted_at == 0
            assert a.evidence and a.suggestion
            assert a.last_evidence_ts <= now
            assert Severity(a.severity) and Channel(a.channel)
            assert a.channel != Channel.STOP_BLOCK or a.severity == Severity.HIGH
            if kind == "build_broken_after_my_edit":
                assert not any(f.endswith(".md") for f in a.related_files)
