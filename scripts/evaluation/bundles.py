"""The session bundle items the project replay produces (design §2.19), each judged.

Each item of each `SessionStart` answer (`tma1.engine.bundle`) of the project replay
(`corpus.replay_projects`: the sessions of one repository through one engine, in time
order) is one row: a failing check (with who broke it), another active session, files
changed outside, one of this session's unresolved findings. The judgements are in
scripts/evaluation_bundle_items.json, keyed `session|kind|what` (the check's identity,
the peer's session id, the finding's stable key) so that a code change which keeps the
item keeps its judgement: true or false, why, and for a false item its pattern.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from evaluation.corpus import Bundle, SessionRun, md, print_around, short
from tma1.replay.driver import iso

PATTERNS = ("not a check", "no verdict", "stale", "wrong blame", "not active", "other")


@dataclass
class Item:
    run: SessionRun
    bundle: Bundle
    kind: str  # check | peer | changes | finding
    what: str  # the check's identity, the peer's session, the finding's stable key
    line: str

    @property
    def key(self) -> str:
        return f"{self.run.key}|{self.kind}|{self.what}"


def items_of(run: SessionRun) -> list[Item]:
    out: list[Item] = []
    for b in run.bundles:
        lines = b.text.splitlines()
        check_lines = [x for x in lines if x.startswith("- `")]
        finding_lines = [x for x in lines if x[:1].isdigit()]
        peer_line = next((x for x in lines if x.startswith("Other sessions active")), "")
        change_line = next((x for x in lines if x.startswith("Changed by")), "")
        keys = list(b.keys)
        checks = [k for k in keys if k.startswith("check|")]
        findings = [k for k in keys if k.startswith("finding|")]
        if not keys:  # the key capture failed: one item per line, keyed by its text
            checks = [f"check|{x[:80]}|" for x in check_lines]
        for k, line in zip(checks, check_lines, strict=False):
            out.append(Item(run, b, "check", k.split("|", 1)[1].rsplit("|", 1)[0], line))
        for k, line in zip(findings, finding_lines, strict=False):
            out.append(Item(run, b, "finding", k.split("|", 1)[1], line))
        for k in keys:
            if k.startswith("peer|"):
                sid = k.split("|", 1)[1]
                out.append(Item(run, b, "peer", sid, _peer_text(peer_line, sid)))
            elif k.startswith("changes|"):
                out.append(Item(run, b, "changes", "", change_line))
    return out


def _peer_text(line: str, sid: str) -> str:
    at = line.find(sid[:8])
    if at < 0:
        return line
    end = line.find(")", at)
    return line[at : end + 1]


_BLAME = re.compile(r"broken by (this session|session (\w{8}))")


def claimed_blame(it: Item) -> str | None:
    """The session the item's text says broke the check (8 characters), None when it names
    none (`failing since T`)."""
    m = _BLAME.search(it.line)
    if not m:
        return None
    return it.run.session_id[:8] if m.group(2) is None else m.group(2)


def truth(it: Item, j: dict[str, Any] | None) -> tuple[bool | None, str]:
    """(true?, pattern) of an item under its judgement. A check's judgement records the facts
    — was it failing with a verdict then (`failing`), which session broke it (`broke`, "" when
    it was failing before the recordings) — so a change of wording is judged again by itself:
    a check item is true when it was failing and the blame it states, if any, is right."""
    if j is None:
        return None, ""
    if it.kind == "check" and "failing" in j:
        if not j["failing"]:
            return False, str(j.get("pattern", "stale"))
        said = claimed_blame(it)
        if said is not None and said != j.get("broke", ""):
            return False, "wrong blame"
        return True, ""
    return bool(j.get("true")), "" if j.get("true") else str(j.get("pattern", ""))


def _why(it: Item, j: dict[str, Any] | None) -> str:
    if j is None:
        return ""
    why = str(j.get("reason", ""))
    if it.kind == "check" and j.get("failing") and claimed_blame(it) is not None:
        broke = j.get("broke") or "before the recordings"
        why += f" (broken: {broke})"
    return md(why)


def print_context(run: SessionRun, judged: dict[str, Any]) -> None:
    for it in items_of(run):
        if it.key in judged:
            continue
        print("=" * 100)
        print(it.key, "at", iso(it.bundle.ts))
        print("ITEM:", it.line)
        print_around(run, it.bundle.ts, 0, 6)


def render(
    runs: list[SessionRun], judged: dict[str, Any], notes: dict[str, str] | None = None
) -> tuple[str, str]:
    """The section, and its headline for the top of the document."""
    out: list[str] = []
    w = out.append
    found = [it for r in runs for it in items_of(r)]
    starts = sum(
        1
        for r in runs
        for i in r.items
        if i.hook_event == "SessionStart" and r.group == "transcripts"
    )
    told = sum(len(r.bundles) for r in runs)
    w("## Session bundle items")
    w("")
    w(
        "The session bundle (design §2.19) is what tma1 answers a `SessionStart`. Each "
        "session replayed alone never sees another, so here the transcript sessions of one "
        "repository are replayed together, in time order, into one engine "
        "(`evaluation.corpus.replay_projects`): each `SessionStart` gets the bundle it would "
        "have got live with the earlier sessions of the project in the daemon (the same "
        "text as `GET /api/agent/sessions/{id}/bundle`). Limits of the recordings: every "
        "recorded start is a `startup` (no resume, `/clear` or compact start is recorded), "
        "so the part *still unresolved in this session* never appears; there are no "
        "file-change events, so *changed outside* never appears; a project is the start's "
        "working directory (no `.git` exists on the replay machine), so sessions started in "
        "different sub-directories of one repository are different projects; hook logs "
        "(no time, no `SessionStart`) are left out."
    )
    w("")
    tally: Counter[str] = Counter()
    kinds: dict[str, list[int]] = {}
    for it in found:
        ok, _ = truth(it, judged.get(it.key))
        tally["unjudged" if ok is None else ("true" if ok else "false")] += 1
        if ok is not None:
            kinds.setdefault(it.kind, [0, 0])[0] += ok
            kinds[it.kind][1] += 1
    judged_n = tally["true"] + tally["false"]
    w(
        f"{starts} recorded starts, {told} answered with a bundle, {len(found)} items: "
        f"**{tally['true']} of {judged_n} judged items true**"
        + (f", {tally['unjudged']} unjudged" if tally["unjudged"] else "")
        + ". An item is true when it was so at that moment and worth telling: a check "
        "listed as failing had a failing newest run with a verdict about the code and no "
        "later passing run, and the session named as having broken it did; a session "
        "listed as active was working on the project then. Per kind: "
        + ", ".join(f"{k} {n}/{d}" for k, (n, d) in sorted(kinds.items()))
        + "."
    )
    w("")
    w("| session | start (UTC) | kind | item | judgement | why | pattern |")
    w("|---|---|---|---|---|---|---|")
    for it in found:
        j = judged.get(it.key)
        ok, pattern = truth(it, j)
        verdict = "unjudged" if ok is None else ("true" if ok else "**false**")
        w(
            f"| `{it.run.key[:8]}` | {iso(it.bundle.ts)[:19]} | {it.kind} | "
            f"{md(short(it.line, 160))} | {verdict} | {_why(it, j)} | {md(pattern)} |"
        )
    w("")
    false = Counter(p for i in found for ok, p in [truth(i, judged.get(i.key))] if ok is False)
    if false:
        w("False items by pattern:")
        w("")
        for p, n in false.most_common():
            w(f"- **{p}** ({n}): {md((notes or {}).get(p, ''))}".rstrip(": "))
        w("")
    stale = sorted(set(judged) - {i.key for i in found})
    if stale:
        w("Judged items the replay no longer produces: " + ", ".join(f"`{md(k)}`" for k in stale))
        w("")
    headline = (
        f"Session bundle items (project replay): **{tally['true']} of {judged_n} true**"
        + (f", {tally['unjudged']} unjudged" if tally["unjudged"] else "")
        + (
            " (false: " + ", ".join(f"{p} {n}" for p, n in false.most_common()) + ")"
            if false
            else ""
        )
        + "."
    )
    return "\n".join(out) + "\n", headline
