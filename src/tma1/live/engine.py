"""The live engine: `Delivery` over the live ports (tma1.engine.ports) — windows read back
from the store, the bundle's reads answered by it, emits written to it, mutes read from
the data dir. A replay builds the same `Delivery` over its in-memory ports instead
(`tma1.replay.driver`)."""

from __future__ import annotations

from collections.abc import Mapping

from tma1.clock import Clock
from tma1.config import Settings
from tma1.counters import Counters
from tma1.engine.delivery import Delivery
from tma1.engine.ports import MuteSource
from tma1.engine.spec import Rule
from tma1.engine.window import RuleConfig
from tma1.live.emitlog import EmitLog
from tma1.live.mutes import MUTES_FILE, Mutes
from tma1.live.windows import StoreWindows
from tma1.store import Store


def stored_delivery(
    store: Store,
    *,
    clock: Clock,
    settings: Settings,
    counters: Counters,
    rules: Mapping[str, Rule] | None = None,
    mutes: MuteSource | None = None,
) -> Delivery:
    """The engine over `store`; muted kinds from `mutes.json` in the data dir unless
    `mutes` is given."""
    config = RuleConfig(context_pressure_threshold=settings.context_pressure_threshold)
    return Delivery(
        windows=StoreWindows(store, config=config, counters=counters),
        reads=store,
        emits=EmitLog(store=store, counters=counters),
        clock=clock,
        settings=settings,
        counters=counters,
        rules=rules,
        mutes=mutes if mutes is not None else Mutes(settings.data_dir / MUTES_FILE),
    )
