"""`RuleSpec`: everything the engine needs to know about one rule, declared once.

Each rule module exports one `SPEC` (design §5): the detector reads its channels, the
suppression its one-shot and novel-evidence flags, resolution its check, the gates its
follow action. Adding a rule is one module in `engine/rules/` plus one test file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tma1.engine.anomaly import Anomaly
from tma1.engine.window import RuleConfig, SessionWindow

Rule = Callable[[SessionWindow, int, RuleConfig], list[Anomaly]]
ResolutionCheck = Callable[[Anomaly, SessionWindow, int], "int | None"]


@dataclass(frozen=True, slots=True)
class RuleSpec:
    kind: str
    run: Rule
    channels: frozenset[str]  # every channel its findings can be delivered on
    severity: str  # how the rule picks a severity, for humans (docs, `tma1 gates`)
    resolution: ResolutionCheck  # the latest resolving event after a time, or None
    follow_action: str  # design §2.13, as the gates report it
    one_shot: bool = False  # delivered once per session (per context epoch, §2.17)
    # Delivered again inside the 10-minute window when its evidence is newer than the
    # last delivery (external changes: new changes are news, design §2.7).
    novel_evidence: bool = False
