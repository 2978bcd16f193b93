"""The six rules of the seed, one module each, as pure functions of (window, now, config).

Each module exports one `SPEC` (`tma1.engine.spec.RuleSpec`): its kind, run function,
channels, severity, resolution check, one-shot flag and follow action. `SPECS` holds them
in the seed's order and `RULES` maps each kind to its run function; the detector,
suppression, resolution, delivery and gates all read these. A rule returns the findings
it sees now; suppression, resolution and delivery live elsewhere.
"""

from __future__ import annotations

from tma1.engine.anomaly import Kind
from tma1.engine.rules import (
    build_broken_after_my_edit,
    context_pressure,
    external_modified_during_session,
    repeated_failed_build,
    stale_file_view,
    test_stuck,
)
from tma1.engine.rules.stale_file_view import detect_stale_edit
from tma1.engine.spec import Rule, RuleSpec
from tma1.paths import norm_path

SPECS: dict[str, RuleSpec] = {
    m.SPEC.kind: m.SPEC
    for m in (
        stale_file_view,
        build_broken_after_my_edit,
        repeated_failed_build,
        test_stuck,
        external_modified_during_session,
        context_pressure,
    )
}
assert list(SPECS) == [k.value for k in Kind], "one spec per kind, in the seed's order"

RULES: dict[str, Rule] = {kind: spec.run for kind, spec in SPECS.items()}

__all__ = ["RULES", "SPECS", "Rule", "RuleSpec", "detect_stale_edit", "norm_path"]
