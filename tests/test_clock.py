"""clock.epoch_ms: the one reading of a recorded time (sessions, transcripts, the API)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tma1.clock import epoch_ms

NOON = 1_769_860_800_000  # 2026-01-31T12:00:00Z


@pytest.mark.parametrize(
    "value",
    [
        "2026-01-31T12:00:00Z",
        "2026-01-31T12:00:00z",
        "2026-01-31T12:00:00+00:00",
        "2026-01-31T14:00:00+02:00",
        " 2026-01-31T12:00:00.000Z ",
        NOON,
        NOON // 1000,
        NOON / 1000,
        str(NOON),
        str(NOON // 1000),
    ],
)
def test_the_spellings_of_one_instant(value: object) -> None:
    assert epoch_ms(value) == NOON


def test_a_time_without_a_zone_is_utc() -> None:
    assert epoch_ms("2026-01-31T12:00:00") == NOON
    assert epoch_ms("2026-01-31 12:00:00") == NOON


@pytest.mark.parametrize(
    "value",
    [None, True, False, "", "  ", "yesterday", "2026-13-01T00:00:00Z", -1, "-5",
     float("nan"), float("inf"), "1969-12-31T23:59:59Z", [NOON], {"ts": NOON}, "9" * 5000],
)
def test_what_is_not_a_time(value: object) -> None:
    assert epoch_ms(value) is None


@given(st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9999, 1, 1)),
       st.integers(min_value=-14 * 60, max_value=14 * 60))
def test_iso_round_trip(naive: datetime, offset_min: int) -> None:
    zone = timezone(timedelta(minutes=offset_min))
    aware = naive.replace(tzinfo=zone)
    expected = int(aware.timestamp() * 1000)
    assert epoch_ms(aware.isoformat()) == expected
    as_utc = aware.astimezone(UTC)
    assert epoch_ms(as_utc.replace(tzinfo=None).isoformat()) == expected
    assert epoch_ms(as_utc.isoformat().replace("+00:00", "Z")) == expected


@given(st.one_of(st.text(), st.integers(), st.floats(), st.none(), st.booleans(), st.binary()))
def test_never_raises_and_never_negative(value: object) -> None:
    ms = epoch_ms(value)
    assert ms is None or (isinstance(ms, int) and ms >= 0)
