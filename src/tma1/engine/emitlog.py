"""The emit log (design §2.3): every delivered finding becomes a `tma1_anomaly_emits` row.

What a row holds (`emit_row`) and what the log reports (`emit_health`) are the engine's;
where rows go is a port (`tma1.engine.ports.EmitSink`): live `tma1.live.emitlog.EmitLog`
writes them to the store, a replay keeps them in memory (`tma1.replay.memory.MemoryEmits`).
"""

from __future__ import annotations

from typing import Any

from tma1.counters import Counters
from tma1.engine.anomaly import Anomaly


def emit_row(finding: Anomaly, *, ts: int) -> dict[str, Any]:
    return {
        "ts": ts,
        "session_id": finding.session_id,
        "kind": str(finding.kind),
        "severity": str(finding.severity),
        "channel": str(finding.channel),
        "evidence": finding.evidence,
        "suggestion": finding.suggestion,
        "related_files": list(finding.related_files),
        "first_emitted_at": finding.first_emitted_at or ts,
        "stable_key": finding.stable_key,
    }


def emit_health(counters: Counters, *, queue: int, maxsize: int) -> dict[str, object]:
    return {
        "emit_queue": queue,
        "emit_queue_max": maxsize,
        "emits_queued": counters.get("engine.emits_queued"),
        "emits_written": counters.get("engine.emits_written"),
        "emits_dropped": counters.get("engine.emits_dropped"),
        "emit_write_errors": counters.get("engine.emit_write_errors"),
    }
