"""Sessions as their hook events show them: the listing, one session's events, and the
reads of the agent routes (tma1.server.routes_agent)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table, and_, case, func, or_, select

from tma1.store.db import Store
from tma1.store.schema import (
    anomaly_emits,
    external_changes,
    hook_events,
    messages,
    session_repos,
)

_TOOL_RESULT_EVENTS = ("PostToolUse", "PostToolUseFailure")


def list_sessions(
    store: Store,
    *,
    limit: int = 100,
    since_ts: int | None = None,
    session_id: str | None = None,
    offset: int = 0,
    search: str | None = None,
    machine: str | None = None,
    repo: str | None = None,
) -> list[dict[str, Any]]:
    """Newest first (by last event), in the shape of `session_summary`. `search` matches,
    case-insensitively and literally (no wildcards), a part of the session id or of the
    project of any of the session's events. The store's machine's sessions (a team view:
    every machine's); `machine` keeps one machine's, `repo` the sessions of one repository
    (`tma1_session_repos`, as `tma1.origin.repo.normalise_remote` spells it).

    The Sessions tab polls this every 10 s inside the daemon, so it avoids one big GROUP
    BY over every event row: it picks the page of sessions from the newest events (the ts
    index), then reads only theirs from the (session_id, ts), (session_id, event_type,
    ts) and failures indexes.
    """
    ev = hook_events
    # A team view on PostgreSQL keys a session by (session id, machine): nothing stops two
    # machines' agents from reporting one id (the agents make UUIDs; a wrapper or a test
    # may not), and their rows are two sessions. A SQLite file is one machine's: its
    # sessions are keyed by id alone (a session begun before migration 0005 has rows of no
    # machine and of this one).
    per_machine = store.machine_id is None and store.dialect == "postgresql"

    def key_of(table: Table) -> list[Any]:
        return [table.c.session_id, table.c.machine_id] if per_machine else [table.c.session_id]

    def key(sid: Any, mid: Any = None) -> tuple[str, str | None]:
        return (str(sid), mid if per_machine else None)

    conds: list[Any] = [store.mine(ev.c.machine_id)]
    if machine is not None:
        conds.append(ev.c.machine_id == machine)
    if repo is not None:
        in_repo = select(session_repos.c.session_id).where(
            session_repos.c.repo == repo, store.mine(session_repos.c.machine_id)
        )
        conds.append(ev.c.session_id.in_(in_repo))
    if session_id is not None:
        conds.append(ev.c.session_id == session_id)
    if search:
        needle = search.lower()
        conds.append(
            or_(
                func.lower(ev.c.session_id).contains(needle, autoescape=True),
                func.lower(ev.c.project).contains(needle, autoescape=True),
            )
        )
    last = func.max(ev.c.ts)
    # The page by each session's newest event, from the newest events first: a session
    # with an event since `lowest` has its newest there, and any other's newest is older,
    # so when the events since `lowest` hold the whole page it is the page over all of them. The
    # ts range widens until it does; a team database of millions of events is not grouped
    # whole for a page of sessions active today (bench/bench_team_gates.py).
    newest_ts = store.scalar(select(func.max(ev.c.ts)).where(*conds))
    if newest_ts is None:
        return []
    floor = since_ts if since_ts is not None else None
    found: dict[tuple[str, str | None], int] = {}
    for back_ms in (3_600_000, 86_400_000, 7 * 86_400_000, 30 * 86_400_000, None):
        lowest = None if back_ms is None else int(newest_ts) - back_ms
        if floor is not None and (lowest is None or lowest <= floor):
            lowest, back_ms = floor, None
        pick = select(*key_of(ev), last).where(*conds).group_by(*key_of(ev))
        if lowest is not None:
            pick = pick.where(ev.c.ts >= lowest)
        if since_ts is not None:
            pick = pick.having(last >= since_ts)
        pick = pick.order_by(last.desc(), *key_of(ev)).limit(limit).offset(offset)
        found = {key(*r[:-1]): int(r[-1]) for r in store.rows(pick)}
        if back_ms is None or len(found) == limit:
            break
    if not found:
        return []
    picked = sorted({sid for sid, _ in found})
    first = (
        select(*key_of(ev), func.min(ev.c.ts))
        .where(*conds, ev.c.session_id.in_(picked))
        .group_by(*key_of(ev))
    )
    starts = {key(*r[:-1]): int(r[-1]) for r in store.rows(first)}
    spans = {k: (starts.get(k, hi), hi) for k, hi in found.items()}
    with store.connect() as conn:
        ids = sorted({sid for sid, _ in spans})
        by_type: dict[tuple[str, str | None], dict[str, int]] = defaultdict(dict)
        tq = (
            select(*key_of(ev), ev.c.event_type, func.count())
            .where(
                ev.c.session_id.in_(ids),
                ev.c.event_type.in_(("PreToolUse", *_TOOL_RESULT_EVENTS)),
                store.mine(ev.c.machine_id),
            )
            .group_by(*key_of(ev), ev.c.event_type)
        )
        for *cols, et, n in conn.execute(tq).all():
            by_type[key(*cols)][et] = int(n)

        def count_by_session(table: Table, *where: Any) -> dict[tuple[str, str | None], int]:
            q = (
                select(*key_of(table), func.count())
                .where(table.c.session_id.in_(ids), store.mine(table.c.machine_id), *where)
                .group_by(*key_of(table))
            )
            return {key(*cols): int(n) for *cols, n in conn.execute(q).all()}

        failures = count_by_session(ev, ev.c.failure_kind.is_not(None))
        emit_counts = count_by_session(anomaly_emits)
        newest = (
            select(func.max(ev.c.id))
            .where(ev.c.session_id.in_(ids), store.mine(ev.c.machine_id))
            .group_by(*key_of(ev))
        )
        who = {
            key(sid, mid): (project, agent, mid)
            for sid, project, agent, mid in conn.execute(
                select(ev.c.session_id, ev.c.project, ev.c.agent_source, ev.c.machine_id).where(
                    ev.c.id.in_(newest)
                )
            ).all()
        }
        sr = session_repos.c
        repos = {
            # A store of no machine records its sessions' repositories under "".
            key(sid, mid or None): (repo_, path, host)
            for sid, mid, repo_, path, host in conn.execute(
                select(sr.session_id, sr.machine_id, sr.repo, sr.repo_path, sr.host).where(
                    sr.session_id.in_(ids), store.mine(sr.machine_id)
                )
            ).all()
        }
    out = []
    for k, (lo, hi) in spans.items():
        t = by_type.get(k, {})
        project, agent, mid = who.get(k, (None, None, None))
        repo_, repo_path, host = repos.get(k, (None, None, None))
        out.append(
            {
                "session_id": k[0],
                "project": project,
                "agent_source": agent,
                # NULL: stored before machines were recorded (migration 0005).
                "machine_id": mid,
                "host": host,
                "repo": repo_,
                "repo_path": repo_path,
                "start_ts": lo,
                "last_ts": hi,
                "duration_ms": hi - lo,
                # Old Claude Code logs have only Post events; count the fuller side.
                "tool_calls": max(
                    t.get("PreToolUse", 0),
                    t.get("PostToolUse", 0) + t.get("PostToolUseFailure", 0),
                ),
                "failures": failures.get(k, 0),
                "anomalies": emit_counts.get(k, 0),
            }
        )
    return out


def session_summary(store: Store, session_id: str) -> dict[str, Any] | None:
    found = list_sessions(store, limit=1, session_id=session_id)
    return found[0] if found else None


def timeline_rows(store: Store, session_id: str, *, limit: int) -> list[dict[str, Any]]:
    """The session's newest `limit` events, oldest first, with what a timeline shows."""
    ev = hook_events
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
            ev.c.agent_id,
            ev.c.agent_type,
        )
        .where(ev.c.session_id == session_id, store.mine(ev.c.machine_id))
        .order_by(ev.c.ts.desc(), ev.c.id.desc())
        .limit(limit)
    )
    rows = [dict(r._mapping) for r in store.rows(q)]
    rows.reverse()
    return rows


def usage_rows(store: Store, session_id: str) -> list[dict[str, Any]]:
    """The session's token-usage and compaction rows, oldest first."""
    q = (
        select(messages)
        .where(messages.c.session_id == session_id, store.mine(messages.c.machine_id))
        .order_by(messages.c.ts, messages.c.id)
    )
    return [dict(r._mapping) for r in store.rows(q)]


def session_transcript_path(store: Store, session_id: str) -> str | None:
    """The transcript the session's newest event that names one names (the peers'
    transcripts a `SessionStart` reads first, `tma1.sensors.Sensors.read_peers`)."""
    h = hook_events.c
    q = (
        select(h.transcript_path)
        .where(
            h.session_id == session_id,
            h.transcript_path.is_not(None),
            store.mine(h.machine_id),
        )
        .order_by(h.ts.desc(), h.id.desc())
        .limit(1)
    )
    rows = store.rows(q)
    return str(rows[0][0]) if rows and rows[0][0] else None


# --- the agent routes ---------------------------------------------------------------------


def session_bounds(store: Store, session_id: str) -> tuple[int, int, str | None, str | None] | None:
    """(first ts, last ts, newest project, its agent source); None: a session never seen."""
    ev = hook_events
    with store.connect() as conn:
        row = conn.execute(
            select(func.min(ev.c.ts), func.max(ev.c.ts)).where(
                ev.c.session_id == session_id, store.mine(ev.c.machine_id)
            )
        ).first()
        if row is None or row[0] is None:
            return None
        latest = conn.execute(
            select(ev.c.project, ev.c.agent_source)
            .where(
                ev.c.session_id == session_id,
                ev.c.project.is_not(None),
                store.mine(ev.c.machine_id),
            )
            .order_by(ev.c.ts.desc(), ev.c.id.desc())
            .limit(1)
        ).first()
    project = latest.project if latest else None
    source = latest.agent_source if latest else None
    return int(row[0]), int(row[1]), project, source


def newest_in_projects(
    store: Store, projects: Sequence[str], *, limit: int
) -> list[tuple[str, int]]:
    """(session, ts) of the newest `limit` events in any of `projects`, newest first: one
    index range per project, no GROUP BY over a project's whole history."""
    q = (
        select(hook_events.c.session_id, hook_events.c.ts)
        .where(hook_events.c.project.in_(list(projects)), store.mine(hook_events.c.machine_id))
        .order_by(hook_events.c.ts.desc(), hook_events.c.id.desc())
        .limit(limit)
    )
    return [(str(sid), int(ts)) for sid, ts in store.rows(q)]


_IS_FAILURE = or_(
    hook_events.c.event_type == "PostToolUseFailure", hook_events.c.failure_kind == "masked"
)


def tool_result_counts(store: Store, session_id: str) -> list[tuple[str | None, int, int]]:
    """(tool, results, failures) of the session's tool results."""
    failed = func.sum(case((_IS_FAILURE, 1), else_=0))
    q = (
        select(hook_events.c.tool_name, func.count(), failed)
        .where(
            hook_events.c.session_id == session_id,
            hook_events.c.event_type.in_(_TOOL_RESULT_EVENTS),
            store.mine(hook_events.c.machine_id),
        )
        .group_by(hook_events.c.tool_name)
    )
    return [(tool, int(n), int(f or 0)) for tool, n, f in store.rows(q)]


def recent_failures(
    store: Store, session_id: str, since_ts: int, *, limit: int
) -> tuple[int, list[Any]]:
    """How many tool results of the session failed since `since_ts`, and the newest
    `limit` of them (ts, tool_name, tool_command, tool_error_summary, failure_kind,
    test_ids, tool_file_path)."""
    h = hook_events.c
    where = and_(
        h.session_id == session_id,
        h.ts >= since_ts,
        h.event_type.in_(_TOOL_RESULT_EVENTS),
        _IS_FAILURE,
        store.mine(h.machine_id),
    )
    columns = (
        h.ts,
        h.tool_name,
        h.tool_command,
        h.tool_error_summary,
        h.failure_kind,
        h.test_ids,
        h.tool_file_path,
    )
    return _count_and_newest(store, hook_events, where, columns, limit)


def recent_writes(
    store: Store, session_id: str, write_tools: Sequence[str], *, limit: int
) -> list[Any]:
    """(ts, tool_files, tool_file_path) of the session's newest write-tool results."""
    h = hook_events.c
    q = (
        select(h.ts, h.tool_files, h.tool_file_path)
        .where(
            h.session_id == session_id,
            h.event_type == "PostToolUse",
            h.tool_name.in_(sorted(write_tools)),
            store.mine(h.machine_id),
        )
        .order_by(h.ts.desc(), h.id.desc())
        .limit(limit)
    )
    return list(store.rows(q))


def changes_behind(
    store: Store, project: str, since_ts: int, session_id: str, *, limit: int
) -> tuple[int, list[Any]]:
    """File changes in `project` since `since_ts` that `session_id` did not write: how
    many, and the newest `limit` rows."""
    x = external_changes.c
    behind = and_(
        x.project == project,
        x.ts >= since_ts,
        or_(x.writer_session.is_(None), x.writer_session != session_id),
        store.mine(x.machine_id),
    )
    return _count_and_newest(store, external_changes, behind, (external_changes,), limit)


def _count_and_newest(
    store: Store, table: Table, where: Any, columns: Sequence[Any], limit: int
) -> tuple[int, list[Any]]:
    """How many rows of `table` match `where`, and the newest `limit` of them."""
    newest = select(*columns).where(where).order_by(table.c.ts.desc(), table.c.id.desc())
    with store.connect() as conn:
        total = conn.execute(select(func.count()).select_from(table).where(where)).scalar_one()
        return int(total), list(conn.execute(newest.limit(limit)).all())


def repo_summary(store: Store, *, limit: int = 200) -> list[dict[str, Any]]:
    """The repositories of the store's sessions (a team view: every machine's), newest
    first: how many sessions, on how many machines, and the newest session start."""
    r = session_repos.c
    q = (
        select(
            r.repo,
            func.count(),
            func.count(func.distinct(r.machine_id)),
            func.max(r.ts),
        )
        .where(store.mine(r.machine_id))
        .group_by(r.repo)
        .order_by(func.max(r.ts).desc(), r.repo)
        .limit(limit)
    )
    return [
        {"repo": str(repo), "sessions": int(n), "machines": int(m), "last_start_ts": int(ts)}
        for repo, n, m, ts in store.rows(q)
    ]
