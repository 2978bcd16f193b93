"""`?scope=`: this machine's rows (the default) or every machine's on a shared database
(issue 30). Only the read APIs a person looks at take it; what an agent hears (hooks, the
preview, the agent routes) is always this machine's."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Query

from tma1.store import Store

ScopeParam = Annotated[
    Literal["machine", "team"],
    Query(description="machine: this machine's rows (default); team: every machine's"),
]


def scoped(store: Store, scope: str) -> Store:
    return store.team() if scope == "team" else store
