"""Settings from the environment. A bad value fails at start-up and names its variable."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 14318
DEFAULT_TTL_SECONDS = 60 * 86_400
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class ConfigError(ValueError):
    """A setting has a value tma1 cannot use. The message names the variable."""


@dataclass(frozen=True)
class Settings:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    data_dir: Path = field(default_factory=lambda: Path.home() / ".tma1")
    database_url: str | None = None
    log_level: str = "INFO"
    data_ttl_seconds: int = DEFAULT_TTL_SECONDS
    disable_injection: bool = False
    # None: half the model's context window when known, else the default (design §2.12).
    context_pressure_threshold: int | None = None
    max_watched_projects: int = 32
    # Off in tests that drive the engine without a filesystem; on for `tma1 serve`.
    watch_files: bool = True
    # The hook path's wait for the insert's commit, and the outage queue (tma1.ingest).
    hook_db_budget_ms: int = 400
    ingest_queue_max: int = 10_000

    @property
    def effective_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'tma1.db'}"

    @property
    def token_path(self) -> Path:
        return self.data_dir / "hook-token"

    def with_overrides(self, **changes: Any) -> Settings:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw]?)\s*$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def parse_duration(name: str, raw: str) -> int:
    """`60d`, `12h`, `90m`, `3600` (seconds) → seconds."""
    m = _DURATION.match(raw.lower())
    if not m or int(m.group(1)) <= 0:
        raise ConfigError(
            f"{name}={raw!r} is not a duration; use a positive number with an optional unit "
            "s, m, h, d or w (for example 60d)"
        )
    return int(m.group(1)) * _UNIT_SECONDS[m.group(2)]


def _int(name: str, raw: str, lo: int, hi: int) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a whole number") from None
    if not lo <= value <= hi:
        raise ConfigError(f"{name}={value} is out of range ({lo}..{hi})")
    return value


def _bool(name: str, raw: str) -> bool:
    v = raw.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("", "0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name}={raw!r} is not a boolean; use 1 or 0")


def validate_database_url(name: str, url: str) -> str:
    if not (url.startswith("sqlite") or url.startswith("postgresql")):
        raise ConfigError(
            f"{name}={url!r} is not supported; use sqlite:///PATH or postgresql+psycopg://…"
        )
    if url.startswith("postgresql") and not url.startswith("postgresql+psycopg"):
        # The plain scheme would make SQLAlchemy look for psycopg2, which we do not ship.
        url = "postgresql+psycopg" + url[len("postgresql") :]
    return url


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    kw: dict[str, Any] = {}
    if raw := env.get("TMA1_HOST"):
        kw["host"] = raw.strip()
    if raw := env.get("TMA1_PORT"):
        kw["port"] = _int("TMA1_PORT", raw, 1, 65_535)
    if raw := env.get("TMA1_DATA_DIR"):
        kw["data_dir"] = Path(raw).expanduser()
    if raw := env.get("TMA1_DATABASE_URL"):
        kw["database_url"] = validate_database_url("TMA1_DATABASE_URL", raw.strip())
    if raw := env.get("TMA1_LOG_LEVEL"):
        level = raw.strip().upper()
        if level not in LOG_LEVELS:
            raise ConfigError(f"TMA1_LOG_LEVEL={raw!r} is not one of {', '.join(LOG_LEVELS)}")
        kw["log_level"] = level
    if raw := env.get("TMA1_DATA_TTL"):
        kw["data_ttl_seconds"] = parse_duration("TMA1_DATA_TTL", raw)
    if (raw := env.get("TMA1_DISABLE_INJECTION")) is not None:
        kw["disable_injection"] = _bool("TMA1_DISABLE_INJECTION", raw)
    if raw := env.get("TMA1_CONTEXT_PRESSURE_THRESHOLD"):
        kw["context_pressure_threshold"] = _int(
            "TMA1_CONTEXT_PRESSURE_THRESHOLD", raw, 1, 100_000_000
        )
    if raw := env.get("TMA1_MAX_WATCHED_PROJECTS"):
        kw["max_watched_projects"] = _int("TMA1_MAX_WATCHED_PROJECTS", raw, 0, 10_000)
    if raw := env.get("TMA1_HOOK_DB_BUDGET_MS"):
        kw["hook_db_budget_ms"] = _int("TMA1_HOOK_DB_BUDGET_MS", raw, 10, 60_000)
    if raw := env.get("TMA1_INGEST_QUEUE_MAX"):
        kw["ingest_queue_max"] = _int("TMA1_INGEST_QUEUE_MAX", raw, 0, 10_000_000)
    return Settings(**kw)
