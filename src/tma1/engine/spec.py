"""`RuleSpec`: everything the engine, the gates and the dashboard know about one rule,
declared once.

Each rule module exports one `SPEC` (design §5; docs/rules.md): the detector reads its
channels, the rule its severities, suppression its one-shot and novel-evidence flags and
its family, resolution its check, the session bundle whether it is re-told, the gates its
follow action and that action's inputs. Nothing outside the rule's module names its kind:
adding a rule is one module in `engine/rules/` plus one test file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tma1.engine.anomaly import Anomaly, Severity
from tma1.engine.following import READ_OR_EDIT_OF_RELATED, Follow
from tma1.engine.window import RuleConfig, SessionWindow

Rule = Callable[[SessionWindow, int, RuleConfig], list[Anomaly]]
ResolutionCheck = Callable[[Anomaly, SessionWindow, int], "int | None"]


@dataclass(frozen=True, slots=True)
class Severities:
    """How a rule picks a finding's severity: `base`, or `escalated` when `when` (in
    words) holds. The rule emits `of(...)`, so what it says here is what it emits."""

    base: Severity
    escalated: Severity | None = None
    when: str = ""  # when it escalates, for humans (docs, the kinds route)

    def of(self, escalate: bool = False) -> str:
        """The severity of one finding (`escalate`: the rule's escalation holds)."""
        if not escalate:
            return self.base.value
        if self.escalated is None:
            raise ValueError(f"a rule of severity {self.base.value} has no escalation")
        return self.escalated.value

    @property
    def levels(self) -> tuple[str, ...]:
        """Every severity its findings can have."""
        return (self.base.value,) + ((self.escalated.value,) if self.escalated else ())

    def __str__(self) -> str:
        if self.escalated is None:
            return self.base.value
        return f"{self.base.value}; {self.escalated.value} {self.when}"


@dataclass(frozen=True, slots=True)
class RuleSpec:
    kind: str
    run: Rule
    channels: frozenset[str]  # every channel its findings can be delivered on
    severity: Severities  # what its findings' severity is (the rule emits `severity.of`)
    resolution: ResolutionCheck  # the latest resolving event after a time, or None
    # What counts as the agent following a finding (design §2.13), and what the follow-rate
    # gate must gather to judge it (`tma1.engine.following`).
    follow: Follow = READ_OR_EDIT_OF_RELATED
    one_shot: bool = False  # delivered once per session (per context epoch, §2.17)
    # Delivered again inside the 10-minute window when its evidence is newer than the
    # last delivery (external changes: new changes are news, design §2.7).
    novel_evidence: bool = False
    # Kinds of one family report the same thing about one subject: suppression treats a
    # sibling's key like its own (`tma1.engine.suppression`). None: a family of one.
    family: str | None = None
    # The session bundle re-tells a standing finding at a new session or after a
    # compaction (design §2.19) — unless a compaction is the answer to it.
    retold: bool = True
    # Its related files are the project's changes by others: a bundle that re-tells it
    # leaves those files out of its "changed since" part.
    tells_changes: bool = False
    # When it fires, in one line for humans: the README's kinds table
    # (`scripts/kinds_table.py`) and the dashboard.
    fires_when: str = ""

    @property
    def follow_action(self) -> str:
        """The follow action in words (design §2.13), as the gates report it."""
        return self.follow.action

    def describe(self) -> dict[str, Any]:
        """The spec as data, for the dashboard (`GET /api/anomalies/kinds`) and the docs'
        kinds table (`scripts/kinds_table.py`)."""
        return {
            "kind": self.kind,
            "severity": str(self.severity),
            "severities": list(self.severity.levels),
            "channels": sorted(self.channels),
            "follow_action": self.follow.action,
            "one_shot": self.one_shot,
            "novel_evidence": self.novel_evidence,
            "family": self.family,
            "retold": self.retold,
            "fires_when": self.fires_when,
        }
