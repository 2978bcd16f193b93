"""The corpus scripts/evaluate.py judges: the recorded sessions, read and replayed.

Two replays of the same recordings:
- each session on its own (`replay`): the emits and their follow-rate, as the emit tables
  have always been computed (the engine's state is per session);
- the sessions of one repository together, in time order, into one engine (`replay_projects`):
  what a session's `SessionStart` bundle and its Stops get when the other sessions of the
  project went through the same daemon before it, as they would have live.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tma1.replay import driver
from tma1.replay.driver import iso
from tma1.replay.formats import CLAUDE_HOOKLOG
from tma1.replay.model import HOOK, USAGE, Converted, ReplayItem

# Files of a corpus folder that are no recording (batch 3 keeps its tooling beside them).
_NOT_RECORDINGS = ("manifest.json",)
_COMMIT = re.compile(r"-[0-9a-f]{8}$")


@dataclass
class Bundle:
    """One answered SessionStart of the project replay: its text and the item keys it told."""

    ts: int
    text: str
    keys: tuple[str, ...]


@dataclass
class SessionRun:
    session_id: str
    group: str  # "transcripts" | "hook log"
    files: list[str]
    repo: str  # the repository the recording came from (the project replay's unit)
    agent: str
    items: list[ReplayItem]
    synthetic: bool
    deliveries: list[Any] = field(default_factory=list)
    emits: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    # From the project replay: this session's answers, and its SessionStart bundles.
    project_deliveries: list[Any] = field(default_factory=list)
    project_emits: list[dict[str, Any]] = field(default_factory=list)
    bundles: list[Bundle] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"hooklog:{self.session_id}" if self.group == "hook log" else self.session_id


def emit_key(session_key: str, emit: dict[str, Any]) -> str:
    return f"{session_key}|{emit['stable_key']}|{iso(int(emit['ts']))}"


def recordings(root: Path) -> list[Path]:
    """What `driver.load` should read of a corpus folder: its agent-format folders and loose
    recordings, not its README, manifest or scripts."""
    return [
        p
        for p in sorted(root.iterdir())
        if p.is_dir() or (p.suffix != ".py" and p.name not in _NOT_RECORDINGS)
    ]


def file_label(root: Path, path: str) -> str:
    """`templar-373740ff.chat.json` (batch 1–2: `<agent-format>/<file>`), or
    `cads-visualizer-5ad5ed0f/chat.json` (batch 3: `<agent-format>/<repo>-<commit>/logs/…`)."""
    rel = Path(path).resolve().relative_to(root.resolve())
    return "/".join(p for p in rel.parts[1:] if p != "logs") or rel.name


def repo_of(label: str) -> str:
    """The repository a recording came from, by its corpus name (`templar`, `cads-visualizer`)."""
    head = label.split("/", 1)[0]
    if "/" in label:
        return _COMMIT.sub("", head)
    return head.split("-", 1)[0].split(".", 1)[0]


def collect(roots: Sequence[Path]) -> tuple[list[SessionRun], list[Converted]]:
    """Every session of the folders in `roots` that exist (each folder loaded on its own, so
    a hook log's synthetic timeline does not depend on the other folders)."""
    runs: list[SessionRun] = []
    all_inputs: list[Converted] = []
    for root in roots:
        if not root.is_dir():
            continue
        inputs, problems = driver.load(recordings(root))
        for p in problems:
            print(f"evaluate: {p}", file=sys.stderr)
        all_inputs += inputs
        runs += _runs_of(root, inputs)
    runs.sort(key=lambda r: (r.group != "transcripts", r.items[0].ts, r.session_id))
    return runs, all_inputs


def _runs_of(root: Path, inputs: list[Converted]) -> list[SessionRun]:
    runs: list[SessionRun] = []
    for group, convs in (
        ("transcripts", [c for c in inputs if c.format != CLAUDE_HOOKLOG]),
        ("hook log", [c for c in inputs if c.format == CLAUDE_HOOKLOG]),
    ):
        if not convs:
            continue
        items, _ = driver.merge_items(convs)
        by_session: dict[str, list[ReplayItem]] = defaultdict(list)
        for item in items:
            by_session[item.session_id].append(item)
        files_of: dict[str, set[str]] = defaultdict(set)
        synthetic: set[str] = set()
        for conv in convs:
            for item in conv.items:
                files_of[item.session_id].add(file_label(root, conv.path))
                if conv.synthetic_time:
                    synthetic.add(item.session_id)
        for sid, its in by_session.items():
            agent = "codex" if any(i.source == "codex" for i in its) else "claude-code"
            files = sorted(files_of[sid])
            runs.append(
                SessionRun(
                    session_id=sid,
                    group=group,
                    files=files,
                    repo=repo_of(files[0]),
                    agent=agent,
                    items=its,
                    synthetic=sid in synthetic,
                )
            )
    return runs


def replay(run: SessionRun) -> None:
    deliveries, emits, summary, _ = driver.replay_items(run.items)
    run.deliveries, run.emits, run.summary = deliveries, emits, summary


def replay_projects(runs: Sequence[SessionRun]) -> None:
    """The transcript sessions of each repository through one engine, in time order: each
    run gets its answers (`project_deliveries`) and its SessionStart bundles with the item
    keys each told. Hook logs have no time and no SessionStart or Stop: left out."""
    by_repo: dict[str, list[SessionRun]] = defaultdict(list)
    for r in runs:
        if r.group == "transcripts":
            by_repo[r.repo].append(r)
    for group in by_repo.values():
        items = sorted((i for r in group for i in r.items), key=lambda i: i.ts)
        replayer = driver.Replayer(start_ts=items[0].ts)
        told: dict[tuple[str, int], tuple[str, ...]] = {}
        memory = replayer.delivery.bundles
        record = memory.record

        def recording(
            session_id: str, keys: Any, now: int, _record: Any = record, _told: Any = told
        ) -> None:
            _told[(session_id, now)] = tuple(keys)
            _record(session_id, keys, now)

        memory.record = recording  # type: ignore[method-assign]
        try:
            replayer.feed(items)
        except BaseException:
            replayer.close()
            raise
        deliveries, emits, _, _ = replayer.finish(items)
        for r in group:
            r.project_deliveries = [d for d in deliveries if d.session_id == r.session_id]
            r.project_emits = [e for e in emits if e["session_id"] == r.session_id]
            r.bundles = [
                Bundle(d.ts, bundle_text(d.body), told.get((d.session_id, d.ts), ()))
                for d in r.project_deliveries
                if d.hook_event == "SessionStart"
            ]


def emits_differ(runs: Sequence[SessionRun]) -> list[str]:
    """Emit keys one replay has and the other not (the project replay against each session
    alone), transcripts only; `session_start` rows are the bundle's, not the rules'."""
    out: set[str] = set()
    for r in runs:
        if r.group != "transcripts":
            continue
        alone = {emit_key(r.key, e) for e in r.emits}
        together = {emit_key(r.key, e) for e in r.project_emits if e["channel"] != "session_start"}
        out |= alone ^ together
    return sorted(out)


def bundle_text(body: str) -> str:
    import json

    try:
        out = json.loads(body)
    except ValueError:
        return body
    spec = out.get("hookSpecificOutput") if isinstance(out, dict) else None
    return str(spec.get("additionalContext", "")) if isinstance(spec, dict) else body


def events_of(run: SessionRun) -> list[Any]:
    from tma1.events import parse_payload

    out = []
    for it in run.items:
        if it.kind == HOOK and it.payload is not None:
            out.append(parse_payload(it.payload, ts=it.ts, source=it.source or "claude-code"))
    return out


# --- text ------------------------------------------------------------------------------------


def short(text: Any, n: int = 220) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= n else s[: n - 1] + "…"


def pct(num: int, den: int) -> str:
    return f"{num / den:.0%}" if den else "–"


def md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def describe(item: ReplayItem) -> str:
    p = item.payload or {}
    ev = item.hook_event or item.kind
    if item.kind == USAGE and item.usage:
        return f"usage occupancy={item.usage.occupancy:,} kind={item.usage.kind}"
    ti = p.get("tool_input") if isinstance(p.get("tool_input"), dict) else {}
    what = ti.get("command") or ti.get("file_path") or ""
    out = ""
    if ev == "PostToolUseFailure":
        out = " ERR: " + short(p.get("error", ""), 300)
    elif ev == "PostToolUse":
        resp = p.get("tool_response")
        if isinstance(resp, dict):
            resp = resp.get("stdout") or resp.get("stderr") or ""
        if p.get("tool_name") in ("Bash", "shell", "shell_command", "exec_command"):
            out = " OUT: " + short(resp or "", 200)
    elif ev == "UserPromptSubmit":
        what = short(p.get("prompt", ""), 160)
    elif ev == "Stop":
        what = short(p.get("last_assistant_message", ""), 300)
    return f"{ev} {p.get('tool_name') or ''} {short(what, 200)}{out}"


def print_around(run: SessionRun, ts: int, before: int, after: int) -> None:
    hooks = [i for i in run.items if i.kind in (HOOK, USAGE)]
    idx = next((n for n, i in enumerate(hooks) if i.ts > ts), len(hooks))
    print("--- before")
    for i in hooks[max(0, idx - before) : idx]:
        print(f"  {iso(i.ts)[11:19]} {describe(i)}")
    print("--- after")
    for i in hooks[idx : idx + after]:
        print(f"  {iso(i.ts)[11:19]} {describe(i)}")


def print_context(run: SessionRun, labels: dict[str, Any], before: int, after: int) -> None:
    for e in run.emits:
        k = emit_key(run.key, e)
        if k in labels:
            continue
        print("=" * 100)
        print(k)
        print(f"[{e['severity']}] {e['kind']} via {e['channel']}; files {e['related_files']}")
        print("EVIDENCE:", e["evidence"])
        print("SUGGESTION:", short(e["suggestion"], 400))
        print_around(run, int(e["ts"]), before, after)
