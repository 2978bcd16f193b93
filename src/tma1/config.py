"""Settings from the environment. A bad value fails at start-up and names its variable."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Mapping
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
    # Directories (not ignored) one project may have and still be watched (docs/sensors.md).
    watch_max_dirs: int = 5_000
    # Off in tests that drive the engine without a filesystem; on for `tma1 serve`.
    watch_files: bool = True
    # The hook path's wait for the insert's commit, and the outage queue (tma1.ingest).
    hook_db_budget_ms: int = 400
    ingest_queue_max: int = 10_000
    # This machine's id on a shared database (tma1.origin.machine); None: the data dir's file.
    machine_id: str | None = None

    @property
    def effective_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'tma1.db'}"

    @property
    def effective_machine_id(self) -> str:
        """`TMA1_MACHINE_ID`, or the data dir's `machine-id` (made on first use)."""
        from tma1.origin.machine import ensure_machine_id

        return self.machine_id or ensure_machine_id(self.data_dir)

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


def _whole(lo: int, hi: int) -> Callable[[str, str], int]:
    def parse(name: str, raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigError(f"{name}={raw!r} is not a whole number") from None
        if not lo <= value <= hi:
            raise ConfigError(f"{name}={value} is out of range ({lo}..{hi})")
        return value

    return parse


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


def _machine_id(name: str, raw: str) -> str:
    from tma1.origin.machine import valid_machine_id

    value = raw.strip()
    if not valid_machine_id(value):
        raise ConfigError(
            f"{name}={raw!r} is not a machine id; use 1-64 letters, digits, '.', '_', ':' or '-'"
        )
    return value


def _log_level(name: str, raw: str) -> str:
    level = raw.strip().upper()
    if level not in LOG_LEVELS:
        raise ConfigError(f"{name}={raw!r} is not one of {', '.join(LOG_LEVELS)}")
    return level


# Each TMA1_* variable: the Settings field it sets, and its parser (which names the
# variable in its error). An unset or empty variable keeps the field's default.
ENV_SETTINGS: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "TMA1_HOST": ("host", lambda _name, raw: raw.strip()),
    "TMA1_PORT": ("port", _whole(1, 65_535)),
    "TMA1_DATA_DIR": ("data_dir", lambda _name, raw: Path(raw).expanduser()),
    "TMA1_DATABASE_URL": (
        "database_url",
        lambda name, raw: validate_database_url(name, raw.strip()),
    ),
    "TMA1_LOG_LEVEL": ("log_level", _log_level),
    "TMA1_DATA_TTL": ("data_ttl_seconds", parse_duration),
    "TMA1_DISABLE_INJECTION": ("disable_injection", _bool),
    "TMA1_CONTEXT_PRESSURE_THRESHOLD": ("context_pressure_threshold", _whole(1, 100_000_000)),
    "TMA1_MAX_WATCHED_PROJECTS": ("max_watched_projects", _whole(0, 10_000)),
    "TMA1_WATCH_MAX_DIRS": ("watch_max_dirs", _whole(1, 1_000_000)),
    "TMA1_HOOK_DB_BUDGET_MS": ("hook_db_budget_ms", _whole(10, 60_000)),
    "TMA1_INGEST_QUEUE_MAX": ("ingest_queue_max", _whole(0, 10_000_000)),
    "TMA1_MACHINE_ID": ("machine_id", _machine_id),
}


DATA_VARS = ("TMA1_DATA_DIR", "TMA1_DATABASE_URL")


def load_settings(
    env: Mapping[str, str] | None = None, *, only: Collection[str] | None = None
) -> Settings:
    """The settings the environment gives. `only`: read (and validate) just these
    variables, the rest at their defaults — a command that never listens must not fail
    on a bad TMA1_PORT it does not use."""
    env = os.environ if env is None else env
    return Settings(
        **{
            field_name: parse(var, env[var])
            for var, (field_name, parse) in ENV_SETTINGS.items()
            if env.get(var) and (only is None or var in only)
        }
    )
