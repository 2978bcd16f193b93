"""`context_pressure` — the session's prompt has grown past its threshold.

Occupancy is the prompt size of the newest main-chain request (design §2.12); the
threshold is `TMA1_CONTEXT_PRESSURE_THRESHOLD` when set, else half the model's context
window when known, else 100,000 (`tma1.engine.context`). The finding is one-shot per
*context epoch* (design §2.17): its subject names the epoch (empty before the first
compaction), and suppression keeps one-shot per stable key, so after a compaction the
context may fill again and the warning is news. A request older than the newest
compaction measured the context that compaction replaced: it says nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from tma1.engine.anomaly import Anomaly, Channel, Kind, Severity
from tma1.engine.context import context_threshold, context_window
from tma1.engine.following import Call, EmitRef, Follow, is_compaction_or_end, is_git_commit
from tma1.engine.resolution import never
from tma1.engine.spec import RuleSpec, Severities
from tma1.engine.window import RuleConfig, SessionWindow
from tma1.events import SHELL_TOOLS


def epoch_subject(epoch_start_ts: int | None) -> str:
    """The finding's subject for the context epoch that began at `epoch_start_ts`: empty
    before the first compaction (the key emit logs of older versions hold), else
    `compacted 2026-03-12T22:42:18.897Z` (UTC, to the millisecond)."""
    if epoch_start_ts is None:
        return ""
    when = datetime.fromtimestamp(epoch_start_ts / 1000, tz=UTC)
    return f"compacted {when:%Y-%m-%dT%H:%M:%S}.{epoch_start_ts % 1000:03d}Z"


def context_pressure(window: SessionWindow, now: int, config: RuleConfig) -> list[Anomaly]:
    usage = window.usage
    if usage is None or usage.ts > now or usage.kind != "usage":
        return []
    occupancy = usage.occupancy
    threshold = context_threshold(usage, config.context_pressure_threshold)
    if occupancy < threshold:
        return []
    epoch = window.epoch_start_ts
    if epoch is not None and usage.ts < epoch:
        return []
    size = context_window(usage)
    if config.context_pressure_threshold is None and size:
        share = f" ({occupancy * 100 // size} % of the {size:,}-token context window"
        share += f" of {usage.model})" if usage.model else ")"
    else:
        share = f" (model {usage.model})" if usage.model else ""
    evidence = (
        f"The last request of this session sent {occupancy:,} prompt tokens, at or above "
        f"the {threshold:,}-token threshold{share}"
        + (" — the context has filled up again since it was compacted." if epoch else ".")
    )
    suggestion = (
        "Finish the current step, write down what is done and what is left, then compact "
        "the conversation (/compact) or start a fresh session with that summary."
    )
    return [
        Anomaly(
            kind=Kind.CONTEXT_PRESSURE.value,
            severity=SPEC.severity.of(),
            channel=Channel.USER_PROMPT_SUBMIT.value,
            evidence=evidence,
            suggestion=suggestion,
            related_files=(),
            subject=epoch_subject(epoch),
            last_evidence_ts=usage.ts,
            session_id=window.session_id,
        )
    ]


def _compacted_ended_or_committed(
    emit: EmitRef, span: Sequence[Call], tool_calls: Sequence[Call], acted: bool
) -> bool:
    return any(is_compaction_or_end(c) or is_git_commit(c) for c in span)


SPEC = RuleSpec(
    kind=Kind.CONTEXT_PRESSURE.value,
    run=context_pressure,
    channels=frozenset({Channel.USER_PROMPT_SUBMIT.value}),
    severity=Severities(Severity.MEDIUM),
    resolution=never,
    follow=Follow(
        action="a compaction, a session end or a git commit",
        check=_compacted_ended_or_committed,
        tools=SHELL_TOOLS,
        related_files=False,
        markers=True,
    ),
    one_shot=True,
    # A compaction is the answer to it: a bundle (at a compaction) never re-tells it.
    retold=False,
    fires_when=(
        "the last request's prompt reached half the model's context window "
        "(`TMA1_CONTEXT_PRESSURE_THRESHOLD` when set; 100,000 when the window is unknown); "
        "once per context: a compaction re-arms it"
    ),
)
