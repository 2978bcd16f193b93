"""`Anomaly`, its kinds, severities, channels and stable key (seed; design §2.2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

# What a human or an agent can say of an emit, and who said it (tma1_anomaly_labels).
LABELS: tuple[str, ...] = ("tp", "fp")
LABEL_SOURCES: tuple[str, ...] = ("human", "agent")


class Kind(StrEnum):
    STALE_FILE_VIEW = "stale_file_view"
    BUILD_BROKEN_AFTER_MY_EDIT = "build_broken_after_my_edit"
    REPEATED_FAILED_BUILD = "repeated_failed_build"
    TEST_STUCK = "test_stuck"
    EXTERNAL_MODIFIED_DURING_SESSION = "external_modified_during_session"
    CONTEXT_PRESSURE = "context_pressure"


class Severity(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Channel(StrEnum):
    USER_PROMPT_SUBMIT = "user_prompt_submit"
    STOP_BLOCK = "stop_block"
    POST_TOOL_USE = "post_tool_use"
    # Findings re-told in the session bundle at SessionStart (design §2.19).
    SESSION_START = "session_start"


SEVERITY_RANK: dict[str, int] = {Severity.HIGH: 0, Severity.MEDIUM: 1, Severity.LOW: 2}


@dataclass(frozen=True, slots=True)
class Anomaly:
    kind: str
    severity: str
    channel: str
    evidence: str
    suggestion: str
    related_files: tuple[str, ...] = ()
    subject: str = ""
    # Newest event (epoch ms) that supports the finding: a resolved finding re-emits only
    # when this is newer than the resolving event (design §2.4).
    last_evidence_ts: int = 0
    # Filled by suppression when the finding is delivered; 0 in raw rule output.
    first_emitted_at: int = 0
    session_id: str = ""
    extra: dict[str, object] = field(default_factory=dict, compare=False, hash=False)

    @property
    def stable_key(self) -> str:
        return stable_key(self.kind, self.severity, self.subject)


def stable_key(kind: str, severity: str, subject: str) -> str:
    return f"{kind}|{severity}|{subject}"


def delivery_order(anomalies: list[Anomaly]) -> list[Anomaly]:
    """High before medium, newest evidence first (design §2.7)."""
    return sorted(
        anomalies,
        key=lambda a: (SEVERITY_RANK.get(Severity(a.severity), 9), -a.last_evidence_ts, a.kind),
    )




# Of two findings of one severity about one check, the first of these is said: that the
# check failed N times and still says E is a fact of its runs; that the agent's edit made
# it fail is an inference (the one the corpus found wrong: pre-existing errors, the wrong
# file). Either way its error line is quoted once.
_SAID_FIRST = (Kind.REPEATED_FAILED_BUILD.value, Kind.BUILD_BROKEN_AFTER_MY_EDIT.value)


def one_per_subject(ordered: list[Anomaly]) -> list[Anomaly]:
    """`ordered` (in delivery order) with one finding per subject: one answer names a check
    once (a Stop block carrying `build_broken_after_my_edit` and `repeated_failed_build` for
    the same `npm run build` and the same error says it twice). Of one subject's findings
    the higher severity is kept, then the one `_SAID_FIRST`. Findings without a subject
    (the session-wide kinds) are all kept."""

    def rank(a: Anomaly) -> tuple[int, int]:
        first = _SAID_FIRST.index(a.kind) if a.kind in _SAID_FIRST else len(_SAID_FIRST)
        return SEVERITY_RANK.get(Severity(a.severity), 9), first

    best: dict[str, Anomaly] = {}
    for a in ordered:
        if a.subject and (a.subject not in best or rank(a) < rank(best[a.subject])):
            best[a.subject] = a
    return [a for a in ordered if not a.subject or best[a.subject] is a]
