"""Replay: run recorded sessions through the live code path with a virtual clock.

The engine is a pure function of events and time (design §2.1), so yesterday's sessions
can be run again: a real `Service` (ingest, detector, suppression, emit log) is built with
a `ManualClock`; each recorded item, in time order, sets the clock to its timestamp and
goes in the way it went in live — hook payloads through `Service.handle_hook_async`, the
one entry path `POST /api/hooks` takes too (here with the payload already decoded, all of
a feed on one event loop), file changes and token usage as the
watcher and the transcript tailer store them. Every non-empty answer is a delivery.

What differs from live, on purpose:
- the engine's ports are in memory (`tma1.engine.ports`): events are committed to
  `tma1.replay.memory.MemoryEvents`, windows and the bundle's reads come from
  `MemoryWindows` (the same events, in the same lean form, at the same `now`), emits go to
  `MemoryEmits`, and nothing is muted. The summary runs the gates' own functions over what
  is held (`gates.judge_events`, `gates.budget_of_emits`); with `--db` everything held is
  written to that database at the end and the summary is the gates' over it — the same
  figures, as the tests check;
- `transcript_path` is taken out of hook payloads: the usage of the time is in the
  recording, and the transcript on disk today is not what it was then;
- data never expires (TTL): a replay of last month must not purge itself;
- the 1 MB body limit of the HTTP route is not applied (the payloads are not bodies).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tma1 import gates
from tma1.adapters.agents import normalize
from tma1.clock import ManualClock
from tma1.config import Settings
from tma1.counters import Counters
from tma1.engine.delivery import CHANNEL_FOR_HOOK, Delivery
from tma1.gates import live
from tma1.live.service import build_service
from tma1.origin.machine import REPLAY_MACHINE_ID
from tma1.replay import (
    claude_hooklog,
    eventlog,
)
from tma1.replay.formats import (
    CLAUDE_HOOKLOG,
    EVENTLOG,
    Records,
    converter,
    described,
    detect,
    read_records,
)
from tma1.replay.memory import MemoryEmits, MemoryEvents, MemoryWindows
from tma1.replay.model import FILE_CHANGE, HOOK, USAGE, Converted, Note, Problem, ReplayItem
from tma1.store import Store

log = logging.getLogger("tma1.replay")

NEVER_EXPIRE_S = 100 * 365 * 86_400
WRITE_BATCH = 5_000  # events per transaction when the database is kept
DAY_MS = 86_400_000

_SKIP_NAMES = ("README", ".DS_Store")


# --- loading -------------------------------------------------------------------------------


def expand_paths(paths: Iterable[str | Path]) -> tuple[list[Path], list[Problem]]:
    """Files as given, each session transcript (`<session>.jsonl`) with the sub-agent
    transcripts Claude Code (≥ 2.x) writes beside it (`<session>/subagents/agent-*.jsonl`);
    directories recursively (sorted), less the sub-agents' `agent-<id>.meta.json` (read by
    the transcript converter beside its transcript); missing paths are problems."""
    files: list[Path] = []
    problems: list[Problem] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            files += [
                f
                for f in sorted(p.rglob("*"))
                if f.is_file()
                and not f.name.startswith(_SKIP_NAMES)
                and f.suffix != ".md"
                and not (f.parent.name == "subagents" and f.name.endswith(".meta.json"))
            ]
        elif p.is_file():
            files.append(p)
            if p.suffix == ".jsonl":
                files += sorted((p.with_suffix("") / "subagents").glob("agent-*.jsonl"))
        else:
            problems.append(Problem(str(p), 0, "no such file or directory"))
    return list(dict.fromkeys(files)), problems


def load(paths: Iterable[str | Path]) -> tuple[list[Converted], list[Problem]]:
    """Read, detect and convert every input. Hook logs are converted together so a
    PostToolUse logged in one file finds its PreToolUse in another."""
    files, problems = expand_paths(paths)
    converted: list[Converted | None] = []
    hooklogs: list[Records] = []  # converted together, into the places left as None
    for f in files:
        records = read_records(f)
        fmt = detect(records)
        if fmt == CLAUDE_HOOKLOG:
            hooklogs.append(records)
            converted.append(None)
            continue
        if fmt is None:
            out = Converted.of(records, "unknown")
            if records.records or not records.problems:
                out.problem(
                    0, f"format not recognised (replay reads {described(where=False)}); skipped"
                )
            converted.append(out)
            continue
        try:
            convert = eventlog.convert if fmt == EVENTLOG else converter(fmt)
            assert convert is not None  # `detect` names only formats that have one
            converted.append(convert(records))
        except Exception as exc:  # a converter bug must not end the whole replay
            log.exception("converting %s failed", f)
            out = Converted(path=str(f), format=fmt, records=len(records.records))
            out.problem(0, f"conversion failed: {exc!r}")
            converted.append(out)
    hooklog_outs = iter(claude_hooklog.convert_many(hooklogs))
    return [next(hooklog_outs) if c is None else c for c in converted], problems


def merge_items(converted: Sequence[Converted]) -> tuple[list[ReplayItem], int]:
    """All items in time order (ties: input order, then position in the file); an item
    seen in an earlier input (same key) is dropped. Returns (items, duplicates dropped)."""
    seen: set[str] = set()
    rows: list[tuple[int, int, int, ReplayItem]] = []
    dups = 0
    for fi, conv in enumerate(converted):
        for item in conv.items:
            if item.key is not None:
                if item.key in seen:
                    dups += 1
                    continue
                seen.add(item.key)
            rows.append((item.ts, fi, item.seq, item))
    rows.sort(key=lambda r: r[:3])
    return [r[3] for r in rows], dups


# --- running -------------------------------------------------------------------------------


@dataclass(slots=True)
class DeliveryRecord:
    ts: int
    session_id: str
    hook_event: str
    channel: str
    body: str
    origin: str
    findings: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"ts": self.ts, "time": iso(self.ts), **asdict(self)}


@dataclass(slots=True)
class ReplayResult:
    inputs: list[Converted]
    problems: list[Problem]
    deliveries: list[DeliveryRecord]
    emits: list[dict[str, Any]]
    summary: dict[str, Any]
    events_fed: int
    items_fed: int
    duplicates_dropped: int
    elapsed_s: float
    counters: dict[str, int]

    @property
    def all_problems(self) -> list[Problem]:
        return [*self.problems, *(p for c in self.inputs for p in c.problems)]

    @property
    def notes(self) -> list[Note]:
        return [n for c in self.inputs for n in c.notes]


def iso(ts: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts / 1000)) + f".{ts % 1000:03d}Z"


def default_db_dir() -> str | None:
    """tmpfs when there is one: nothing in a replay's scratch directory needs to survive."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


class Replayer:
    """One replay, in three steps a caller can time: `feed` runs items through the engine,
    `write` stops it and puts what it held into the database to keep (`db`, if any),
    `finish` sums it up (tma1.gates) and closes everything.

    The engine runs over in-memory ports (see the module's doc). `Service` still holds a
    store for its own edges (purge, health, sensors), none of which a replay starts: the
    database to keep, or a scratch one nobody reads."""

    def __init__(
        self,
        *,
        start_ts: int,
        threshold: int | None = None,
        db: str | Path | None = None,
    ) -> None:
        database_url = f"sqlite:///{Path(db).resolve()}" if db is not None else None
        self._tmp = tempfile.TemporaryDirectory(prefix="tma1-replay-", dir=default_db_dir())
        data_dir = Path(self._tmp.name)
        settings = Settings(
            data_dir=data_dir,
            database_url=database_url or f"sqlite:///{data_dir / 'replay.db'}",
            watch_files=False,
            context_pressure_threshold=threshold,
            data_ttl_seconds=NEVER_EXPIRE_S,
        )
        # The database to keep, if any; the Service's own store either way.
        # One fixed machine, whoever replays: a replay's rows read the same everywhere.
        mid = REPLAY_MACHINE_ID
        self.target = Store.open(database_url, machine_id=mid) if database_url else None
        self.store = self.target or Store.scratch(data_dir / "replay.db", machine_id=mid)
        self.clock = clock = ManualClock(start_ts)
        counters = Counters()
        windows = MemoryWindows()
        self.events = MemoryEvents(windows)
        self.emitlog = MemoryEmits(counters=counters)
        self.delivery = delivery = Delivery(
            windows=windows,
            reads=windows,
            emits=self.emitlog,
            clock=clock,
            settings=settings,
            counters=counters,
        )
        self.service = build_service(
            settings,
            clock=clock,
            store=self.store,
            counters=counters,
            delivery=delivery,
            ingest=self.events,
        )
        self.deliveries: list[DeliveryRecord] = []
        # Only the engine runs: nothing expires in a replay (no purger) and nothing is
        # watched or tailed (no sensor threads; see the module's doc).
        delivery.start()
        self._stopped = False

    def feed(self, items: Iterable[ReplayItem]) -> None:
        """Each item at its own time, the way it went in live (see the module's doc)."""
        asyncio.run(self._feed(items))

    async def _feed(self, items: Iterable[ReplayItem]) -> None:
        clock, service, delivery, events = self.clock, self.service, self.delivery, self.events
        for item in items:
            if item.ts > clock.now_ms():
                clock.set(item.ts)
            if item.kind == HOOK and item.payload is not None:
                payload = item.payload
                if "transcript_path" in payload:
                    payload = {k: v for k, v in payload.items() if k != "transcript_path"}
                body = await service.handle_hook_async(
                    payload, source=item.source, envelope=item.envelope
                )
                if body:
                    # tma1's name for it (the agent's dialect renames its own).
                    named = normalize(payload, item.source).get("hook_event_name")
                    hook = named if isinstance(named, str) else item.hook_event or ""
                    channel = CHANNEL_FOR_HOOK.get(hook)
                    self.deliveries.append(
                        DeliveryRecord(
                            ts=clock.now_ms(),
                            session_id=item.session_id,
                            hook_event=hook,
                            channel=str(channel) if channel else "",
                            body=body,
                            origin=item.origin,
                        )
                    )
            elif item.kind == FILE_CHANGE and item.change is not None:
                events.add_change(item.change)
                delivery.invalidate_project(item.change.project)
            elif item.kind == USAGE and item.usage is not None:
                events.add_usage(item.usage)
                delivery.invalidate(item.usage.session_id)

    def write(self) -> None:
        """Stop the engine and, when the database is kept, write what was fed and emitted."""
        self._stop()
        target, held = self.target, self.events
        if target is None:
            return
        for i in range(0, len(held.events), WRITE_BATCH):
            target.insert_events(held.events[i : i + WRITE_BATCH])
        target.insert_changes(held.changes)
        target.insert_usages(held.usages)
        target.insert_emits(self.emitlog.rows)

    def finish(
        self, items: Sequence[ReplayItem]
    ) -> tuple[list[DeliveryRecord], list[dict[str, Any]], dict[str, Any], dict[str, int]]:
        """Deliveries with their findings, emit-log rows, summary and counters."""
        try:
            self.write()
            # The emit log's rows, ordered by (ts, id); as the database gives them back.
            target = self.target
            emits = target.emits_since(0) if target is not None else self.emitlog.rows_since(0)
            attach_findings(self.deliveries, emits)
            summary = self.summary(emits, items)
        finally:
            self.close()
        counters = {k: v for k, v in self.service.counters.snapshot("").items() if v}
        return self.deliveries, emits, summary, counters

    def summary(
        self, emits: Sequence[dict[str, Any]], items: Sequence[ReplayItem]
    ) -> dict[str, Any]:
        """Emits per kind, the budget per day and kind, the follow-rate per kind (tma1.gates)
        over the whole replayed span: the gates as the server runs them when the database is
        kept, else the gates' own functions over the events held and the transcript
        compactions among `items` — the same figures, as the tests check."""
        if not items:
            return {"emits_per_kind": {}, "budget": None, "follow_rate": None}
        first, last = items[0].ts, items[-1].ts
        days = int(last // DAY_MS - first // DAY_MS) + 1
        if self.target is not None:
            budget = live.budget(self.target, now_ms=last, days=days)
            follow = live.follow_rate(self.target, now_ms=last, days=days)
        else:
            compactions: dict[str, list[int]] = defaultdict(list)
            for item in items:
                if (
                    item.kind == USAGE
                    and item.usage is not None
                    and item.usage.kind == "compaction"
                ):
                    compactions[item.usage.session_id].append(item.usage.ts)
            judged = gates.judge_events(emits, self.events.sessions(), compactions=compactions)
            budget = gates.budget_of_emits(emits, now_ms=last, days=days)
            follow = gates.follow_report(
                [(r.kind, ok) for r, ok in judged],
                since=gates.since_for_days(last, days),
                now_ms=last,
                days=days,
                window=gates.DEFAULT_WINDOW,
            )
        return {
            "emits_per_kind": dict(sorted(Counter(e["kind"] for e in emits).items())),
            "emits": len(emits),
            "span": {"from": iso(first), "to": iso(last), "days": days},
            "budget": {
                "budget": budget["budget"],
                # Only the days something was emitted: a replay can span months.
                "per_day": [row for row in budget["per_day"] if row["count"]],
                "kinds": budget["kinds"],
                "pass": budget["pass"],
            },
            "follow_rate": {k: follow[k] for k in ("window", "target", "kinds", "overall", "pass")},
        }

    def _stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            self.service.stop()

    def close(self) -> None:
        self._stop()
        self.store.close()
        self._tmp.cleanup()


def replay_items(
    items: Sequence[ReplayItem],
    *,
    threshold: int | None = None,
    db: str | Path | None = None,
) -> tuple[list[DeliveryRecord], list[dict[str, Any]], dict[str, Any], dict[str, int]]:
    """Feed `items` (time-ordered) through a fresh engine: deliveries, emit-log rows,
    summary and counters. `db` keeps the database for inspection; without
    them nothing is written (`Replayer`)."""
    replayer = Replayer(
        start_ts=items[0].ts if items else 0,
        threshold=threshold,
        db=db,
    )
    try:
        replayer.feed(items)
    except BaseException:
        replayer.close()
        raise
    return replayer.finish(items)


def attach_findings(deliveries: list[DeliveryRecord], emits: Sequence[dict[str, Any]]) -> None:
    """Each emit-log row belongs to the delivery of its session, time and channel."""
    by_key: dict[tuple[str, int, str], list[dict[str, Any]]] = defaultdict(list)
    for e in emits:
        by_key[(e["session_id"], int(e["ts"]), e["channel"])].append(e)
    for d in deliveries:
        rows = by_key.pop((d.session_id, d.ts, d.channel), [])
        d.findings = [
            {
                "kind": r["kind"],
                "severity": r["severity"],
                "stable_key": r["stable_key"],
                "evidence": r["evidence"],
                "suggestion": r["suggestion"],
                "related_files": json.loads(r["related_files"]),  # JSON text, as stored
                "first_emitted_at": r["first_emitted_at"],
            }
            for r in rows
        ]


def replay_paths(
    paths: Iterable[str | Path],
    *,
    threshold: int | None = None,
    db: str | Path | None = None,
) -> ReplayResult:
    t0 = time.perf_counter()
    inputs, problems = load(paths)
    items, dups = merge_items(inputs)
    deliveries, emits, summary, counters = replay_items(items, threshold=threshold, db=db)
    return ReplayResult(
        inputs=inputs,
        problems=problems,
        deliveries=deliveries,
        emits=emits,
        summary=summary,
        events_fed=sum(1 for i in items if i.kind == HOOK),
        items_fed=len(items),
        duplicates_dropped=dups,
        elapsed_s=time.perf_counter() - t0,
        counters=counters,
    )
