"""`context_pressure` — the session's prompt has grown past the configured threshold.

Occupancy is the prompt size of the newest main-chain request (design §2.12). One-shot
per session is suppression's job; the rule only says whether the line is crossed.
"""

from __future__ import annotations

from tma1.engine.anomaly import Anomaly, Channel, Kind, Severity
from tma1.engine.resolution import never
from tma1.engine.spec import RuleSpec
from tma1.engine.window import RuleConfig, SessionWindow


def context_pressure(window: SessionWindow, now: int, config: RuleConfig) -> list[Anomaly]:
    usage = window.usage
    if usage is None or usage.ts > now:
        return []
    occupancy = usage.occupancy
    threshold = config.context_pressure_threshold
    if occupancy < threshold:
        return []
    evidence = (
        f"The last request of this session sent {occupancy:,} prompt tokens, at or above "
        f"the {threshold:,}-token threshold" + (f" (model {usage.model})." if usage.model else ".")
    )
    suggestion = (
        "Finish the current step, write down what is done and what is left, then compact "
        "the conversation (/compact) or start a fresh session with that summary."
    )
    return [
        Anomaly(
            kind=Kind.CONTEXT_PRESSURE.value,
            severity=Severity.MEDIUM.value,
            channel=Channel.USER_PROMPT_SUBMIT.value,
            evidence=evidence,
            suggestion=suggestion,
            related_files=(),
            subject="",
            last_evidence_ts=usage.ts,
            session_id=window.session_id,
        )
    ]


SPEC = RuleSpec(
    kind=Kind.CONTEXT_PRESSURE.value,
    run=context_pressure,
    channels=frozenset({Channel.USER_PROMPT_SUBMIT.value}),
    severity="medium",
    resolution=never,
    follow_action="a compaction, a session end or a git commit",
    one_shot=True,
)
