"""The session bundle: what an agent must not forget, said at `SessionStart` (design §2.19).

At a start, resume, `/clear` or compaction the agent's context is new, so a short
`<tma1-context>` re-tells what still stands, each part only when it is true: open checks
in the project (any session's), this session's unresolved findings, files changed outside
since its last event, other sessions active on the project. docs/bundle.md has each
part's rules.

`build_bundle` is a pure function of a `BundleInput`; `Delivery.session_start` loads the
input and commits the result. Nothing is told twice in one context epoch (design §2.17):
every item has a key, and an item told at or after the epoch's start is left out.
Re-told findings are emitted (channel `session_start`) but never touch suppression, so a
`stop_block` finding told here still blocks the next Stop (design §2.3), and a digest
leaves out what a bundle told in the last ten minutes (`BundleMemory.recently_told`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tma1.clock import MINUTE_MS
from tma1.engine.anomaly import Anomaly, Channel, delivery_order, one_per_subject
from tma1.engine.checkruns import check_runs
from tma1.engine.digest import CLOSE_TAG, OPEN_TAG, clip, listed, numbered_item
from tma1.engine.rules import SPECS
from tma1.engine.rules._support import clock_time
from tma1.engine.supersession import supersedes
from tma1.engine.window import SessionWindow
from tma1.events import FileChange, HookEvent
from tma1.paths import display_path

SESSION_START = Channel.SESSION_START.value
BUNDLE_MAX_CHARS = 2_000
# How far back the project's shell runs are read for open checks: a build broken this
# morning and never re-run is still broken this afternoon.
CHECKS_HORIZON_MS = 12 * 60 * MINUTE_MS
# Files changed since the session's last event, at most this far back.
CHANGES_HORIZON_MS = 24 * 60 * MINUTE_MS
# A session in a turn whose newest event is older than this has shown no sign of work for
# as long as the longest tool call may run (Claude Code's Bash timeout at most): whatever
# its turn's state, it is not evidently active now.
ACTIVE_MS = 10 * MINUTE_MS
# A session whose newest event is one of these is not in a turn: it ended its turn (or
# its session), or only started. Idle, whatever its recency: the user's new session on the
# project is far more likely its successor (a restart, a resume, the same prompt re-sent,
# a hand-off) than its peer (issue 27: 9 of 9 such "active" sessions never ran again).
TURN_ENDED = frozenset({"Stop", "SessionEnd", "SessionStart"})
# A digest leaves out a finding a bundle told this recently (the suppression window).
RECENTLY_TOLD_MS = 10 * MINUTE_MS
IDLE_EVICT_MS = 24 * 60 * MINUTE_MS

MAX_CHECKS = 3
MAX_FINDINGS = 3
MAX_FILES = 5
MAX_PEERS = 3
_CHECK_CHARS = 240
_FINDING_CHARS = 300
_FILES_CHARS = 300
_PEERS_CHARS = 200
# When not everything fits, more of these parts first: this session's own findings.
_PRIORITY = {"findings": 0, "checks": 1, "changes": 2, "sessions": 3}

# The bundle never re-tells these (`RuleSpec.retold`: a compaction is the answer to them).
_NOT_RETOLD = frozenset(k for k, spec in SPECS.items() if not spec.retold)
# Findings of these name the project's changes by others (`RuleSpec.tells_changes`).
_TELLS_CHANGES = frozenset(k for k, spec in SPECS.items() if spec.tells_changes)
# Suppression decisions that mean "the agent need not hear this again".
_SETTLED = frozenset({"resolved", "one_shot"})


# --- checks ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OpenCheck:
    """A check whose newest run failed with no later passing run of it."""

    key: str  # the check's identity (`tma1.checks.Check.identity`)
    command: str  # the newest failing run's command, as typed
    since: int  # the first failure after the last pass (or the first seen): when it broke
    last_failure: int
    failures: int  # failing runs since it broke
    broken_by: str  # the session of the first failure after the last pass
    broken_by_agent: str
    error: str | None  # the newest failure's telling error line
    # A covering run passed before the first failure: only then did a session *break* it
    # (design §2.21); otherwise it is failing since its first run seen, no one's breakage.
    passed_before: bool = True
    last_session: str = ""  # the session of the newest failing run
    last_agent: str = ""

    @property
    def item_key(self) -> str:
        return f"check|{self.key}|{self.since}"


def open_checks(runs: Sequence[HookEvent], now: int, project: str | None = None) -> list[OpenCheck]:
    """Checks open at `now` over the project's shell results `runs` (any session, ts
    ascending), with the checks' own notion (design §2.15, `tma1.engine.checkruns`): the
    newest run of the check failed and no later covering run passed. Invocation errors,
    coverage-only exits and interruptions are no verdict. Newest-broken first.

    `since`/`broken_by` are those of the first failure no covering pass closed: when, and
    by which session, the check broke — a break only when a covering run passed before it
    (`passed_before`, design §2.21). Closing and supersession are `engine.supersession`'s:
    a passing `cargo build` closes `cargo check`; a failing run that a later failing wider
    run with other errors superseded is not told."""
    # The checks' own reading of a run list (a window of no session: every session's runs).
    cr = check_runs(SessionWindow(session_id="", project=project, events=list(runs)), now)
    found = cr.runs
    out = []
    for ident, last in cr.open_failures.items():
        # Back from the newest failure to the newest pass that covers it: the failures met
        # on the way are the streak; its first is when (and by whom) the check broke.
        at = next(i for i in range(len(found) - 1, -1, -1) if found[i] is last)
        streak = [last]
        passed_before = False
        for r in reversed(found[:at]):
            if r.passed and supersedes(r.check, last.check):
                passed_before = True
                break
            if r.failed and r.check.identity == ident:
                streak.append(r)
        first = streak[-1]
        out.append(
            OpenCheck(
                key=ident,
                command=last.event.tool_command or ident,
                since=first.ts,
                last_failure=last.ts,
                failures=len(streak),
                broken_by=first.event.session_id,
                broken_by_agent=first.event.agent_source,
                error=cr.error_of(last),
                passed_before=passed_before,
                last_session=last.event.session_id,
                last_agent=last.event.agent_source,
            )
        )
    out.sort(key=lambda c: (-c.last_failure, c.key))
    return out


def _named_by(c: OpenCheck, subjects: set[str]) -> bool:
    """A finding's subject names this check (its identity; before checks, a 60-char prefix)."""
    return (
        c.key in subjects
        or c.command[:60] in subjects
        or " ".join(c.command.split())[:60] in subjects
    )


# --- epochs ---------------------------------------------------------------------------------


def epoch_start(latest_compaction: int | None, session_start: int | None) -> int:
    """When the session's current context epoch began (design §2.17): its newest
    compaction (`Store.latest_compaction_ts`: a compaction hook — `SessionStart` with
    `source: compact` among them — or one the transcript tailer saw), else its start."""
    return latest_compaction if latest_compaction is not None else session_start or 0


# --- the bundle -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Peer:
    """Another session with recent events in the project."""

    session_id: str
    agent: str
    last_ts: int
    last_event: str = ""  # its newest event's hook name ("": one inside a turn)
    # When its transcript last said a turn ended with no hook (the user interrupted it:
    # Codex's `turn_aborted`, Claude Code's "[Request interrupted by user]").
    turn_end_ts: int | None = None

    def active(self, now: int) -> bool:
        """Evidence says a turn is running now: the newest hook is inside a turn, no turn
        end came after it, and it is less than `ACTIVE_MS` old (docs/semantics.md,
        "Active sessions")."""
        return (
            self.last_event not in TURN_ENDED
            and (self.turn_end_ts is None or self.turn_end_ts < self.last_ts)
            and now - self.last_ts < ACTIVE_MS
        )


@dataclass(frozen=True, slots=True)
class BundleInput:
    session_id: str
    project: str | None
    source: str | None  # startup | resume | clear | compact (None: the agent did not say)
    now: int
    epoch_start: int
    told: Mapping[str, int] = field(default_factory=dict)  # item key → when last told
    runs: Sequence[HookEvent] = ()  # the project's shell results, ts ascending
    findings: Sequence[Anomaly] = ()  # this session's unresolved findings
    last_event_ts: int | None = None  # the session's last event before this SessionStart
    changes: Sequence[FileChange] = ()  # the project's changes since `last_event_ts`
    peers: Sequence[Peer] = ()


@dataclass(frozen=True, slots=True)
class Bundle:
    text: str  # "" when there is nothing to say
    keys: tuple[str, ...] = ()  # every item told (for the epoch memory)
    findings: tuple[Anomaly, ...] = ()  # re-told findings: emitted on `session_start`
    parts: tuple[str, ...] = ()  # which parts are present: checks, findings, changes, sessions


def unresolved(decisions: Iterable[Any]) -> list[Anomaly]:
    """The findings of suppression `Decision`s the agent should still hear of: every one not
    settled (resolved, or a one-shot already told), a kind the bundle does not re-tell
    never, one per subject."""
    out = [
        d.finding
        for d in decisions
        if d.reason not in _SETTLED and d.finding.kind not in _NOT_RETOLD
    ]
    # A bundle is one answer too: it names a check once (`one_per_subject`).
    return one_per_subject(delivery_order(out))


def finding_key(f: Anomaly) -> str:
    return f"finding|{f.stable_key}"


def _short(session_id: str) -> str:
    return session_id[:8]


def _ago(now: int, ts: int) -> str:
    minutes = max(0, now - ts) // MINUTE_MS
    return "just now" if minutes < 1 else f"{minutes} min ago"


def _code(text: str, limit: int) -> str:
    return "`" + clip(text, limit).replace("`", "'") + "`"


def _session_name(sid: str, agent: str, session_id: str) -> str:
    return "this session" if sid == session_id else f"session {_short(sid)} ({agent})"


def _check_line(c: OpenCheck, session_id: str) -> str:
    runs = "1 failing run" if c.failures == 1 else f"{c.failures} failing runs"
    if c.passed_before:
        who = "broken by " + _session_name(c.broken_by, c.broken_by_agent, session_id)
        head = f"- {_code(c.command, 100)} fails since {clock_time(c.since)} ({who}; {runs})"
    else:
        # It never passed here: whoever ran it first did not break it (design §2.21).
        last = _session_name(c.last_session or c.broken_by, c.last_agent, session_id)
        head = (
            f"- {_code(c.command, 100)} failing since {clock_time(c.since)} "
            f"(last run in {last}; {runs})"
        )
    if c.error:
        head += f": {_code(c.error, 140)}"
    return clip(head, _CHECK_CHARS)


def _finding_line(n: int, f: Anomaly) -> str:
    return numbered_item(n, f, _FINDING_CHARS, files=False)


def _changes_line(changes: Sequence[FileChange], project: str | None, since: int) -> str:
    newest: dict[str, FileChange] = {}
    for ch in reversed(changes):
        newest.setdefault(ch.path, ch)  # each path's newest change, newest first
    paths = list(newest.values())
    shown = listed([f"{display_path(c.path, project)} ({c.change})" for c in paths], MAX_FILES)
    who = (
        "another agent session"
        if all(c.writer_session for c in paths)
        else "something outside this session"
    )
    text = (
        f"Changed by {who} since this session's last event ({clock_time(since)}): {shown}."
        " Re-read a file before editing it."
    )
    return clip(text, _FILES_CHARS)


def _peers_line(peers: Sequence[Peer], now: int) -> str:
    shown = listed(
        [f"{_short(p.session_id)} ({p.agent}, last event {_ago(now, p.last_ts)})" for p in peers],
        MAX_PEERS,
    )
    text = (
        f"Other sessions active on this project now: {shown}."
        " They may change files and checks under you."
    )
    return clip(text, _PEERS_CHARS)


def _fresh(key: str, inp: BundleInput) -> bool:
    told = inp.told.get(key)
    return told is None or told < inp.epoch_start


class _Item(NamedTuple):
    keys: tuple[str, ...]  # what telling this line tells (for the epoch memory)
    line: str
    finding: Anomaly | None = None  # a re-told finding: emitted on `session_start`


class _Part(NamedTuple):
    name: str  # checks | findings | changes | sessions
    title: str
    items: list[_Item]


def build_bundle(inp: BundleInput, *, max_chars: int = BUNDLE_MAX_CHARS) -> Bundle:
    """The bundle for one SessionStart; `Bundle("")` when there is nothing to say."""
    sections: list[_Part] = []
    retelling = inp.source != "startup"

    standing = [f for f in inp.findings if f.kind not in _NOT_RETOLD] if retelling else []
    findings = [f for f in standing if _fresh(finding_key(f), inp)][:MAX_FINDINGS]
    # A check this session's own standing finding names is told as that finding, not twice.
    named = {f.subject for f in standing if f.subject}

    checks = [
        c
        for c in open_checks(inp.runs, inp.now, inp.project)
        if _fresh(c.item_key, inp) and not _named_by(c, named)
    ][:MAX_CHECKS]
    if checks:
        title = "Checks failing in this project (no passing run since):"
        items = [_Item((c.item_key,), _check_line(c, inp.session_id)) for c in checks]
        sections.append(_Part("checks", title, items))
    if findings:
        items = [
            _Item((finding_key(f),), _finding_line(i, f), f) for i, f in enumerate(findings, 1)
        ]
        sections.append(_Part("findings", "Still unresolved in this session:", items))
    if inp.last_event_ts is not None:
        # Files a standing finding about others' changes names are told there.
        covered = {p for f in standing if f.kind in _TELLS_CHANGES for p in f.related_files}
        changes = [
            c
            for c in inp.changes
            if inp.last_event_ts < c.ts <= inp.now
            and c.writer_session != inp.session_id
            and c.path not in covered
        ]
        key = f"changes|{inp.last_event_ts}|{max((c.ts for c in changes), default=0)}"
        if changes and _fresh(key, inp):
            line = _changes_line(changes, inp.project, inp.last_event_ts)
            sections.append(_Part("changes", "", [_Item((key,), line)]))
    peers = sorted(
        (p for p in inp.peers if p.session_id != inp.session_id and p.active(inp.now)),
        key=lambda p: (-p.last_ts, p.session_id),
    )
    peers = [p for p in peers if _fresh(f"peer|{p.session_id}", inp)]
    if peers:
        shown = tuple(f"peer|{p.session_id}" for p in peers[:MAX_PEERS])
        sections.append(_Part("sessions", "", [_Item(shown, _peers_line(peers, inp.now))]))
    if not sections:
        return Bundle("")

    header = f"{OPEN_TAG}\ntma1 (session {inp.source or 'start'}): what this session should know."
    footer = "\n" + CLOSE_TAG
    # Which items fit: the first item of every part first (so a long first part never
    # crowds out the others), then the rest in order. Items are never cut in half, and an
    # item not shown is not told.
    used = len(header) + len(footer)
    chosen: set[tuple[int, int]] = set()
    rest = sorted(range(len(sections)), key=lambda si: _PRIORITY.get(sections[si].name, 9))
    order = [(si, 0) for si in range(len(sections))] + [
        (si, ii) for si in rest for ii in range(1, len(sections[si].items))
    ]
    for si, ii in order:
        part = sections[si]
        if ii > 0 and (si, 0) not in chosen:
            continue  # a part whose first item did not fit says nothing
        cost = len(part.items[ii].line) + 1 + (len(part.title) + 1 if ii == 0 and part.title else 0)
        if used + cost > max_chars:
            continue
        chosen.add((si, ii))
        used += cost
    lines = [header]
    keys: list[str] = []
    told: list[Anomaly] = []
    parts: list[str] = []
    for si, part in enumerate(sections):
        picked = [item for ii, item in enumerate(part.items) if (si, ii) in chosen]
        if not picked:
            continue
        if part.title:
            lines.append(part.title)
        for item in picked:
            lines.append(item.line)
            keys.extend(item.keys)
            if item.finding is not None:
                told.append(item.finding)
        parts.append(part.name)
    if not parts:
        return Bundle("")
    text = "\n".join(lines) + footer
    return Bundle(text=text, keys=tuple(keys), findings=tuple(told), parts=tuple(parts))


# --- PreCompact: what the summary must keep ------------------------------------------------

COMPACT_MAX_CHARS = 1_500


def compact_instructions(inp: BundleInput, *, max_chars: int = COMPACT_MAX_CHARS) -> str:
    """Extra summary instructions for a PreCompact answer (Claude Code appends a PreCompact
    hook's plain stdout to the compaction prompt as "Additional Instructions"; docs/bundle.md).

    Every check still failing and every finding still standing — whether or not it was told
    in this epoch: the summary replaces the whole context. "" when nothing is open. Pure;
    nothing is recorded or emitted (the summariser is not the agent; the SessionStart with
    `source: compact` that follows tells the agent itself)."""
    findings = [f for f in inp.findings if f.kind not in _NOT_RETOLD][:MAX_FINDINGS]
    named = {f.subject for f in findings if f.subject}
    checks = [c for c in open_checks(inp.runs, inp.now, inp.project) if not _named_by(c, named)][
        :MAX_CHECKS
    ]
    if not findings and not checks:
        return ""
    head = (
        "tma1, which monitors this session, reports these problems as still open. Keep each "
        "one in the summary as an open item, with its command, file and error line; do not "
        "describe them as fixed:"
    )
    lines = [head]
    used = len(head)
    for line in [_check_line(c, inp.session_id) for c in checks] + [
        _finding_line(i, f) for i, f in enumerate(findings, 1)
    ]:
        if used + len(line) + 1 > max_chars:
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines) if len(lines) > 1 else ""


# --- what was told, per session ---------------------------------------------------------------


class BundleMemory:
    """Item key → when a bundle last told it, per session (thread-safe).

    Rebuilt at start-up from the emit log's `session_start` rows (findings only: the other
    parts are project state, told again after a restart at most once more per epoch)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._told: dict[str, dict[str, int]] = {}

    def told(self, session_id: str) -> dict[str, int]:
        with self._lock:
            return dict(self._told.get(session_id, {}))

    def record(self, session_id: str, keys: Iterable[str], now: int) -> None:
        with self._lock:
            self._told.setdefault(session_id, {}).update(dict.fromkeys(keys, now))

    def recently_told(self, finding: Anomaly, now: int) -> bool:
        """A bundle told this finding in the last `RECENTLY_TOLD_MS`, and nothing newer
        supports it since: a digest leaves it out."""
        with self._lock:
            at = self._told.get(finding.session_id, {}).get(finding_key(finding))
        return at is not None and now - at < RECENTLY_TOLD_MS and finding.last_evidence_ts <= at

    def restore(self, rows: Iterable[Mapping[str, Any]]) -> None:
        with self._lock:
            for r in rows:
                if r.get("channel") == SESSION_START:
                    told = self._told.setdefault(str(r["session_id"]), {})
                    told[f"finding|{r['stable_key']}"] = int(r["ts"])

    def evict_idle(self, now: int) -> int:
        with self._lock:
            idle = [
                s
                for s, told in self._told.items()
                if now - max(told.values(), default=0) >= IDLE_EVICT_MS
            ]
            for s in idle:
                del self._told[s]
        return len(idle)
