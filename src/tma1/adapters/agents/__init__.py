"""The agents tma1 wires, one module each: every module of this package not named `_…`
exports one `SPEC` (`tma1.adapters.spec.AgentSpec`), found by `_discover` as the rules
are (`tma1.engine.rules`). Install's `--adapter` choices, the hook script's query, the
server's `?source=` and `?envelope=`, doctor, the transcript sensor and replay all read
them from here; adding an agent is adding its module (docs/hooks.md, "Adding an agent").
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import replace
from typing import Any

from tma1.adapters.spec import AgentSpec, Envelope


def _discover() -> list[AgentSpec]:
    """The `SPEC` of every module of this package but the `_private` ones, in `order`."""
    specs: list[AgentSpec] = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        spec = getattr(importlib.import_module(f"{__name__}.{info.name}"), "SPEC", None)
        if not isinstance(spec, AgentSpec):
            raise TypeError(f"tma1.adapters.agents.{info.name} exports no SPEC (an AgentSpec)")
        specs.append(spec)
    return sorted(specs, key=lambda s: (s.order, s.name))


SPECS: dict[str, AgentSpec] = {s.name: s for s in _discover()}
NAMES: tuple[str, ...] = tuple(SPECS)
# `?source=` → the agent it names; no parameter ("") is the agent whose script sends none.
SOURCES: dict[str, str] = {alias: s.name for s in SPECS.values() for alias in (*s.sources, s.name)}
# The agent whose hook script names no envelope: its envelope answers `?envelope=` absent.
DEFAULT: AgentSpec = SPECS[SOURCES[""]]
# `?envelope=` → its form; the default agent's own is the absent parameter, not its name.
ENVELOPES: dict[str, Envelope] = {
    **{s.name: s.envelope for s in SPECS.values() if s is not DEFAULT},
    **{name: env for s in SPECS.values() for name, env in s.envelopes.items()},
}


def normalize(payload: Any, agent: str | None) -> Any:
    """`payload` in tma1's (Claude Code's) shape, by `agent`'s dialect (non-dicts, and an
    agent tma1 does not know, as they are)."""
    spec = SPECS.get(agent or "")
    if not isinstance(payload, dict) or spec is None:
        return payload
    return spec.normalize(payload)


def envelope_for(name: str | None, agent: str | None) -> Envelope:
    """The form of an answer to `agent`'s hook posted with `?envelope=name`."""
    if name is None:
        env = DEFAULT.envelope
    else:
        # An envelope tma1 does not know: the default form, with no plain-text extras.
        env = ENVELOPES.get(name) or replace(DEFAULT.envelope, compact=False)
    spec = SPECS.get(agent or "")
    if env.compact and spec is not None and not spec.compact_in_plain_form:
        env = replace(env, compact=False)
    return env


def markdown_table() -> str:
    """The table of agents in docs/hooks.md (tests/adapters/test_agents.py checks it)."""
    from pathlib import Path

    from tma1.config import Settings

    settings = Settings(data_dir=Path("~/.tma1"))
    rows = [
        "| `--adapter` | agent | found by | hooks file | events registered | script's query "
        "| replay reads |",
        "|---|---|---|---|---|---|---|",
    ]
    for spec in SPECS.values():
        adapter = spec.adapter(settings, {"HOME": "~"})
        hooks = adapter.hooks
        events = ", ".join(hooks.events)
        formats = ", ".join(f"`{f.name}`" for f in spec.replay) or "—"
        query = f"`{spec.query}`" if spec.query else "(none)"
        rows.append(
            f"| `{spec.name}` | {spec.title} | `{spec.executable}` on PATH or "
            f"`{hooks.path.parent}` | `{hooks.path}` | {events} | {query} | {formats} |"
        )
    return "\n".join(rows) + "\n"
