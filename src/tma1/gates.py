"""The three validation gates, the emit-log listing, labels and session summaries.

One module shared by the HTTP API (server/routes_gates.py, routes_sessions.py) and the CLI
(commands/anomalies.py), so the figures a human sees on the dashboard and in `tma1 gates`
are computed by the same code. The SQL is SQLAlchemy Core on `store.engine`
(parameterised); the decisions — which tool call follows an emit, what counts as a day,
how precision is sampled — are pure functions below, tested without a database.

Conventions (design §2.13–2.14, seed "Validation gates"):
- A *day* is a UTC calendar day. `days=7` covers today and the six days before it.
- A *tool call* is a PreToolUse event. The follow-rate window of an emit is the next
  `window` tool calls of the same session with `ts` strictly after the emit's `ts`, and
  the other events (compaction, session end) until the tool call after those.
- Precision reads the 50 newest labelled emits (overall, and per kind its own 50 newest),
  separately for human and agent labels. A kind with no labels has precision None and
  pass None ("no data" — neither pass nor fail).
- Follow-rate: a kind with no emits has rate None and pass None. Budget: a kind with no
  emits passes (0 ≤ budget).
- Minimum samples (docs/gates.md): a rate over a handful of emits or labels says nothing,
  so below `FOLLOW_MIN_EMITS` emits (follow-rate) or `PRECISION_MIN_LABELS` labels
  (precision) a figure has `pass` None and `status` "not_enough_data" — shown as
  "not enough data (n = 1)", never as a FAIL, and `tma1 gates --strict` does not fail on
  it. Every figure carries `status`: pass | fail | not_enough_data | no_data.
"""

from __future__ import annotations

import json
import re
import threading
import weakref
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any, NamedTuple

from sqlalchemy import and_, case, delete, func, insert, or_, select, true, update
from sqlalchemy.exc import IntegrityError

from tma1.checks import check_of, file_of_test_id
from tma1.engine.anomaly import Channel, Kind
from tma1.engine.rules import SPECS
from tma1.events import READ_TOOLS, SHELL_TOOLS, WRITE_TOOLS, HookEvent, json_text
from tma1.store import Store
from tma1.store.schema import anomaly_emits, anomaly_labels, hook_events, messages

KINDS: tuple[str, ...] = tuple(k.value for k in Kind)
SEVERITIES: tuple[str, ...] = ("high", "medium", "low")
# Every channel an emit can be delivered on; `session_start` is the session bundle's
# re-telling (design §2.19). The budget counts every channel: an emit is an emit.
CHANNELS: tuple[str, ...] = tuple(c.value for c in Channel)
LABELS: tuple[str, ...] = ("tp", "fp")
LABEL_SOURCES: tuple[str, ...] = ("human", "agent")

DAY_MS = 86_400_000
MINUTE_MS = 60_000
PRECISION_TARGET = 0.70
FOLLOW_TARGET = 0.30
PRECISION_SAMPLE = 50
# Below these sample sizes a gate says "not enough data (n = …)" instead of pass/fail.
PRECISION_MIN_LABELS = 10
FOLLOW_MIN_EMITS = 5
STATUSES: tuple[str, ...] = ("pass", "fail", "not_enough_data", "no_data")
DEFAULT_BUDGET = 5
DEFAULT_WINDOW = 5
DEFAULT_DAYS = 7
# test_stuck counts failures of the last 30 min (seed); the failing command is looked for
# in that same span before the emit.
TEST_LOOKBACK_MS = 30 * MINUTE_MS
# Follow-rate verdicts of emits this old are final even if their window never filled up.
SETTLE_MS = DAY_MS

# Each rule declares its follow action in its spec (design §2.13, §5).
FOLLOW_ACTIONS: dict[str, str] = {kind: spec.follow_action for kind, spec in SPECS.items()}

COMPACTION_EVENTS = frozenset({"PreCompact", "PostCompact"})
END_EVENTS = frozenset({"SessionEnd"})


# --- pure helpers ---------------------------------------------------------------------------


def day_start(ts_ms: int) -> int:
    return (ts_ms // DAY_MS) * DAY_MS


def since_for_days(now_ms: int, days: int) -> int:
    """Start of the UTC day `days - 1` days before the day of `now_ms`."""
    return day_start(now_ms) - (days - 1) * DAY_MS


_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


def day_label(day_index: int) -> str:
    """The UTC date of a day index (days since the epoch): `2026-11-30`."""
    return date.fromordinal(_EPOCH_ORDINAL + day_index).isoformat()


def split_stable_key(key: str) -> tuple[str, str, str]:
    """`kind|severity|subject` → parts; the subject (a command prefix) may contain `|`."""
    parts = key.split("|", 2)
    parts += [""] * (3 - len(parts))
    return parts[0], parts[1], parts[2]


def loads_list(text: str | None) -> list[str]:
    if not text:
        return []
    try:
        value = json.loads(text)
    except ValueError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []


def ratio(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


class Call(NamedTuple):
    """A session event after an emit, as the follow-rate check sees it. (A NamedTuple: the
    gate builds tens of thousands per request, and tuples are the cheapest to make.)"""

    ts: int
    id: int
    event_type: str
    tool_name: str | None = None
    file_path: str | None = None
    files: tuple[str, ...] = ()
    command: str | None = None
    command_prefix: str | None = None
    metadata: str | None = None

    @property
    def is_tool_call(self) -> bool:
        return self.event_type == "PreToolUse"

    @property
    def is_shell(self) -> bool:
        return self.tool_name in SHELL_TOOLS or (
            self.tool_name is None and self.command is not None
        )

    def touched(self) -> tuple[str, ...]:
        if self.files:
            return self.files
        return (self.file_path,) if self.file_path else ()


@dataclass(frozen=True, slots=True)
class EmitRef:
    """What follow-rate needs to know of one emit."""

    id: int
    ts: int
    session_id: str
    kind: str
    subject: str
    related_files: tuple[str, ...] = ()
    # test_stuck only: prefixes of the failing commands that reported the test id.
    test_commands: tuple[str, ...] = field(default=())
    # Whether any tool call at all followed the emit (None: judge from the calls given;
    # the SQL layer passes only the calls of tools that can matter).
    acted: bool | None = None
    # The (window+1)-th tool call exists: nothing that arrives later can change the verdict.
    window_closed: bool = False


def same_file(a: str, b: str) -> bool:
    """Equal paths, or one is a relative tail of the other (`tests/x.py` vs `/r/tests/x.py`)."""
    if a == b:
        return True
    if not a or not b or (a[0] == "/" and b[0] == "/"):
        return False  # two different absolute POSIX paths (the common case, kept cheap)
    a, b = a.replace("\\", "/"), b.replace("\\", "/")
    a, b = a.removeprefix("./"), b.removeprefix("./")
    if a == b:
        return True
    if a.startswith("/") and not b.startswith("/"):
        return a.endswith("/" + b)
    if b.startswith("/") and not a.startswith("/"):
        return b.endswith("/" + a)
    return False


_READ_VERBS = frozenset({"cat", "head", "tail", "less", "more", "bat", "nl", "sed", "view"})
_GIT_COMMIT = re.compile(r"(?:^|[\s;&|(])git\s+(?:-C\s+\S+\s+|-c\s+\S+\s+)*commit\b")


def _shell_reads(command: str, files: Sequence[str]) -> bool:
    """A shell command that prints a related file (Codex has no Read tool)."""
    words = command.strip().split()
    if not words or words[0].rsplit("/", 1)[-1] not in _READ_VERBS:
        return False
    args = [w.strip("'\"") for w in words[1:] if not w.startswith("-")]
    return any(same_file(arg, f) for arg in args for f in files)


def _touches(call: Call, files: Sequence[str]) -> bool:
    for p in call.touched():
        if p in files:  # the common case: the same absolute path
            return True
        if any(same_file(p, f) for f in files):
            return True
    return False


def is_read_of(call: Call, files: Sequence[str]) -> bool:
    if not call.is_tool_call or not files:
        return False
    if call.tool_name in READ_TOOLS:
        return _touches(call, files)
    if call.is_shell and call.command:
        return _shell_reads(call.command, files)
    return False


def is_edit_of(call: Call, files: Sequence[str]) -> bool:
    if not call.is_tool_call or call.tool_name not in WRITE_TOOLS or not files:
        return False
    return _touches(call, files)


def is_rerun(call: Call, prefixes: Iterable[str]) -> bool:
    """A run of the same command — by prefix, or (design §2.15: build subjects are check
    identities) of the same check however spelled (its cwd is not fetched: a `cd DIR &&`
    still counts)."""
    if not call.is_tool_call or not call.is_shell or not call.command_prefix:
        return False
    wanted = set(prefixes)
    if call.command_prefix in wanted:
        return True
    check = check_of(call.command) if call.command else None
    return check is not None and check.identity in wanted


def blind_rerun(tool_calls: Sequence[Call], prefixes: Iterable[str]) -> bool:
    """A re-run of the failing command before any edit: the agent retried without a fix.

    Design §2.13 says "no re-run"; but the finding's own suggestion is "fix it, then run
    it once more", and an agent that does exactly that must not score as ignoring it.
    """
    wanted = tuple(prefixes)
    for call in tool_calls:
        if call.tool_name in WRITE_TOOLS:
            return False
        if is_rerun(call, wanted):
            return True
    return False


def is_git_commit(call: Call) -> bool:
    return call.is_tool_call and call.is_shell and bool(_GIT_COMMIT.search(call.command or ""))


def is_compaction_or_end(call: Call) -> bool:
    if call.event_type in COMPACTION_EVENTS or call.event_type in END_EVENTS:
        return True
    if call.event_type == "SessionStart" and call.metadata:
        try:
            meta = json.loads(call.metadata)
        except ValueError:
            return False
        return isinstance(meta, dict) and meta.get("source") == "compact"
    return False


def guess_test_file(test_id: str) -> str | None:
    """The file part of a test id (`tests/t.py::test_x`, `./spec/a_spec.rb:12`, `a.test.ts`)."""
    head = test_id.split("::", 1)[0].strip()
    head = re.sub(r":\d+$", "", head).removeprefix("./")
    if " " in head:
        return None
    if "/" in head or re.search(r"\.[A-Za-z]{1,6}$", head):
        return head
    return None


def window_of(calls: Sequence[Call], window: int) -> list[Call]:
    """The events before the (`window`+1)-th tool call (calls sorted by ts, id)."""
    out: list[Call] = []
    seen = 0
    for c in calls:
        if c.is_tool_call:
            if seen == window:
                break
            seen += 1
        out.append(c)
    return out


def followed(emit: EmitRef, calls: Sequence[Call], window: int) -> bool:
    """Did the agent take the kind's follow action (design §2.13) within `window` tool calls?

    `calls` are the session's events after the emit, sorted. Absence actions ("no re-run")
    need at least one observed tool call: an agent that has done nothing yet has not
    followed anything.
    """
    span = window_of(calls, window)
    tool_calls = [c for c in span if c.is_tool_call]
    acted = bool(tool_calls) if emit.acted is None else emit.acted
    kind = emit.kind
    if kind in (
        Kind.STALE_FILE_VIEW,
        Kind.BUILD_BROKEN_AFTER_MY_EDIT,
        Kind.EXTERNAL_MODIFIED_DURING_SESSION,
    ):
        return any(is_read_of(c, emit.related_files) for c in tool_calls)
    if kind == Kind.REPEATED_FAILED_BUILD:
        return acted and not blind_rerun(tool_calls, (emit.subject,))
    if kind == Kind.TEST_STUCK:
        files = list(emit.related_files)
        if tf := file_of_test_id(emit.subject) or guess_test_file(emit.subject):
            files.append(tf)
        if any(is_read_of(c, files) or is_edit_of(c, files) for c in tool_calls):
            return True
        prefixes = emit.test_commands
        return acted and bool(prefixes) and not any(is_rerun(c, prefixes) for c in tool_calls)
    if kind == Kind.CONTEXT_PRESSURE:
        return any(is_compaction_or_end(c) or is_git_commit(c) for c in span)
    return False


def sample_verdict(value: float | None, target: float, n: int, min_n: int) -> dict[str, Any]:
    """`pass` and `status` of a rate over `n` items: no verdict below `min_n` items."""
    if value is None or n == 0:
        return {"pass": None, "status": "no_data", "n": n, "min_n": min_n}
    if n < min_n:
        return {"pass": None, "status": "not_enough_data", "n": n, "min_n": min_n}
    ok = value >= target
    return {"pass": ok, "status": "pass" if ok else "fail", "n": n, "min_n": min_n}


def status_text(figure: Mapping[str, Any]) -> str:
    """One word or phrase for a figure's status, as the CLI and the dashboard say it."""
    status = figure.get("status")
    if status == "not_enough_data":
        return f"not enough data (n = {figure.get('n', 0)})"
    if status == "no_data":
        return "n/a"
    if status is None:
        p = figure.get("pass")
        return "n/a" if p is None else "pass" if p else "FAIL"
    return "pass" if status == "pass" else "FAIL"


def precision_figures(
    labels: Sequence[str], *, min_n: int = PRECISION_MIN_LABELS
) -> dict[str, Any]:
    """`labels` newest first, already cut to the sample."""
    tp = sum(1 for x in labels if x == "tp")
    fp = sum(1 for x in labels if x == "fp")
    prec = ratio(tp, tp + fp)
    return {
        "tp": tp,
        "fp": fp,
        "labelled": tp + fp,
        "precision": prec,
        **sample_verdict(prec, PRECISION_TARGET, tp + fp, min_n),
    }


def overall_pass(values: Iterable[bool | None]) -> bool | None:
    """False if any is False; True if at least one True and none False; None: no data."""
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return all(vals)


def overall_status(statuses: Iterable[str]) -> str:
    """fail if any fails; pass if any passes; else not_enough_data if any; else no_data."""
    seen = set(statuses)
    for status in ("fail", "pass", "not_enough_data"):
        if status in seen:
            return status
    return "no_data"


# --- the emit log and labels ---------------------------------------------------------------


def _emit_dict(m: Mapping[Any, Any], labels: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    human = labels.get("human")
    agent = labels.get("agent")
    chosen, source = (human, "human") if human else (agent, "agent") if agent else (None, None)
    return {
        "id": int(m["id"]),
        "ts": int(m["ts"]),
        "session_id": m["session_id"],
        "kind": m["kind"],
        "severity": m["severity"],
        "channel": m["channel"],
        "evidence": m["evidence"],
        "suggestion": m["suggestion"],
        "related_files": loads_list(m["related_files"]),
        "first_emitted_at": int(m["first_emitted_at"]),
        "stable_key": m["stable_key"],
        "label": chosen["label"] if chosen else None,
        "label_source": source,
        "label_note": chosen["note"] if chosen else None,
        "labels": {k: dict(v) for k, v in labels.items()},
    }


def _labels_for(store: Store, ids: Sequence[int]) -> dict[int, dict[str, dict[str, Any]]]:
    out: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    if not ids:
        return out
    q = select(
        anomaly_labels.c.emit_id,
        anomaly_labels.c.source,
        anomaly_labels.c.label,
        anomaly_labels.c.note,
        anomaly_labels.c.ts,
    ).where(anomaly_labels.c.emit_id.in_(list(ids)))
    with store.engine.connect() as conn:
        for r in conn.execute(q).all():
            out[int(r.emit_id)][r.source] = {"label": r.label, "note": r.note, "ts": int(r.ts)}
    return out


def list_emits(
    store: Store,
    *,
    limit: int = 100,
    session_id: str | None = None,
    kind: str | None = None,
    severity: str | None = None,
    since_id: int | None = None,
    since_ts: int | None = None,
    channel: str | None = None,
) -> list[dict[str, Any]]:
    """Newest first, straight from the emit log (never runs rules)."""
    q = select(anomaly_emits)
    if session_id:
        q = q.where(anomaly_emits.c.session_id == session_id)
    if kind:
        q = q.where(anomaly_emits.c.kind == kind)
    if severity:
        q = q.where(anomaly_emits.c.severity == severity)
    if channel:
        q = q.where(anomaly_emits.c.channel == channel)
    if since_id is not None:
        q = q.where(anomaly_emits.c.id > since_id)
    if since_ts is not None:
        q = q.where(anomaly_emits.c.ts >= since_ts)
    q = q.order_by(anomaly_emits.c.ts.desc(), anomaly_emits.c.id.desc()).limit(limit)
    with store.engine.connect() as conn:
        rows = [r._mapping for r in conn.execute(q)]
    labels = _labels_for(store, [int(m["id"]) for m in rows])
    return [_emit_dict(m, labels.get(int(m["id"]), {})) for m in rows]


def get_emit(store: Store, emit_id: int) -> dict[str, Any] | None:
    with store.engine.connect() as conn:
        row = conn.execute(select(anomaly_emits).where(anomaly_emits.c.id == emit_id)).first()
    if row is None:
        return None
    return _emit_dict(row._mapping, _labels_for(store, [emit_id]).get(emit_id, {}))


def set_label(
    store: Store,
    emit_id: int,
    label: str,
    *,
    now_ms: int,
    source: str = "human",
    note: str | None = None,
) -> dict[str, Any] | None:
    """Upsert the (emit, source) label; `clear` removes it. None when the emit is unknown."""
    if label not in (*LABELS, "clear"):
        raise ValueError(f"label must be one of tp, fp, clear (got {label!r})")
    if source not in LABEL_SOURCES:
        raise ValueError(f"source must be one of human, agent (got {source!r})")
    where = and_(anomaly_labels.c.emit_id == emit_id, anomaly_labels.c.source == source)
    for _attempt in range(2):
        try:
            with store.engine.begin() as conn:
                exists = conn.execute(
                    select(anomaly_emits.c.id).where(anomaly_emits.c.id == emit_id)
                ).first()
                if exists is None:
                    return None
                if label == "clear":
                    conn.execute(delete(anomaly_labels).where(where))
                    return {"id": emit_id, "label": None, "source": source}
                changed = conn.execute(
                    update(anomaly_labels).where(where).values(label=label, note=note, ts=now_ms)
                ).rowcount
                if not changed:
                    conn.execute(
                        insert(anomaly_labels).values(
                            emit_id=emit_id, source=source, label=label, note=note, ts=now_ms
                        )
                    )
            return {"id": emit_id, "label": label, "source": source}
        except IntegrityError:
            # Two writers raced to insert the same (emit, source): the second one updates.
            continue
    raise RuntimeError("label upsert kept colliding")


def sample_unlabelled(
    store: Store, *, n: int = PRECISION_SAMPLE, source: str = "human"
) -> list[dict[str, Any]]:
    """The newest emits without a label from `source`: the next ones to judge."""
    labelled = select(anomaly_labels.c.emit_id).where(anomaly_labels.c.source == source)
    q = (
        select(anomaly_emits)
        .where(anomaly_emits.c.id.not_in(labelled))
        .order_by(anomaly_emits.c.ts.desc(), anomaly_emits.c.id.desc())
        .limit(n)
    )
    with store.engine.connect() as conn:
        rows = [r._mapping for r in conn.execute(q)]
    labels = _labels_for(store, [int(m["id"]) for m in rows])
    return [_emit_dict(m, labels.get(int(m["id"]), {})) for m in rows]


def delivered(store: Store, emit_id: int) -> dict[str, Any] | None:
    """The text the agent was given with this emit, rebuilt from the emit log.

    The emit log stores the findings, not the answer, so the answer is rebuilt with the
    very functions delivery used (`digest` for the context channels, `stop_reason` for a
    Stop block) from the rows written for the same answer: same session, channel and
    instant, in id order (the order `EmitLog.record` queued them). None: unknown id."""
    from tma1.engine.anomaly import Anomaly, Channel
    from tma1.engine.digest import digest, stop_reason

    rows = store.emits_delivered_with(emit_id)
    if not rows:
        return None
    findings = [
        Anomaly(
            kind=r["kind"],
            severity=r["severity"],
            channel=r["channel"],
            evidence=r["evidence"],
            suggestion=r["suggestion"],
            related_files=tuple(loads_list(r["related_files"])),
            session_id=r["session_id"],
            first_emitted_at=int(r["first_emitted_at"]),
        )
        for r in rows
    ]
    channel = rows[0]["channel"]
    stop = channel == Channel.STOP_BLOCK
    return {
        "id": emit_id,
        "channel": channel,
        "as": "stop_reason" if stop else "digest",
        "text": stop_reason(findings) if stop else digest(findings),
        "delivered_with": [int(r["id"]) for r in rows],
        "reconstructed": True,
    }


# --- gate 1: daily emit budget ----------------------------------------------------------------


def budget(
    store: Store, *, now_ms: int, days: int = DEFAULT_DAYS, budget: int = DEFAULT_BUDGET
) -> dict[str, Any]:
    since = since_for_days(now_ms, days)
    day = (anomaly_emits.c.ts // DAY_MS).label("day")
    q = (
        select(anomaly_emits.c.kind, day, func.count().label("n"))
        .where(anomaly_emits.c.ts >= since)
        .group_by(anomaly_emits.c.kind, day)
    )
    with store.engine.connect() as conn:
        rows = [(r.kind, int(r.day), int(r.n)) for r in conn.execute(q)]
    return budget_report(rows, since=since, now_ms=now_ms, days=days, budget=budget)


def budget_report(
    rows: Iterable[tuple[str, int, int]], *, since: int, now_ms: int, days: int, budget: int
) -> dict[str, Any]:
    """`rows` = (kind, UTC day index, count). Pure: every kind × every day, zeros included."""
    counts: dict[tuple[str, int], int] = {}
    kinds = list(KINDS)
    for kind, d, n in rows:
        counts[(kind, d)] = counts.get((kind, d), 0) + n
        if kind not in kinds:
            kinds.append(kind)  # an unknown kind in the log still shows up
    first = since // DAY_MS
    day_idx = [first + i for i in range(days)]
    labels = [day_label(d) for d in day_idx]
    per_day = []
    for d, label in zip(day_idx, labels, strict=True):
        for kind in kinds:
            n = counts.get((kind, d), 0)
            per_day.append({"day": label, "kind": kind, "count": n, "over_budget": n > budget})
    per_kind: dict[str, dict[str, Any]] = {}
    for kind in kinds:
        series = [counts.get((kind, d), 0) for d in day_idx]
        over = sum(1 for n in series if n > budget)
        per_kind[kind] = {
            "total": sum(series),
            "max_per_day": max(series) if series else 0,
            "days_over": over,
            "pass": over == 0,
            "status": "pass" if over == 0 else "fail",
        }
    return {
        "days": days,
        "budget": budget,
        "since": since,
        "until": now_ms,
        "day_labels": labels,
        "per_day": per_day,
        "kinds": per_kind,
        "pass": all(k["pass"] for k in per_kind.values()),
        "status": "pass" if all(k["pass"] for k in per_kind.values()) else "fail",
    }


# --- gate 2: action follow-rate --------------------------------------------------------------


# Tools whose calls can be a follow action (or its absence); other tools (Grep, Glob, Task,
# …) still count towards the window through `wend`, but their rows are not fetched.
_FOLLOW_TOOLS = tuple(sorted(READ_TOOLS | WRITE_TOOLS | SHELL_TOOLS))
_FAR_FUTURE = 2**62
# Kinds whose follow action involves the emit's related files.
_FILE_KINDS = frozenset(
    {
        Kind.STALE_FILE_VIEW.value,
        Kind.BUILD_BROKEN_AFTER_MY_EDIT.value,
        Kind.EXTERNAL_MODIFIED_DURING_SESSION.value,
        Kind.TEST_STUCK.value,
    }
)


# Per kind, the tools whose calls its follow action looks at (see `followed`).
_READ_OR_SHELL = tuple(sorted(READ_TOOLS | SHELL_TOOLS))
_SHELL = tuple(sorted(SHELL_TOOLS))
_TOOLS_BY_KIND: dict[str, tuple[str, ...]] = {
    Kind.STALE_FILE_VIEW.value: _READ_OR_SHELL,
    Kind.BUILD_BROKEN_AFTER_MY_EDIT.value: _READ_OR_SHELL,
    Kind.EXTERNAL_MODIFIED_DURING_SESSION.value: _READ_OR_SHELL,
    # Writes too: a re-run after an edit is the suggestion followed (blind_rerun).
    Kind.REPEATED_FAILED_BUILD.value: tuple(sorted(set(_SHELL) | WRITE_TOOLS)),
    Kind.CONTEXT_PRESSURE.value: _SHELL,
    Kind.TEST_STUCK.value: _FOLLOW_TOOLS,
}


def _relevant_call(kind: Any, tool_name: Any) -> Any:
    """SQL: this tool call can matter to this kind's follow action (fewer rows to fetch;
    the window itself is bounded by `wend`, which counts every tool)."""
    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for k, tools in _TOOLS_BY_KIND.items():
        groups[tools].append(k)
    return or_(*(and_(kind.in_(kinds), tool_name.in_(tools)) for tools, kinds in groups.items()))


def _emit_windows(since: int, window: int, kind: str | None = None, after_id: int = 0) -> Any:
    """CTE: the emits since `since` (optionally of one kind) with `wend`, the ts of the
    (`window`+1)-th tool call after the emit (a far future when there is none yet), and
    `acted`, whether any tool call followed the emit at all.

    The window is everything after the emit and before `wend`: a compaction right after
    the 5th call is still "within 5 calls". (Calls sharing the very millisecond of the
    (`window`+1)-th call are left out with it.) Both subqueries are short range scans of
    ix_hook_events_session_type_ts (migration 0002).
    """
    h = hook_events.alias("h")
    a = anomaly_emits.alias("a")
    after = and_(h.c.session_id == a.c.session_id, h.c.event_type == "PreToolUse", h.c.ts > a.c.ts)
    window_end = (
        select(h.c.ts)
        .where(after)
        # ts alone: the index order, and ties among calls do not change the ts found.
        .order_by(h.c.ts)
        .limit(1)
        .offset(window)
        .correlate(a)
        .scalar_subquery()
    )
    q = select(
        a.c.id,
        a.c.session_id,
        a.c.ts,
        a.c.kind,
        a.c.stable_key,
        a.c.related_files,
        func.coalesce(window_end, _FAR_FUTURE).label("wend"),
        select(h.c.id).where(after).correlate(a).exists().label("acted"),
    ).where(a.c.ts >= since, a.c.id > after_id)
    if kind is not None:
        q = q.where(a.c.kind == kind)
    # MATERIALIZED: otherwise SQLite flattens the CTE into the join and, without table
    # statistics, may drive the join from a full scan of the events.
    return q.cte("m").prefix_with("MATERIALIZED")


def _follow_inputs(
    store: Store, since: int, window: int, after_id: int = 0
) -> tuple[list[EmitRef], dict[int, list[Call]]]:
    """The emits since `since` (with an id above `after_id`) and, per emit, the relevant
    events inside its window: tool calls of reading/writing/shell tools, and for
    context_pressure emits the compactions and session ends."""
    if store.dialect == "postgresql":
        refs, calls = _follow_calls_lateral(store, since, window, after_id)
    else:
        refs, calls = _follow_calls_windowed(store, since, window, after_id)
    _add_markers(store, since, window, after_id, calls)
    for lst in calls.values():
        if len(lst) > 1:
            lst.sort(key=lambda c: (c.ts, not c.is_tool_call, c.id))
    return list(refs.values()), calls


def _follow_calls_windowed(
    store: Store, since: int, window: int, after_id: int
) -> tuple[dict[int, EmitRef], dict[int, list[Call]]]:
    """SQLite: one pass over an outer join of the emits (with their window end) and the
    calls inside the window. Rows are unpacked as plain tuples: this is the gate's hot
    loop (10,000 emits in the benchmark)."""
    e = hook_events.alias("e")
    m = _emit_windows(since, window, after_id=after_id)
    q = select(
        m.c.id,
        m.c.ts,
        m.c.session_id,
        m.c.kind,
        m.c.stable_key,
        m.c.related_files,
        m.c.acted,
        m.c.wend,
        e.c.id,
        e.c.ts,
        e.c.tool_name,
        e.c.tool_file_path,
        e.c.tool_files,
        e.c.tool_command,
        e.c.tool_command_prefix,
    ).select_from(
        m.outerjoin(
            e,
            and_(
                e.c.session_id == m.c.session_id,
                e.c.event_type == "PreToolUse",
                e.c.ts > m.c.ts,
                e.c.ts < m.c.wend,
                _relevant_call(m.c.kind, e.c.tool_name),
            ),
        )
    )
    refs: dict[int, EmitRef] = {}
    calls: dict[int, list[Call]] = defaultdict(list)
    with store.engine.connect() as conn:
        for (
            emit_id,
            emit_ts,
            session_id,
            kind,
            key,
            related,
            acted,
            wend,
            ev_id,
            ev_ts,
            tool,
            path,
            files,
            command,
            prefix,
        ) in conn.execute(q).all():
            if emit_id not in refs:
                refs[emit_id] = EmitRef(
                    id=emit_id,
                    ts=emit_ts,
                    session_id=session_id,
                    kind=kind,
                    subject=split_stable_key(key or "")[2],
                    related_files=tuple(loads_list(related)) if kind in _FILE_KINDS else (),
                    acted=bool(acted),
                    window_closed=wend != _FAR_FUTURE,
                )
            if ev_id is None:
                continue
            # tool_files says more than tool_file_path only for multi-file patches; JSON
            # decoding every row would cost more than the rest of this loop.
            many = tool == "apply_patch" and files
            calls[emit_id].append(
                Call(
                    ev_ts,
                    ev_id,
                    "PreToolUse",
                    tool,
                    path,
                    tuple(loads_list(files)) if many else (),
                    command,
                    prefix,
                )
            )
    return refs, calls


def _add_markers(
    store: Store, since: int, window: int, after_id: int, calls: dict[int, list[Call]]
) -> None:
    """Compactions and session ends inside the windows of context_pressure emits."""
    e = hook_events.alias("e")
    cp = _emit_windows(since, window, Kind.CONTEXT_PRESSURE.value, after_id)
    markers_q = select(cp.c.id, e.c.id, e.c.ts, e.c.event_type, e.c.metadata).select_from(
        cp.join(
            e,
            and_(
                e.c.session_id == cp.c.session_id,
                e.c.event_type.in_(sorted(COMPACTION_EVENTS | END_EVENTS | {"SessionStart"})),
                e.c.ts > cp.c.ts,
                e.c.ts < cp.c.wend,
            ),
        )
    )
    # Compactions seen by the transcript tailer count like PreCompact hooks.
    mm = messages.alias("mm")
    compactions_q = select(cp.c.id, mm.c.id, mm.c.ts).select_from(
        cp.join(
            mm,
            and_(
                mm.c.session_id == cp.c.session_id,
                mm.c.ts > cp.c.ts,
                mm.c.ts < cp.c.wend,
                mm.c.kind == "compaction",
            ),
        )
    )
    with store.engine.connect() as conn:
        for emit_id, ev_id, ev_ts, event_type, meta in conn.execute(markers_q).all():
            calls[emit_id].append(Call(ev_ts, ev_id, event_type, metadata=meta))
        for emit_id, msg_id, ts in conn.execute(compactions_q).all():
            calls[emit_id].append(Call(ts, -msg_id, "PostCompact"))


def _follow_calls_lateral(
    store: Store, since: int, window: int, after_id: int
) -> tuple[dict[int, EmitRef], dict[int, list[Call]]]:
    """PostgreSQL: per emit, one LATERAL index scan for the first `window`+1 tool calls,
    aggregated to one row per emit (how many calls there were, and the relevant ones of
    the window as a JSON array): 10,000 rows cross the wire instead of 60,000."""
    from sqlalchemy.dialects.postgresql import aggregate_order_by

    a = anomaly_emits.alias("a")
    h = hook_events.alias("h")
    nxt = (
        select(
            h.c.id,
            h.c.ts,
            h.c.tool_name,
            h.c.tool_file_path,
            h.c.tool_files,
            h.c.tool_command,
            h.c.tool_command_prefix,
            # ts alone: the index order, so no sort step per emit.
            func.row_number().over(order_by=h.c.ts).label("rn"),
        )
        .where(h.c.session_id == a.c.session_id, h.c.event_type == "PreToolUse", h.c.ts > a.c.ts)
        .order_by(h.c.ts)
        .limit(window + 1)
        .lateral("nxt")
    )
    call = func.json_build_array(
        nxt.c.id,
        nxt.c.ts,
        nxt.c.tool_name,
        nxt.c.tool_file_path,
        case((nxt.c.tool_name == "apply_patch", nxt.c.tool_files), else_=None),
        nxt.c.tool_command,
        nxt.c.tool_command_prefix,
    )
    relevant = func.json_agg(aggregate_order_by(call, nxt.c.ts, nxt.c.id)).filter(
        and_(nxt.c.rn <= window, _relevant_call(a.c.kind, nxt.c.tool_name))
    )
    q = (
        select(
            a.c.id,
            a.c.ts,
            a.c.session_id,
            a.c.kind,
            a.c.stable_key,
            a.c.related_files,
            func.count(nxt.c.id),
            relevant,
        )
        .select_from(a.outerjoin(nxt, true()))
        .where(a.c.ts >= since, a.c.id > after_id)
        .group_by(a.c.id)
    )
    refs: dict[int, EmitRef] = {}
    calls: dict[int, list[Call]] = defaultdict(list)
    with store.engine.connect() as conn:
        rows = conn.execute(q).all()
    for emit_id, emit_ts, sid, kind, key, related, n, got in rows:
        refs[emit_id] = EmitRef(
            id=emit_id,
            ts=emit_ts,
            session_id=sid,
            kind=kind,
            subject=split_stable_key(key or "")[2],
            related_files=tuple(loads_list(related)) if kind in _FILE_KINDS else (),
            acted=n > 0,
            window_closed=n > window,
        )
        if isinstance(got, str):  # a driver that hands JSON over as text
            got = json.loads(got)
        for ev_id, ev_ts, tool, path, files, command, prefix in got or ():
            calls[emit_id].append(
                Call(
                    ev_ts,
                    ev_id,
                    "PreToolUse",
                    tool,
                    path,
                    tuple(loads_list(files)) if files else (),
                    command,
                    prefix,
                )
            )
    return refs, calls


def _test_commands(store: Store, since: int, after_id: int = 0) -> dict[int, tuple[str, ...]]:
    """test_stuck emits → prefixes of the failing commands (30 min before) whose output
    named the test. Failures are the rows with a failure_kind (exit or masked; design
    §2.8), read through the partial index ix_hook_events_session_failures_ts."""
    a = anomaly_emits.alias("a")
    e = hook_events.alias("e")
    q = (
        select(a.c.id, a.c.stable_key, e.c.tool_command_prefix, e.c.test_ids)
        .select_from(
            a.join(
                e,
                and_(
                    e.c.session_id == a.c.session_id,
                    e.c.failure_kind.is_not(None),
                    e.c.ts >= a.c.ts - TEST_LOOKBACK_MS,
                    e.c.ts <= a.c.ts,
                ),
            )
        )
        .where(a.c.ts >= since, a.c.id > after_id, a.c.kind == Kind.TEST_STUCK.value)
    )
    found: dict[int, dict[str, None]] = defaultdict(dict)
    decoded: dict[str, list[str]] = {}  # a failure sits in the lookback of several emits
    with store.engine.connect() as conn:
        for emit_id, key, prefix, test_ids in conn.execute(q).all():
            if not prefix or not test_ids or prefix in found[emit_id]:
                continue
            subject = split_stable_key(key or "")[2]
            # The substring test is cheap and rules out most rows before JSON decoding.
            if not subject or subject not in test_ids:
                continue
            ids = decoded.get(test_ids)
            if ids is None:
                ids = decoded[test_ids] = loads_list(test_ids)
            if subject in ids:
                found[emit_id][prefix] = None
    return {k: tuple(v) for k, v in found.items()}


@dataclass
class _FollowCache:
    """Verdicts of emits whose window has closed, per store and (days, window).

    A closed window (its (window+1)-th tool call exists) cannot change: events arrive
    with the server's clock, after everything already stored. An emit older than
    SETTLE_MS whose session went quiet is settled too (a session resumed a day later could
    in principle still follow it; we accept that). The dashboard polls the gate every
    10 s inside the daemon that also answers hooks; without this every poll would redo
    the whole week. `floor`: every emit with a larger id may still be open.
    """

    floor: int = 0
    verdicts: dict[int, tuple[int, str, bool]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


_FOLLOW_CACHES: weakref.WeakKeyDictionary[Store, dict[tuple[int, int], _FollowCache]] = (
    weakref.WeakKeyDictionary()
)
_CACHES_LOCK = threading.Lock()


_MAX_CACHES_PER_STORE = 8


def _follow_cache(store: Store, days: int, window: int) -> _FollowCache:
    with _CACHES_LOCK:
        per_store = _FOLLOW_CACHES.setdefault(store, {})
        cache = per_store.pop((days, window), None) or _FollowCache()
        per_store[(days, window)] = cache  # most recently used last
        while len(per_store) > _MAX_CACHES_PER_STORE:
            del per_store[next(iter(per_store))]  # parameters nobody asks for any more
        return cache


def _count_emits(store: Store, since: int, up_to_id: int) -> int:
    q = (
        select(func.count())
        .select_from(anomaly_emits)
        .where(anomaly_emits.c.ts >= since, anomaly_emits.c.id <= up_to_id)
    )
    with store.engine.connect() as conn:
        return int(conn.execute(q).scalar_one())


def _judge(store: Store, since: int, window: int, after_id: int) -> list[tuple[EmitRef, bool]]:
    refs, calls = _follow_inputs(store, since, window, after_id)
    tests = _test_commands(store, since, after_id)
    out = []
    for ref in refs:
        if ref.kind == Kind.TEST_STUCK:
            ref = replace(ref, test_commands=tests.get(ref.id, ()))
        out.append((ref, followed(ref, calls.get(ref.id, []), window)))
    return out


def judge_events(
    emits: Iterable[Mapping[str, Any]],
    events: Mapping[str, Sequence[HookEvent]],
    *,
    since: int = 0,
    window: int = DEFAULT_WINDOW,
) -> list[tuple[EmitRef, bool]]:
    """`_judge` over events held in memory instead of the database: a replay that keeps no
    database has every event at hand and writes none. `emits` are emit-log rows
    (`related_files` a list or its JSON); `events` each session's events in the order they
    were stored (ts ascending, then id). The same inputs as the SQL gathers — the window
    end, `acted`, the relevant calls, the markers, the test commands — then `followed`."""
    out: list[tuple[EmitRef, bool]] = []
    for row in emits:
        ts = int(row["ts"])
        if ts < since:
            continue
        kind = str(row["kind"])
        session = events.get(row["session_id"], ())
        # Events after the emit (strictly), and the tool calls among them.
        later = session[bisect_right(session, ts, key=_event_ts) :]
        tool_calls = [e for e in later if e.event_type == "PreToolUse"]
        wend = tool_calls[window].ts if len(tool_calls) > window else _FAR_FUTURE
        related = row["related_files"]
        if not isinstance(related, list):
            related = loads_list(related)
        ref = EmitRef(
            id=int(row["id"]),
            ts=ts,
            session_id=row["session_id"],
            kind=kind,
            subject=split_stable_key(row["stable_key"] or "")[2],
            related_files=tuple(related) if kind in _FILE_KINDS else (),
            acted=bool(tool_calls),
            window_closed=wend != _FAR_FUTURE,
        )
        tools = _TOOLS_BY_KIND.get(kind, ())
        calls = [
            Call(
                e.ts,
                e.id or 0,
                "PreToolUse",
                e.tool_name,
                e.tool_file_path,
                tuple(e.tool_files) if e.tool_name == "apply_patch" else (),
                e.tool_command,
                e.tool_command_prefix,
            )
            for e in tool_calls
            if e.ts < wend and e.tool_name in tools
        ]
        if kind == Kind.CONTEXT_PRESSURE.value:
            calls.extend(
                Call(
                    e.ts,
                    e.id or 0,
                    e.event_type,
                    metadata=json_text(e.metadata) if e.metadata else None,
                )
                for e in later
                if e.ts < wend and e.event_type in _MARKER_EVENTS
            )
            calls.sort(key=lambda c: (c.ts, not c.is_tool_call, c.id))
        if kind == Kind.TEST_STUCK.value:
            ref = replace(ref, test_commands=_test_commands_of(ref, session))
        out.append((ref, followed(ref, calls, window)))
    return out


_MARKER_EVENTS = COMPACTION_EVENTS | END_EVENTS | {"SessionStart"}


def _event_ts(ev: HookEvent) -> int:
    return ev.ts


def _test_commands_of(ref: EmitRef, session: Sequence[HookEvent]) -> tuple[str, ...]:
    """`_test_commands` for one emit, over its session's events in memory."""
    lo = bisect_left(session, ref.ts - TEST_LOOKBACK_MS, key=_event_ts)
    hi = bisect_right(session, ref.ts, key=_event_ts)
    found: dict[str, None] = {}
    for e in session[lo:hi]:
        prefix = e.tool_command_prefix
        if e.failure_kind is not None and prefix and ref.subject and ref.subject in e.test_ids:
            found[prefix] = None
    return tuple(found)


def budget_of_emits(
    emits: Iterable[Mapping[str, Any]],
    *,
    now_ms: int,
    days: int = DEFAULT_DAYS,
    budget: int = DEFAULT_BUDGET,
) -> dict[str, Any]:
    """`budget` over emit-log rows held in memory."""
    since = since_for_days(now_ms, days)
    counts: dict[tuple[str, int], int] = defaultdict(int)
    for row in emits:
        if row["ts"] >= since:
            counts[(str(row["kind"]), int(row["ts"]) // DAY_MS)] += 1
    rows = [(kind, day, n) for (kind, day), n in counts.items()]
    return budget_report(rows, since=since, now_ms=now_ms, days=days, budget=budget)


def follow_rate(
    store: Store,
    *,
    now_ms: int,
    days: int = DEFAULT_DAYS,
    window: int = DEFAULT_WINDOW,
    use_cache: bool = True,
) -> dict[str, Any]:
    since = since_for_days(now_ms, days)
    if not use_cache:
        judged = _judge(store, since, window, 0)
        return follow_report(
            [(r.kind, ok) for r, ok in judged], since=since, now_ms=now_ms, days=days, window=window
        )
    cache = _follow_cache(store, days, window)
    with cache.lock:
        cached = [(kind, ok) for ts, kind, ok in cache.verdicts.values() if ts >= since]
        if cache.floor and _count_emits(store, since, cache.floor) != len(cached):
            # Rows under the floor went away (purge) or appeared (an import): start over.
            cache.floor, cache.verdicts, cached = 0, {}, []
        judged = _judge(store, since, window, cache.floor)
        # Advance the floor over the leading run of closed windows (ids ascending).
        settled_before = now_ms - SETTLE_MS
        for ref, ok in sorted(judged, key=lambda j: j[0].id):
            if not (ref.window_closed or ref.ts < settled_before):
                break
            cache.verdicts[ref.id] = (ref.ts, ref.kind, ok)
            cache.floor = ref.id
        for emit_id in [i for i, v in cache.verdicts.items() if v[0] < since]:
            del cache.verdicts[emit_id]  # fell out of the range for good
        fresh = [(r.kind, ok) for r, ok in judged]
    return follow_report(cached + fresh, since=since, now_ms=now_ms, days=days, window=window)


def follow_report(
    verdicts: Iterable[tuple[str, bool]], *, since: int, now_ms: int, days: int, window: int
) -> dict[str, Any]:
    emits: dict[str, int] = defaultdict(int)
    done: dict[str, int] = defaultdict(int)
    for kind, ok in verdicts:
        emits[kind] += 1
        done[kind] += int(ok)
    kinds = list(KINDS) + sorted(k for k in emits if k not in KINDS)
    per_kind = {}
    for kind in kinds:
        rate = ratio(done[kind], emits[kind])
        per_kind[kind] = {
            "emits": emits[kind],
            "followed": done[kind],
            "rate": rate,
            **sample_verdict(rate, FOLLOW_TARGET, emits[kind], FOLLOW_MIN_EMITS),
            "action": FOLLOW_ACTIONS.get(kind, "none defined"),
        }
    total, total_done = sum(emits.values()), sum(done.values())
    return {
        "days": days,
        "window": window,
        "since": since,
        "until": now_ms,
        "target": FOLLOW_TARGET,
        "min_emits": FOLLOW_MIN_EMITS,
        "kinds": per_kind,
        "overall": {"emits": total, "followed": total_done, "rate": ratio(total_done, total)},
        "pass": overall_pass(v["pass"] for v in per_kind.values()),
        "status": overall_status(v["status"] for v in per_kind.values()),
    }


# --- gate 3: precision ------------------------------------------------------------------------


def precision(
    store: Store, *, now_ms: int, days: int = DEFAULT_DAYS, sample: int = PRECISION_SAMPLE
) -> dict[str, Any]:
    since = since_for_days(now_ms, days)
    q = (
        select(anomaly_labels.c.source, anomaly_labels.c.label, anomaly_emits.c.kind)
        .select_from(
            anomaly_labels.join(anomaly_emits, anomaly_emits.c.id == anomaly_labels.c.emit_id)
        )
        .where(anomaly_emits.c.ts >= since)
        .order_by(anomaly_emits.c.ts.desc(), anomaly_emits.c.id.desc())
    )
    with store.engine.connect() as conn:
        rows = [(r.source, r.kind, r.label) for r in conn.execute(q)]
    return precision_report(rows, since=since, now_ms=now_ms, days=days, sample=sample)


def precision_report(
    rows: Iterable[tuple[str, str, str]], *, since: int, now_ms: int, days: int, sample: int
) -> dict[str, Any]:
    """`rows` = (source, kind, label), newest emit first."""
    by_source: dict[str, list[tuple[str, str]]] = {s: [] for s in LABEL_SOURCES}
    for source, kind, label in rows:
        by_source.setdefault(source, []).append((kind, label))
    out: dict[str, Any] = {
        "days": days,
        "sample": sample,
        "since": since,
        "until": now_ms,
        "target": PRECISION_TARGET,
        "min_labels": PRECISION_MIN_LABELS,
    }
    for source, items in by_source.items():
        kinds = list(KINDS) + sorted({k for k, _ in items} - set(KINDS))
        per_kind = {
            kind: precision_figures([lab for k, lab in items if k == kind][:sample])
            for kind in kinds
        }
        out[source] = {
            "overall": precision_figures([lab for _, lab in items][:sample]),
            "kinds": per_kind,
        }
    out["kinds"] = out["human"]["kinds"]
    out["overall"] = out["human"]["overall"]
    out["pass"] = out["human"]["overall"]["pass"]
    out["status"] = out["human"]["overall"]["status"]
    return out


def all_gates(
    store: Store,
    *,
    now_ms: int,
    days: int = DEFAULT_DAYS,
    budget_per_day: int = DEFAULT_BUDGET,
    window: int = DEFAULT_WINDOW,
) -> dict[str, Any]:
    return {
        "budget": budget(store, now_ms=now_ms, days=days, budget=budget_per_day),
        "follow_rate": follow_rate(store, now_ms=now_ms, days=days, window=window),
        "precision": precision(store, now_ms=now_ms, days=days),
    }


def gate_table(gates: Mapping[str, Any]) -> list[dict[str, Any]]:
    """kind × gate rows: value, target, pass (None: no data)."""
    rows = []
    b, f, p = gates["budget"], gates["follow_rate"], gates["precision"]
    kinds = list(dict.fromkeys([*b["kinds"], *f["kinds"], *p["kinds"]]))
    for kind in kinds:
        bk = b["kinds"].get(kind)
        if bk:
            rows.append(
                {
                    "kind": kind,
                    "gate": "budget",
                    "value": f"max {bk['max_per_day']}/day, {bk['total']} total",
                    "target": f"<= {b['budget']}/day",
                    "pass": bk["pass"],
                    "status": bk.get("status", "pass" if bk["pass"] else "fail"),
                }
            )
        fk = f["kinds"].get(kind)
        if fk:
            value = (
                "no emits"
                if fk["rate"] is None
                else f"{fk['rate']:.0%} ({fk['followed']}/{fk['emits']})"
            )
            rows.append(
                {
                    "kind": kind,
                    "gate": "follow-rate",
                    "value": value,
                    "target": f">= {FOLLOW_TARGET:.0%} in {f['window']} calls",
                    "pass": fk["pass"],
                    "status": fk.get("status"),
                    "n": fk.get("n", fk["emits"]),
                }
            )
        pk = p["kinds"].get(kind)
        if pk:
            value = (
                "no labels"
                if pk["precision"] is None
                else f"{pk['precision']:.0%} ({pk['tp']} TP / {pk['fp']} FP)"
            )
            rows.append(
                {
                    "kind": kind,
                    "gate": "precision",
                    "value": value,
                    "target": f">= {PRECISION_TARGET:.0%}",
                    "pass": pk["pass"],
                    "status": pk.get("status"),
                    "n": pk.get("n", pk["labelled"]),
                }
            )
    return rows


# --- sessions ---------------------------------------------------------------------------------


def list_sessions(
    store: Store,
    *,
    limit: int = 100,
    since_ts: int | None = None,
    session_id: str | None = None,
    offset: int = 0,
    search: str | None = None,
) -> list[dict[str, Any]]:
    """Newest first (by last event), in the shape of `session_summary`.

    The Sessions tab polls this every 10 s inside the daemon, so it avoids one big GROUP
    BY over every event row: it picks the sessions from the (session_id, ts) index, then
    counts only theirs from the (session_id, event_type, ts) and failures indexes.
    """
    ev = hook_events
    picked = store.session_spans(
        limit=limit, offset=offset, since_ts=since_ts, session_id=session_id, search=search
    )
    spans = {sid: (lo, hi) for sid, lo, hi in picked}
    if not spans:
        return []
    with store.engine.connect() as conn:
        ids = list(spans)
        by_type: dict[str, dict[str, int]] = defaultdict(dict)
        tq = (
            select(ev.c.session_id, ev.c.event_type, func.count())
            .where(
                ev.c.session_id.in_(ids),
                ev.c.event_type.in_(("PreToolUse", "PostToolUse", "PostToolUseFailure")),
            )
            .group_by(ev.c.session_id, ev.c.event_type)
        )
        for sid, et, n in conn.execute(tq).all():
            by_type[sid][et] = int(n)
        fq = (
            select(ev.c.session_id, func.count())
            .where(ev.c.session_id.in_(ids), ev.c.failure_kind.is_not(None))
            .group_by(ev.c.session_id)
        )
        failures = {sid: int(n) for sid, n in conn.execute(fq).all()}
        newest = select(func.max(ev.c.id)).where(ev.c.session_id.in_(ids)).group_by(ev.c.session_id)
        who = {
            sid: (project, agent)
            for sid, project, agent in conn.execute(
                select(ev.c.session_id, ev.c.project, ev.c.agent_source).where(ev.c.id.in_(newest))
            ).all()
        }
        eq = (
            select(anomaly_emits.c.session_id, func.count())
            .where(anomaly_emits.c.session_id.in_(ids))
            .group_by(anomaly_emits.c.session_id)
        )
        emit_counts = {sid: int(n) for sid, n in conn.execute(eq).all()}
    out = []
    for sid, (lo, hi) in spans.items():
        t = by_type.get(sid, {})
        project, agent = who.get(sid, (None, None))
        out.append(
            {
                "session_id": sid,
                "project": project,
                "agent_source": agent,
                "start_ts": lo,
                "last_ts": hi,
                "duration_ms": hi - lo,
                # Old Claude Code logs have only Post events; count the fuller side.
                "tool_calls": max(
                    t.get("PreToolUse", 0),
                    t.get("PostToolUse", 0) + t.get("PostToolUseFailure", 0),
                ),
                "failures": failures.get(sid, 0),
                "anomalies": emit_counts.get(sid, 0),
            }
        )
    return out


def session_summary(store: Store, session_id: str) -> dict[str, Any] | None:
    found = list_sessions(store, limit=1, session_id=session_id)
    return found[0] if found else None


def _agent_of(m: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(agent_id, agent_type) of a sub-agent's event, None for the main agent: from the
    `agent_id`/`agent_type` columns when the store has them, else from the event's
    metadata JSON (where unknown hook fields land). Never raises on odd data."""
    agent_id = m.get("agent_id")
    agent_type = m.get("agent_type")
    if agent_id is None:
        meta: Any = m.get("metadata")
        if isinstance(meta, str) and meta:
            try:
                meta = json.loads(meta)
            except ValueError:
                meta = None
        if isinstance(meta, dict):
            agent_id = meta.get("agent_id")
            agent_type = agent_type or meta.get("agent_type")
    aid = str(agent_id)[:200] if isinstance(agent_id, str | int) and agent_id != "" else None
    atype = str(agent_type)[:100] if isinstance(agent_type, str) and agent_type else None
    return aid, atype if aid else None


def session_timeline(rows: Iterable[Mapping[Any, Any]]) -> list[dict[str, Any]]:
    """Events (sorted) → tool calls (a Pre joined with its Post by tool_use_id) and markers
    for the other events (prompts, stops, compactions). Each item has `agent_id` and
    `agent_type` (None: the main agent; else a sub-agent's lane)."""
    items: list[dict[str, Any]] = []
    open_calls: dict[str, dict[str, Any]] = {}
    for m in rows:
        agent_id, agent_type = _agent_of(m)
        et = m["event_type"]
        use_id = m["tool_use_id"]
        is_post = et in ("PostToolUse", "PostToolUseFailure")
        item = open_calls.pop(use_id, None) if is_post and use_id else None
        if item is None and (et == "PreToolUse" or is_post):
            item = {
                "type": "tool",
                "id": int(m["id"]),
                "ts": int(m["ts"]),
                "end_ts": None,
                "tool_name": m["tool_name"],
                "file": m["tool_file_path"],
                "command": m["tool_command"],
                "failed": False,
                "failure_kind": None,
                "error": None,
                "agent_id": agent_id,
                "agent_type": agent_type,
            }
            items.append(item)
            if et == "PreToolUse":
                if use_id:
                    open_calls[use_id] = item
                continue
        if item is None:
            items.append(
                {
                    "type": "event",
                    "id": int(m["id"]),
                    "ts": int(m["ts"]),
                    "event": et,
                    "agent_id": agent_id,
                    "agent_type": agent_type,
                }
            )
            continue
        failed = et == "PostToolUseFailure" or m["failure_kind"] == "masked"
        item["end_ts"] = int(m["ts"])
        item["failed"] = failed
        item["failure_kind"] = m["failure_kind"] if failed else None
        item["error"] = m["tool_error_summary"] if failed else None
    return items


def session_detail(store: Store, session_id: str, *, limit: int = 2000) -> dict[str, Any] | None:
    """Summary, timeline (the newest `limit` events, oldest first) and the session's emits."""
    summary = session_summary(store, session_id)
    if summary is None:
        return None
    ev = hook_events
    # agent_id/agent_type columns arrive with a later schema; until then, metadata has them.
    lane_cols = [c for c in (ev.c.get("agent_id"), ev.c.get("agent_type")) if c is not None]
    q = (
        select(
            ev.c.id,
            ev.c.ts,
            ev.c.event_type,
            ev.c.tool_name,
            ev.c.tool_use_id,
            ev.c.tool_file_path,
            ev.c.tool_command,
            ev.c.failure_kind,
            ev.c.tool_error_summary,
            ev.c.metadata,
            *lane_cols,
        )
        .where(ev.c.session_id == session_id)
        .order_by(ev.c.ts.desc(), ev.c.id.desc())
        .limit(limit)
    )
    with store.engine.connect() as conn:
        rows = [r._mapping for r in conn.execute(q)]
    rows.reverse()
    return {
        "session": summary,
        "timeline": session_timeline(rows),
        "emits": list_emits(store, session_id=session_id, limit=1000),
    }
