"""Replay on several cores.

A session sees no other project: its window holds its own events, the file changes of its
project and its own usage, suppression is kept per session, and the session bundle at
SessionStart (tma1.engine.bundle) reads the project's other sessions (their open checks,
whether they are active). So sessions of different projects can be replayed apart and
give the same deliveries. `plan` groups sessions with their projects, and packs the
groups into shards of about the same work (hook events; a Stop or a prompt, which runs
the rules, counts five). The first shard runs in this process and each other one in a
forked child at the same time, through the same `Replayer` as a serial replay: in memory,
each process judging the follow-rate of its own emits, or into the database to keep
(SQLite lets one writer in at a time; events go in batches, so the others rarely wait).
The caller then sums up as a serial replay does.

Used for SQLite targets where `fork` exists (Linux, the BSDs); anything else runs serially.
"""

from __future__ import annotations

import multiprocessing
import os
import traceback
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from tma1.events import project_for
from tma1.replay.model import FILE_CHANGE, HOOK, ReplayItem
from tma1.store import Store

# Below this many hook events per process, forking costs more than it saves.
MIN_EVENTS_PER_SHARD = 1_000
# Shards per process. More than one lets whoever finishes first take the next one, which
# evens out what the weights misjudge, but each costs an engine set-up and colder caches:
# on the corpus, 1 measured best (bench/bench_replay.py; 2 and 3 were 5 % and 20 % slower).
SHARDS_PER_WORKER = 1

_ANSWERED = frozenset({"Stop", "UserPromptSubmit"})
_ANSWERED_WEIGHT = 5

Shard = list[tuple[int, ReplayItem]]
Plan = list[Shard]


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def default_jobs() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


def plan(items: Sequence[ReplayItem], jobs: int) -> Plan:
    """Items (with their position in `items`) split into shards for `jobs` processes, in
    time order within each, heaviest shard first; the sessions and file changes of one
    project stay in one shard."""
    positions: dict[str, list[int]] = defaultdict(list)  # "s:<session>" | "p:<project>"
    weight: Counter[str] = Counter()
    links: set[tuple[str, str]] = set()
    events = 0
    for pos, item in enumerate(items):
        if item.kind == FILE_CHANGE and item.change is not None:
            positions["p:" + item.change.project].append(pos)
            continue
        key = "s:" + item.session_id
        positions[key].append(pos)
        if item.kind != HOOK:
            continue
        events += 1
        # An answered hook runs the rules over the window: about five events' work.
        weight[key] += _ANSWERED_WEIGHT if item.hook_event in _ANSWERED else 1
        if item.payload:
            cwd = item.payload.get("cwd")
            if isinstance(cwd, str) and cwd:
                node = "p:" + project_for(cwd)
                positions.setdefault(node, [])  # a project node even without file changes
                links.add((key, node))

    parent = {k: k for k in positions}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in links:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb
    groups: dict[str, list[str]] = defaultdict(list)
    for k in positions:
        groups[find(k)].append(k)
    group_weight = {root: sum(weight[k] for k in keys) for root, keys in groups.items()}

    workers = max(1, min(jobs, events // MIN_EVENTS_PER_SHARD or 1))
    n = workers * SHARDS_PER_WORKER if workers > 1 else 1
    load = [0] * n
    members: list[list[str]] = [[] for _ in range(n)]
    # Largest group first into the emptiest shard: close to even for a handful of groups.
    for root in sorted(groups, key=lambda r: (-group_weight[r], r)):
        i = load.index(min(load))
        members[i].extend(groups[root])
        load[i] += group_weight[root]
    out: Plan = []
    # Heaviest first: the workers take them in this order, each the next one when done.
    for i in sorted(range(n), key=lambda i: -load[i]):
        mine = sorted(p for k in members[i] for p in positions[k])
        if mine:
            out.append([(p, items[p]) for p in mine])
    return out


@dataclass
class Outcome:
    """What replaying shards gave: deliveries and emit-log rows with the position of the
    item that caused them, counters, and follow-rate verdicts (with no database kept)."""

    placed: list[tuple[int, Any]] = field(default_factory=list)
    emits: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    counters: Counter[str] = field(default_factory=Counter)
    verdicts: list[tuple[str, bool]] = field(default_factory=list)

    def add(self, other: Outcome) -> None:
        self.placed.extend(other.placed)
        self.emits.extend(other.emits)
        self.counters.update(other.counters)
        self.verdicts.extend(other.verdicts)


@dataclass
class Result:
    """`run`'s answer, in the order a serial replay gives it."""

    deliveries: list[Any]
    emits: list[dict[str, Any]]  # with no database kept; else read it from the database
    counters: dict[str, int]
    verdicts: list[tuple[str, bool]]


def replay_shard(
    shard: Shard, threshold: int | None, store: Store | None = None, lock: Any = None
) -> Outcome:
    """Replay one shard: into `store` when the database is kept, else in memory (then its
    emits are judged here — its events are nowhere else)."""
    from tma1.replay.driver import Replayer

    replayer = Replayer(start_ts=shard[0][1].ts, threshold=threshold, write_lock=lock, store=store)
    out = Outcome()
    try:
        log = replayer.emitlog
        for pos, item in shard:
            told, emitted = len(replayer.deliveries), len(log.rows) if log else 0
            replayer.feed((item,))
            out.placed.extend((pos, d) for d in replayer.deliveries[told:])
            if log is not None:
                out.emits.extend((pos, row) for row in log.rows[emitted:])
        replayer.write()
        out.counters.update(replayer.service.counters.snapshot(""))
        if log is not None:
            out.verdicts = replayer.verdicts(log.rows, [item for _, item in shard])
    finally:
        replayer.close()
    return out


def _work(
    shards: Plan, next_shard: Any, db: Path | None, threshold: int | None, lock: Any
) -> Outcome:
    """Replay shards, each time the next one nobody has taken, until none is left."""
    out = Outcome()
    store = Store.open(f"sqlite:///{db}", migrate=False) if db is not None else None
    try:
        while True:
            with next_shard.get_lock():
                i = next_shard.value
                next_shard.value += 1
            if i >= len(shards):
                return out
            out.add(replay_shard(shards[i], threshold, store, lock))
    finally:
        if store is not None:
            store.close()


def _child(
    shards: Plan,
    next_shard: Any,
    db: Path | None,
    threshold: int | None,
    lock: Any,
    conn: Connection,
) -> None:
    try:
        conn.send(("ok", _work(shards, next_shard, db, threshold, lock)))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


def run(shards: Plan, *, threshold: int | None, db: Path | None, jobs: int = 2) -> Result:
    """Replay the shards on `jobs` processes: this one and forked children, each taking
    the next shard (heaviest first) when done — into the migrated SQLite database `db`,
    or with none (`db` None) in memory, each process judging its own emits.

    Raises RuntimeError when a shard fails (a child's traceback in the message)."""
    ctx = multiprocessing.get_context("fork")
    lock = ctx.Lock()
    next_shard = ctx.Value("i", 0)
    # The caller (replay_items) has the garbage collector leave the items alone
    # (gc.freeze): the children inherit that, so they neither scan nor copy those pages.
    children = []
    for i in range(1, max(1, min(jobs, len(shards)))):
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(
            target=_child,
            args=(shards, next_shard, db, threshold, lock, send),
            name=f"tma1-replay-{i}",
        )
        proc.start()
        send.close()
        children.append((proc, recv))
    total = Outcome()
    failure = ""
    try:
        total.add(_work(shards, next_shard, db, threshold, lock))
    except Exception:
        failure = traceback.format_exc()
    for proc, recv in children:
        try:
            status, payload = recv.recv()
        except EOFError:
            status, payload = "error", f"{proc.name} exited without a result"
        proc.join()
        if status != "ok":
            failure = failure or str(payload)
            continue
        total.add(payload)
    if failure:
        raise RuntimeError(f"a replay shard failed:\n{failure}")
    total.placed.sort(key=lambda pd: pd[0])
    # Numbered as one process numbers them: in the order of the items that caused them.
    total.emits.sort(key=lambda pe: (pe[0], pe[1]["id"]))
    emits = [{**row, "id": n} for n, (_, row) in enumerate(total.emits, start=1)]
    return Result(
        deliveries=[d for _, d in total.placed],
        emits=emits,
        counters={k: v for k, v in total.counters.items() if v},
        verdicts=total.verdicts,
    )
