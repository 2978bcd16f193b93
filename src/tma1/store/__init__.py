"""Storage, the only room with SQL: SQLAlchemy Core tables (schema), the engine factory
and migrations (connection), the `Store` facade (db), and the queries by concern:
events, emits (the emit log and labels), sessions, gate_queries (the follow-rate)."""

from tma1.store.connection import make_engine, run_migrations
from tma1.store.db import Store

__all__ = ["Store", "make_engine", "run_migrations"]
