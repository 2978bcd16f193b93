"""The six rules of the seed, one module each, as pure functions of (window, now, config).

`RULES` maps each `Kind` value to its rule, in the seed's order. A rule returns the
findings it sees now; suppression, resolution and delivery live elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable

from tma1.engine.anomaly import Anomaly, Kind
from tma1.engine.rules._support import norm_path
from tma1.engine.rules.build_broken_after_my_edit import build_broken_after_my_edit
from tma1.engine.rules.context_pressure import context_pressure
from tma1.engine.rules.external_modified_during_session import external_modified_during_session
from tma1.engine.rules.repeated_failed_build import repeated_failed_build
from tma1.engine.rules.stale_file_view import detect_stale_edit, stale_file_view
from tma1.engine.rules.test_stuck import test_stuck
from tma1.engine.window import RuleConfig, SessionWindow

Rule = Callable[[SessionWindow, int, RuleConfig], list[Anomaly]]

RULES: dict[str, Rule] = {
    Kind.STALE_FILE_VIEW.value: stale_file_view,
    Kind.BUILD_BROKEN_AFTER_MY_EDIT.value: build_broken_after_my_edit,
    Kind.REPEATED_FAILED_BUILD.value: repeated_failed_build,
    Kind.TEST_STUCK.value: test_stuck,
    Kind.EXTERNAL_MODIFIED_DURING_SESSION.value: external_modified_during_session,
    Kind.CONTEXT_PRESSURE.value: context_pressure,
}

__all__ = ["RULES", "Rule", "detect_stale_edit", "norm_path"]
