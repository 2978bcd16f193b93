"""Settings from the environment: defaults, parsing, and errors that name the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from tma1.config import ConfigError, Settings, load_settings, parse_duration


def test_defaults() -> None:
    s = load_settings({})
    assert (s.host, s.port) == ("127.0.0.1", 14318)
    assert s.data_dir == Path.home() / ".tma1"
    assert s.effective_database_url == f"sqlite:///{Path.home() / '.tma1' / 'tma1.db'}"
    assert s.data_ttl_seconds == 60 * 86_400
    assert s.context_pressure_threshold is None  # half the model's window, else 100,000
    assert s.disable_injection is False


def test_every_variable_is_read(tmp_path: Path) -> None:
    s = load_settings(
        {
            "TMA1_HOST": "::1",
            "TMA1_PORT": "15000",
            "TMA1_DATA_DIR": str(tmp_path),
            "TMA1_DATABASE_URL": "postgresql://u@localhost/db",
            "TMA1_LOG_LEVEL": "debug",
            "TMA1_DATA_TTL": "12h",
            "TMA1_DISABLE_INJECTION": "1",
            "TMA1_CONTEXT_PRESSURE_THRESHOLD": "5000",
            "TMA1_MAX_WATCHED_PROJECTS": "4",
        }
    )
    assert s == Settings(
        host="::1",
        port=15000,
        data_dir=tmp_path,
        database_url="postgresql+psycopg://u@localhost/db",
        log_level="DEBUG",
        data_ttl_seconds=12 * 3600,
        disable_injection=True,
        context_pressure_threshold=5000,
        max_watched_projects=4,
    )


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ({"TMA1_PORT": "http"}, "TMA1_PORT"),
        ({"TMA1_PORT": "70000"}, "TMA1_PORT"),
        ({"TMA1_DATA_TTL": "forever"}, "TMA1_DATA_TTL"),
        ({"TMA1_DATA_TTL": "0d"}, "TMA1_DATA_TTL"),
        ({"TMA1_LOG_LEVEL": "LOUD"}, "TMA1_LOG_LEVEL"),
        ({"TMA1_DISABLE_INJECTION": "maybe"}, "TMA1_DISABLE_INJECTION"),
        ({"TMA1_DATABASE_URL": "mysql://x"}, "TMA1_DATABASE_URL"),
        ({"TMA1_CONTEXT_PRESSURE_THRESHOLD": "-5"}, "TMA1_CONTEXT_PRESSURE_THRESHOLD"),
    ],
)
def test_invalid_values_name_the_variable(env: dict[str, str], name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        load_settings(env)


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [("60d", 5_184_000), ("90m", 5400), ("45", 45), ("2w", 1_209_600), (" 3 h ", 10_800)],
)
def test_durations(raw: str, seconds: int) -> None:
    assert parse_duration("X", raw) == seconds
