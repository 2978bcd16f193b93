"""`tma1.engine.anomaly`: the order findings are said in, and one finding per subject."""

from __future__ import annotations

from tma1.engine.anomaly import Anomaly, Kind, delivery_order, one_per_subject


def finding(kind: Kind, severity: str, subject: str, ts: int = 0) -> Anomaly:
    return Anomaly(
        kind.value, severity, "stop_block", "e", "s", subject=subject, last_evidence_ts=ts
    )


def test_one_answer_names_a_check_once() -> None:
    broken = finding(Kind.BUILD_BROKEN_AFTER_MY_EDIT, "high", "npm run build", ts=2)
    repeated = finding(Kind.REPEATED_FAILED_BUILD, "high", "npm run build", ts=1)
    other = finding(Kind.REPEATED_FAILED_BUILD, "high", "pytest", ts=3)
    pressure = finding(Kind.CONTEXT_PRESSURE, "medium", "")
    ordered = delivery_order([broken, repeated, other, pressure])
    # At one severity the fact (failed N times) over the inference (your edit broke it);
    # other subjects and subject-less findings are untouched, in delivery order.
    assert one_per_subject(ordered) == [other, repeated, pressure]
    # A higher severity wins whatever the kind.
    medium = finding(Kind.REPEATED_FAILED_BUILD, "medium", "npm run build", ts=5)
    assert one_per_subject(delivery_order([medium, broken])) == [broken]
