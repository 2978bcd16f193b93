"""The six rules of the seed, one module each, as pure functions of (window, now, config).

Each module exports one `SPEC` (`tma1.engine.spec.RuleSpec`): its kind, run function,
channels, severity, resolution check, one-shot flag and follow action. Every module here
not named `_…` is a rule, found by `_discover`. `SPECS` holds them in the seed's order
(any further rule after those) and `RULES` maps each kind to its run function; the detector,
suppression, resolution, delivery and gates all read these. A rule returns the findings
it sees now; suppression, resolution and delivery live elsewhere.
"""

from __future__ import annotations

import importlib
import pkgutil

from tma1.engine.anomaly import Kind
from tma1.engine.spec import Rule, RuleSpec


def _discover() -> list[RuleSpec]:
    """The `SPEC` of every module of this package but the `_private` ones: adding a rule is
    adding its module (docs/rules.md)."""
    specs: list[RuleSpec] = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        spec = getattr(importlib.import_module(f"{__name__}.{info.name}"), "SPEC", None)
        if not isinstance(spec, RuleSpec):
            raise TypeError(f"tma1.engine.rules.{info.name} exports no SPEC (a RuleSpec)")
        specs.append(spec)
    return specs


_SEED_ORDER = [k.value for k in Kind]


def _order(spec: RuleSpec) -> tuple[int, str]:
    """The seed's six in the seed's order, then any other rule by kind."""
    seed = _SEED_ORDER.index(spec.kind) if spec.kind in _SEED_ORDER else len(_SEED_ORDER)
    return seed, spec.kind


SPECS: dict[str, RuleSpec] = {s.kind: s for s in sorted(_discover(), key=_order)}
assert set(_SEED_ORDER) <= set(SPECS), "every kind of the seed has its rule"

RULES: dict[str, Rule] = {kind: spec.run for kind, spec in SPECS.items()}
