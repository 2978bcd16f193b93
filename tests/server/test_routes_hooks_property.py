"""Hypothesis throws arbitrary JSON and bytes at a live server's hook endpoint."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import PG_URL, LiveServer, _fresh_pg_database, start_live_server
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tma1.clock import ManualClock
from tma1.config import Settings

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)

FIELDS = [
    "session_id",
    "hook_event_name",
    "tool_name",
    "tool_input",
    "tool_response",
    "cwd",
    "error",
    "transcript_path",
    "duration_ms",
    "stop_hook_active",
    "tool_use_id",
]
EVENTS = [
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "UserPromptSubmit",
    "Stop",
    "SessionStart",
    "SessionEnd",
    "PreCompact",
]

# Payloads that look like hook events but with arbitrary values in every known field.
hookish = st.fixed_dictionaries(
    {
        "session_id": st.one_of(st.text(max_size=40), json_values),
        "hook_event_name": st.one_of(st.sampled_from(EVENTS), json_values),
    },
    optional={f: json_values for f in FIELDS[2:]},
)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    tmp: Path = tmp_path_factory.mktemp("prop")
    if request.param == "sqlite":
        url = f"sqlite:///{tmp / 'tma1.db'}"
    elif PG_URL:
        url = _fresh_pg_database(PG_URL)
    else:
        pytest.skip("no PostgreSQL test cluster (TMA1_TEST_POSTGRES_URL unset)")
    srv = start_live_server(
        Settings(data_dir=tmp / "data", database_url=url, watch_files=False), clock=ManualClock()
    )
    yield srv
    srv.stop()


def _post(server: LiveServer, body: bytes) -> None:
    r = server.hook(body)
    assert r.status_code == 200, r.text
    if r.content:
        assert r.headers["content-type"].split(";")[0] in ("text/plain", "application/json")


def _counters_add_up(server: LiveServer) -> None:
    h = server.client().get("/api/health").json()
    assert h["errors"].get("internal", 0) == 0
    assert h["requests"] == h["events_stored"] + sum(
        v for k, v in h["rejected"].items() if k != "bad_token"
    )
    assert h["rows"]["tma1_hook_events"] == h["events_stored"]


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(payload=st.one_of(json_values, hookish))
def test_arbitrary_json_never_breaks_the_hook(server: LiveServer, payload: object) -> None:
    _post(server, json.dumps(payload).encode())
    _counters_add_up(server)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(body=st.binary(max_size=2048))
def test_arbitrary_bytes_never_break_the_hook(server: LiveServer, body: bytes) -> None:
    _post(server, body)
    _counters_add_up(server)
