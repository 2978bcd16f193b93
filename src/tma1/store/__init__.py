"""Storage: SQLAlchemy Core tables, the engine factory and every query tma1 runs."""

from tma1.store.db import Store, make_engine, run_migrations

__all__ = ["Store", "make_engine", "run_migrations"]
