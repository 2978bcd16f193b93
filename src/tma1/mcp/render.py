"""Pure functions: tma1 API payloads → the text an agent reads in a tool result."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from tma1.clock import epoch_ms

CHANNEL_WORDS = {
    "user_prompt_submit": "the digest before your next prompt",
    "stop_block": "a Stop block when you try to finish",
    "post_tool_use": "the next tool result",
    "session_start": "the session bundle at start, resume or compaction",
}
MAX_TEXT = 12_000  # agents cut long tool output; the structured content keeps everything


def when(value: Any, now_ms: int | None) -> str:
    """`2026-01-31 12:00:05Z (7 min ago)`; `unknown` for a missing time."""
    ms = epoch_ms(value)
    if not ms:  # absent, unreadable, or 0 (which the API never means as 1970)
        return "unknown"
    stamp = datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    if now_ms is None:
        return stamp
    ago = max(0, now_ms - ms) // 1000
    if ago < 60:
        rel = f"{ago} s ago"
    elif ago < 3600:
        rel = f"{ago // 60} min ago"
    elif ago < 86_400:
        rel = f"{ago // 3600} h {ago % 3600 // 60} min ago"
    else:
        rel = f"{ago // 86_400} d ago"
    return f"{stamp} ({rel})"


def emit_rows(payload: Any) -> list[dict[str, Any]]:
    """The emit list of `GET /api/anomalies`, whether it is a bare list or wrapped."""
    if isinstance(payload, list):
        rows: Iterable[Any] = payload
    elif isinstance(payload, Mapping):
        rows = next(
            (payload[k] for k in ("emits", "items", "anomalies", "rows") if k in payload), []
        )
    else:
        rows = []
    return [dict(r) for r in rows if isinstance(r, Mapping)]


def attach_emit_ids(
    findings: list[dict[str, Any]], emits: list[dict[str, Any]], session_id: str
) -> list[dict[str, Any]]:
    """Give each finding the id of the newest emit of the same stable key in this session.

    Labels belong to emits (what the agent was actually told), so this is the id that
    `dismiss_anomaly` / `confirm_anomaly` take. A finding never delivered has none.
    """
    ids: dict[str, Any] = {}
    for e in sorted(emits, key=lambda e: epoch_ms(e.get("ts")) or 0):  # the newest wins
        if e.get("session_id") in (None, session_id) and e.get("id") is not None:
            ids[e.get("stable_key") or f"{e.get('kind')}|{e.get('severity')}|"] = e["id"]
    return [{**f, "emit_id": ids.get(str(f.get("stable_key") or ""))} for f in findings]


def _files(files: Any, limit: int = 8) -> str:
    if not isinstance(files, list) or not files:
        return ""
    names = [str(f) for f in files[:limit]]
    more = f" (+{len(files) - limit} more)" if len(files) > limit else ""
    return ", ".join(names) + more


def _cap(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return text
    return text[: MAX_TEXT - 60] + "\n… (cut; the structured result has everything)"


def render_anomalies(
    session_id: str,
    project: str | None,
    now_ms: int | None,
    findings: list[dict[str, Any]],
    recent_emits: list[dict[str, Any]],
    emit_log_note: str | None = None,
) -> str:
    where = f" (project {project})" if project else ""
    lines = [f"tma1 findings for session {session_id}{where}, as of {when(now_ms, None)}:"]
    if not findings:
        lines.append("No findings right now: nothing looks wrong in this session.")
    for i, f in enumerate(findings, 1):
        severity = str(f.get("severity", "?")).upper()
        channel = str(f.get("channel", "?"))
        lines.append(f"{i}. [{severity}] {f.get('kind', '?')}: {f.get('evidence', '')}")
        if f.get("suggestion"):
            lines.append(f"   Suggestion: {f['suggestion']}")
        if files := _files(f.get("related_files")):
            lines.append(f"   Related files: {files}")
        since = f.get("outstanding_since")
        told = (
            f"Outstanding since: {when(since, now_ms)} (when you were first told)"
            if epoch_ms(since)
            else "Not told yet: new since the last delivery"
        )
        lines.append(f"   {told}; newest evidence: {when(f.get('last_evidence_ts'), now_ms)}")
        place = CHANNEL_WORDS.get(channel, channel)
        if f.get("muted"):
            scope = f" in {f['muted_project']}" if f.get("muted_project") else ""
            until = (
                f" until {when(f.get('muted_until'), now_ms)}"
                if epoch_ms(f.get("muted_until"))
                else ""
            )
            lines.append(f"   Muted{scope}{until} (tma1 mute): shown here, never delivered to you.")
        elif f.get("would_deliver"):
            again = " again" if epoch_ms(since) else ""
            lines.append(f"   tma1 will tell you{again} in {place}.")
        else:
            lines.append(
                f"   Already told ({place}); silent until it changes or the 10-minute window ends."
            )
        if f.get("emit_id") is not None:
            lines.append(
                f"   Emit id {f['emit_id']}: confirm_anomaly({f['emit_id']}) if it is right, "
                f'dismiss_anomaly({f["emit_id"]}, "why") if it is wrong.'
            )
    if recent_emits:
        lines += ["", "Recently delivered to this session (emit log, newest first):"]
        for e in recent_emits:
            labels = e.get("labels")
            mine = labels.get("agent") if isinstance(labels, Mapping) else None
            if not isinstance(mine, Mapping):
                mine = None
            verdict = f" (your verdict: {mine.get('label')})" if mine else ""
            lines.append(
                f"- id {e.get('id')}: [{str(e.get('severity', '?')).upper()}] "
                f"{e.get('kind', '?')} at {when(e.get('ts'), now_ms)}{verdict}: "
                f"{str(e.get('evidence', ''))[:200]}"
            )
    if emit_log_note:
        lines += ["", f"(Emit ids unavailable: {emit_log_note})"]
    return _cap("\n".join(lines))


def render_state(state: Mapping[str, Any]) -> str:
    now = epoch_ms(state.get("now")) or None
    tc = state.get("tool_calls") or {}
    lines = [
        f"Session {state.get('session_id')} (project {state.get('project') or 'unknown'}, "
        f"{state.get('agent_source') or 'unknown agent'})",
        f"Started {when(state.get('started_at'), now)}; "
        f"last event {when(state.get('last_event_at'), now)}.",
        f"Tool calls: {tc.get('total', 0)} ({tc.get('failures', 0)} failed).",
    ]
    by_tool = tc.get("by_tool") or {}
    if by_tool:
        lines.append(
            "  By tool: "
            + ", ".join(
                f"{name} {v.get('calls', 0)}"
                + (f" ({v['failures']} failed)" if v.get("failures") else "")
                for name, v in by_tool.items()
            )
        )
    fl = state.get("failures_last_30_min") or {}
    lines.append(f"Failures in the last 30 min: {fl.get('count', 0)}.")
    for item in fl.get("newest") or []:
        what = item.get("command") or item.get("file_path") or item.get("tool_name") or "?"
        err = item.get("error") or ""
        lines.append(f"  - {when(item.get('ts'), now)}: {what}" + (f" → {err}" if err else ""))
    edits = state.get("recent_edits") or []
    if edits:
        lines.append("Recently edited files (newest first):")
        lines.extend(
            f"  - {e.get('path')} ({e.get('edits')}×, last {when(e.get('last_edit_at'), now)})"
            for e in edits
        )
    else:
        lines.append("No files edited yet.")
    ctx = state.get("context") or {}
    occ, thr = ctx.get("occupancy"), ctx.get("threshold")
    if occ is None:
        lines.append(f"Context occupancy: not measured yet (threshold {thr} tokens).")
    else:
        pct = f"{100 * occ / thr:.0f}%" if thr else "?"
        over = " — over the threshold: consider compacting" if ctx.get("over_threshold") else ""
        lines.append(f"Context occupancy: {occ} tokens of the {thr}-token threshold ({pct}){over}.")
    return _cap("\n".join(lines))


def render_changes(payload: Mapping[str, Any]) -> str:
    now = epoch_ms(payload.get("now")) or None
    changes = payload.get("changes") or []
    head = (
        f"Files changed behind session {payload.get('session_id')} in "
        f"{payload.get('project') or 'an unknown project'} since "
        f"{when(payload.get('since'), now)}:"
    )
    if not changes:
        return head + "\nNone: nobody else changed files in this project in that time."
    lines = [head]
    for c in changes:
        who = c.get("changed_by")
        by = f"session {who}" if who else "nobody we know (an editor, git, a tool or a person)"
        lines.append(f"- {c.get('path')} {c.get('change')} at {when(c.get('ts'), now)} by {by}")
    total = payload.get("total")
    if payload.get("truncated"):
        lines.append(f"… {total} changes in all; only the newest {len(changes)} are listed.")
    lines.append("Re-read a file before editing it if it changed after you last read it.")
    return _cap("\n".join(lines))


def render_bundle(bundle: Mapping[str, Any]) -> str:
    """The bundle preview: its text as a SessionStart would get it, or why it is silent."""
    sid = bundle.get("session_id", "?")
    source = bundle.get("source") or "resume"
    text = str(bundle.get("text") or "")
    if not text:
        return (
            f"Session {sid}: a SessionStart ({source}) now would be told nothing — no check "
            "is failing in the project, nothing of this session is unresolved or not yet "
            "told in this context epoch, no file changed outside, no other session is active."
        )
    parts = ", ".join(str(p) for p in bundle.get("parts") or [])
    head = f"Session {sid}: a SessionStart ({source}) now would be told ({parts}):"
    return _cap(head + "\n" + text)
