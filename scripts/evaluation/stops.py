"""The Stops whose newest check failed (design §2.22), and whether tma1 blocked them rightly.

A candidate is a main-agent Stop at which the session's most recent *check-like* shell run
(`CHECKLIKE`: a build, test, lint, type-check or compile command by its words — broader
than `tma1.checks`, on purpose: a run tma1 does not count as a check is a candidate too)
had failed (exit ≠ 0 or a masked failure). What tma1 did is its answer to that Stop in the
project replay (`corpus.replay_projects`). What it should have done is a judgement of the
session — scripts/evaluation_stops.json, keyed `session|stop time` — made by reading it:
**block** a fresh break or an unverified fix that the final message does not hand back;
**silent** when the final message says it failed, when the failure is no verdict about
the code (environment crash, sandbox refusal, usage error), or pre-existing.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from evaluation.corpus import SessionRun, events_of, md, print_around, short
from tma1.replay.driver import iso

# A check-like command, at the start of one command of a shell line (after `_segments`).
CHECKLIKE = re.compile(
    r"""(?x)^(?:
      cargo\s+(?:\+\S+\s+)?(?:build|test|check|clippy|nextest|fmt\s+(?:--all\s+)?--\s*--check)
    | go\s+(?:build|test|vet|generate)|golangci-lint|staticcheck
    | tsc|eslint|biome|ultracite|prettier\s+(?:--check|-c)
    | ruff|mypy|pyright|pytest|tox|nox|flake8|pylint|black\s+--check
    | python[\d.]*\s+-m\s+(?:pytest|unittest|mypy|ruff)
    | jest|vitest|playwright|mocha
    | (?:npm|pnpm|yarn|bun)\s+(?:[^|;&]*?\s)?(?:run\s+)?
      [\w:-]*(?:test|build|lint|check|compile|verify)[\w:-]*
    | make(?:\s+[\w-]+)?|gradle\w*|mvn\w*|dotnet\s+(?:build|test)
    | (?:\S*[/\\])?(?:test|build|check|lint|verify|compile|ci)[\w-]*\.(?:sh|py|js|mjs|ts)
    | nx\s+(?:run-many\s+(?:--\S+\s+)*)?(?:test|build|lint|typecheck)
    | encore\s+build|next\s+build|vite\s+build|tauri\s+build
    )(?=$|[\s;&|)"'])"""
)
# What may come before the tool in one command: assignments and wrappers.
_PREFIX = re.compile(
    r"""(?x)^(?:
      \w+=\S*\s+
    | (?:sudo|time|exec|npx|bunx|env)\s+
    | (?:pnpm|yarn|npm)\s+exec\s+
    | (?:uv|poetry|pipenv)\s+run\s+
    | bundle\s+exec\s+
    | (?:bash|sh|zsh|node)\s+
    | pwsh\s+(?:-\w+\s+)*['"]?
    | \.[/\\]
    )+"""
)
_SPLIT = re.compile(r"&&|\|\||[;|\n]")


def _segments(command: str) -> list[str]:
    """The commands of a shell line, each without its leading assignments and wrappers; a
    heredoc's body is not a command."""
    line = command.split("<<", 1)[0]
    return [_PREFIX.sub("", part.strip(" (\t'\"")) for part in _SPLIT.split(line)]


# Why a Stop should block, or stay silent (the judgement's `why`), and the pattern a wrong
# answer then shows.
SHOULD_BLOCK = {"fresh break": "missed fresh break", "unverified fix": "missed unverified fix"}
SHOULD_BE_SILENT = {
    "handed back": "hand-back ignored",
    "no verdict": "no verdict",
    "not a check": "not a check",
    "pre-existing": "pre-existing",
    "stale": "stale",
    "already blocked": "repeat block",
}


def pattern(did: str, judgement: dict[str, Any]) -> str:
    """The pattern of a wrong answer: what tma1 missed or mistook."""
    why = str(judgement.get("why", ""))
    table = SHOULD_BLOCK if did == "silent" else SHOULD_BE_SILENT
    return table.get(why, why)


@dataclass
class Stop:
    run: SessionRun
    ts: int
    check: Any  # the newest check-like run (a HookEvent)
    message: str  # the Stop's final message
    blocked: bool

    @property
    def key(self) -> str:
        return f"{self.run.key}|{iso(self.ts)}"


def _is_checklike(ev: Any) -> bool:
    if not (ev.is_shell and ev.tool_command):
        return False
    return any(CHECKLIKE.match(seg) for seg in _segments(ev.tool_command))


# Failed calls that are no failure in truth: a fixer that fixed all it found, every test
# passing under a coverage threshold.
_PASSES = frozenset({"fixed", "coverage"})


def _failed(ev: Any) -> bool:
    """The run failed (exit ≠ 0 or a masked failure), whatever tma1 makes of it: a failure
    tma1 calls no verdict (an invocation error, an interruption) is still a candidate."""
    return bool(ev.is_failure or (ev.failure_kind and ev.failure_kind not in _PASSES))


def candidates(run: SessionRun) -> list[Stop]:
    if run.group != "transcripts":
        return []
    answers = {
        d.ts: d.body for d in run.project_deliveries if d.hook_event == "Stop"
    }  # the project replay's answers to this session's Stops
    out: list[Stop] = []
    newest = None
    for ev in events_of(run):
        if ev.hook_event_name in ("PostToolUse", "PostToolUseFailure") and _is_checklike(ev):
            newest = ev
        if ev.hook_event_name != "Stop" or ev.agent_id or newest is None:
            continue
        if not _failed(newest):
            continue
        body = answers.get(ev.ts, "")
        out.append(
            Stop(
                run=run,
                ts=ev.ts,
                check=newest,
                message=str(ev.metadata.get("last_assistant_message") or ""),
                # Any answer to a Stop is a block (`{"decision":"block"}` or, in Claude Code's
                # JSON envelope, the nudge `tma1.engine.digest` builds): silence is "".
                blocked=bool(body),
            )
        )
    return out


def _why(j: dict[str, Any]) -> str:
    return f"{md(j['why'])}: {md(j.get('reason', ''))}" if j.get("why") else md(j.get("reason", ""))


def print_context(run: SessionRun, judged: dict[str, Any], before: int) -> None:
    for s in candidates(run):
        if s.key in judged:
            continue
        print("=" * 100)
        print(s.key, "BLOCKED" if s.blocked else "silent")
        print("NEWEST CHECK-LIKE RUN:", iso(s.check.ts)[11:19], short(s.check.tool_command, 200))
        print("  ->", short(s.check.tool_result or s.check.tool_error_summary or "", 600))
        print("FINAL MESSAGE:", short(s.message, 900))
        print_around(run, s.ts, before, 3)


def render(
    runs: list[SessionRun], judged: dict[str, Any], notes: dict[str, str] | None = None
) -> tuple[str, str]:
    """The section, and its headline for the top of the document."""
    out: list[str] = []
    w = out.append
    found = [s for r in runs for s in candidates(r)]
    w("## Stops whose newest check failed")
    w("")
    w(
        "Every main-agent Stop at which the session's most recent check-like shell run (a "
        "build, test, lint, type-check or compile command by its words, "
        "`evaluation.stops.CHECKLIKE` — broader than what tma1 calls a check) had failed, "
        "from the project replay. **tma1** is what it answered; **should** is the judgement "
        "of the session in `scripts/evaluation_stops.json` (keyed session|Stop time, made "
        "by reading the session, not the code): block a fresh break or an unverified fix "
        "that the final message does not hand back (design §2.22); stay silent when the "
        "final message says it failed, when the failure is no verdict about the code "
        "(environment crash, sandbox refusal, usage error), when the command is no check, "
        "or when the failure was there before the session's edits. A Stop whose newest "
        "check-like run passed while another check stayed open (an unverified fix of an "
        "older failure) is not in this table: its block is an emit above, its silence a "
        "miss (*Stop with an open check naming an edited file*)."
    )
    w("")
    tally: Counter[str] = Counter()
    rows = []
    for s in found:
        j = judged.get(s.key, {})
        should = j.get("should", "unjudged")
        did = "block" if s.blocked else "silent"
        verdict = "unjudged" if should == "unjudged" else ("right" if should == did else "wrong")
        tally[f"{did}/{should}"] += 1
        rows.append((s, did, should, verdict, j))
    right_block, right_silent = tally["block/block"], tally["silent/silent"]
    judged_n = sum(n for k, n in tally.items() if not k.endswith("unjudged"))
    w(
        f"**{right_block + right_silent} of {judged_n} judged Stops right** "
        f"({len(found)} found, {len(found) - judged_n} unjudged): blocked when it should "
        f"{right_block} of {tally['block/block'] + tally['silent/block']}, silent when it "
        f"should {right_silent} of {tally['silent/silent'] + tally['block/silent']}; errors: "
        f"blocked when it should have stayed silent {tally['block/silent']}, silent when "
        f"it should have blocked {tally['silent/block']}."
    )
    w("")
    wrong = Counter(pattern(did, j) for _, did, _, v, j in rows if v == "wrong")
    if wrong:
        w("Wrong answers by pattern:")
        w("")
        for p, n in wrong.most_common():
            w(f"- **{p}** ({n}): {md((notes or {}).get(p, ''))}".rstrip(": "))
        w("")
    w("| session | Stop (UTC) | newest check-like run | tma1 | should | | why | pattern |")
    w("|---|---|---|---|---|---|---|---|")
    for s, did, should, verdict, j in rows:
        w(
            f"| `{s.run.key[:8]}` | {iso(s.ts)[:19]} | "
            f"{iso(s.check.ts)[11:19]} `{md(short(s.check.tool_command, 70))}` | {did} | "
            f"{should} | {verdict} | {_why(j)} | "
            f"{pattern(did, j) if verdict == 'wrong' else ''} |"
        )
    w("")
    stale = sorted(set(judged) - {s.key for s in found})
    if stale:
        w("Judged Stops that are no longer candidates: " + ", ".join(f"`{k}`" for k in stale))
        w("")
    headline = (
        f"Stops whose newest check failed: **{right_block + right_silent} of {judged_n} "
        f"right** — blocked rightly {right_block} of "
        f"{tally['block/block'] + tally['silent/block']} that should block, silent rightly "
        f"{right_silent} of {tally['silent/silent'] + tally['block/silent']} that should stay "
        f"silent; {tally['block/silent']} wrong blocks, {tally['silent/block']} missed blocks"
        + (f" ({', '.join(f'{p} {n}' for p, n in wrong.items())})" if wrong else "")
        + (f"; {len(found) - judged_n} unjudged" if len(found) > judged_n else "")
        + "."
    )
    return "\n".join(out) + "\n", headline
