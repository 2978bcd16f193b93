"""Replay on several cores.

A session never sees another session's events: its window holds its own events, the file
changes of its project and its own usage, and suppression is kept per session. So
sessions that share no file changes can be replayed apart and give the same deliveries.
`plan` groups sessions with the projects whose file changes they see, and packs the
groups into shards of about the same work (hook events; a Stop or a prompt, which runs
the rules, counts five). The first shard runs in this process and each other one in a
forked child at the same time, through the same `Replayer` as a serial replay, into the
replay database (SQLite lets one writer in at a time; events go in batches, so the
others rarely wait). The caller then sums up as a serial replay does.

Used for SQLite targets where `fork` exists (Linux, the BSDs); anything else runs serially.
"""

from __future__ import annotations

import multiprocessing
import os
import traceback
from collections import Counter, defaultdict
from collections.abc import Sequence
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
    time order within each, heaviest shard first; sessions of a project with file changes
    stay in one shard."""
    # Only file changes tie sessions together: without any in a project, its sessions
    # replay apart (a recorded transcript carries none).
    changed = {i.change.project for i in items if i.kind == FILE_CHANGE and i.change is not None}
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
        if changed and item.payload:
            cwd = item.payload.get("cwd")
            if isinstance(cwd, str) and cwd and (project := project_for(cwd)) in changed:
                links.add((key, "p:" + project))

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


def replay_shard(
    shard: Shard,
    db: Path,
    threshold: int,
    keep_texts: bool,
    lock: Any = None,
    store: Store | None = None,
) -> tuple[list[tuple[int, Any]], dict[str, int], list[tuple[str, bool]]]:
    """Replay one shard into `db` (through `store` when given): (deliveries with their
    item's position, counters, follow-rate verdicts of its emits when `keep_texts` is
    False — `Replayer.verdicts`)."""
    from tma1.replay.driver import Replayer

    replayer = Replayer(
        start_ts=shard[0][1].ts,
        threshold=threshold,
        db=db,
        migrate=False,
        keep_texts=keep_texts,
        write_lock=lock,
        store=store,
    )
    try:
        placed: list[tuple[int, Any]] = []
        for pos, item in shard:
            before = len(replayer.deliveries)
            replayer.feed((item,))
            placed.extend((pos, d) for d in replayer.deliveries[before:])
        replayer.write()
        counters = dict(replayer.service.counters.snapshot(""))
        verdicts: list[tuple[str, bool]] = []
        if not keep_texts:
            # This shard's events are nowhere else: judge its own emits here (the other
            # shards' rows may or may not be in the shared emit log yet).
            mine = {item.session_id for _, item in shard}
            emits = [e for e in replayer.store.emits_since(0) if e["session_id"] in mine]
            verdicts = replayer.verdicts(emits)
    finally:
        replayer.close()
    return placed, counters, verdicts


Outcome = tuple[list[tuple[int, Any]], dict[str, int], list[tuple[str, bool]]]


def _work(
    shards: Plan, next_shard: Any, db: Path, threshold: int, keep_texts: bool, lock: Any
) -> Outcome:
    """Replay shards, each time the next one nobody has taken, until none is left."""
    placed: list[tuple[int, Any]] = []
    total: Counter[str] = Counter()
    verdicts: list[tuple[str, bool]] = []
    store = Store.open(f"sqlite:///{db}", migrate=False)
    try:
        while True:
            with next_shard.get_lock():
                i = next_shard.value
                next_shard.value += 1
            if i >= len(shards):
                return placed, dict(total), verdicts
            mine, counters, judged = replay_shard(shards[i], db, threshold, keep_texts, lock, store)
            placed.extend(mine)
            total.update(counters)
            verdicts.extend(judged)
    finally:
        store.close()


def _child(
    shards: Plan,
    next_shard: Any,
    db: Path,
    threshold: int,
    keep_texts: bool,
    lock: Any,
    conn: Connection,
) -> None:
    try:
        conn.send(("ok", *_work(shards, next_shard, db, threshold, keep_texts, lock)))
    except BaseException:
        conn.send(("error", traceback.format_exc(), {}, []))
    finally:
        conn.close()


def run(
    shards: Plan, *, threshold: int, db: Path, keep_texts: bool = True, jobs: int = 2
) -> tuple[list[Any], dict[str, int], list[tuple[str, bool]]]:
    """Replay the shards into the SQLite database `db` (made, and migrated when kept) on
    `jobs` processes: this one and forked children, each taking the next shard (heaviest
    first) when done.

    Returns the deliveries in the order a serial replay gives them, the summed counters,
    and with `keep_texts` False every shard's follow-rate verdicts. Raises RuntimeError
    when a shard fails (a child's traceback in the message)."""
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
            args=(shards, next_shard, db, threshold, keep_texts, lock, send),
            name=f"tma1-replay-{i}",
        )
        proc.start()
        send.close()
        children.append((proc, recv))
    placed: list[tuple[int, Any]] = []
    total: Counter[str] = Counter()
    verdicts: list[tuple[str, bool]] = []
    failure = ""
    try:
        mine, counters, judged = _work(shards, next_shard, db, threshold, keep_texts, lock)
        placed.extend(mine)
        total.update(counters)
        verdicts.extend(judged)
    except Exception:
        failure = traceback.format_exc()
    for proc, recv in children:
        try:
            status, payload, counters, judged = recv.recv()
        except EOFError:
            status, payload, counters = "error", f"{proc.name} exited without a result", {}
        proc.join()
        if status != "ok":
            failure = failure or str(payload)
            continue
        placed.extend(payload)
        total.update(counters)
        verdicts.extend(judged)
    if failure:
        raise RuntimeError(f"a replay shard failed:\n{failure}")
    placed.sort(key=lambda pd: pd[0])
    return [d for _, d in placed], {k: v for k, v in total.items() if v}, verdicts
