"""Shared fixtures: real databases (SQLite file, and PostgreSQL when the run started one),
a real uvicorn server on a loopback port, and the tma1 CLI as a subprocess."""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import ssl
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn
from sqlalchemy import create_engine, text

from tma1.auth.hooktoken import ensure_token, hook_headers
from tma1.clock import ManualClock
from tma1.config import Settings
from tma1.live.service import Service, build_service
from tma1.server.app import create_app
from tma1.store import Store

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
SESSIONS = SHARED / "data" / "sessions"

# `.ci/run` (via scripts/test) exports this when it started a throw-away PostgreSQL
# cluster; without it the PostgreSQL leg of the store fixture is skipped.
PG_URL = os.environ.get("TMA1_TEST_POSTGRES_URL")

# The tests speak plain HTTP to loopback, yet every httpx client loads the CA bundle into a
# new SSL context (~35 ms, more than most requests take); handing it this one, never used,
# spares that on every call while each call still opens its own connection.
LOOPBACK_TLS = ssl.create_default_context()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _fresh_pg_database(base_url: str, *, template: str | None = None) -> str:
    """A new database on the test cluster, so tests never see each other's rows: empty, or
    a copy of `template`. Named t_<pid>_<suffix>, the names the stale sweep knows."""
    from sqlalchemy import create_engine, text

    name = f"t_{os.getpid()}_{time.monotonic_ns()}"
    copy = f' TEMPLATE "{template}"' if template else ""
    admin = create_engine(base_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"{copy}'))
    admin.dispose()
    return base_url.rsplit("/", 1)[0] + "/" + name


def _drop_pg_database(base_url: str, url: str) -> None:
    """Drop a test database; FORCE ends the connections a test left open (PostgreSQL ≥ 13)."""
    from sqlalchemy import create_engine, text

    name = url.rsplit("/", 1)[1]
    admin = create_engine(base_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


def _sweep_stale_pg_databases(base_url: str) -> None:
    """Drop the test databases of pytest runs that died before their teardown.

    Only databases whose creating process is gone: other runs share the cluster."""
    from sqlalchemy import create_engine, text

    admin = create_engine(base_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            names = conn.execute(
                text("SELECT datname FROM pg_database WHERE datname LIKE 't\\_%'")
            ).scalars()
            for name in list(names):
                parts = name.split("_")
                if len(parts) == 3 and parts[1].isdigit() and Path(f"/proc/{parts[1]}").exists():
                    continue
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@pytest.fixture(scope="session", autouse=True)
def _pg_cluster_hygiene() -> None:
    if PG_URL:
        try:
            _sweep_stale_pg_databases(PG_URL)
        except Exception as exc:  # a sweep must never fail the run; the tests will say more
            print(f"conftest: could not sweep stale test databases: {exc}", file=sys.stderr)


@pytest.fixture(scope="session")
def _pg_migrated_template() -> Iterator[str]:
    """One database per pytest process, migrated to head once: each test's database is a
    copy of it (CREATE DATABASE … TEMPLATE, a file copy) instead of an empty one that
    every test then migrates again. Nothing may stay connected to it, or the copy fails."""
    assert PG_URL
    url = _fresh_pg_database(PG_URL)
    try:
        Store.open(url).close()
        yield url.rsplit("/", 1)[1]
    finally:
        _drop_pg_database(PG_URL, url)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Each store-touching test runs on a real SQLite file and on a real PostgreSQL
    (a fresh database per test, dropped afterwards). The PostgreSQL one is already at the
    schema's head (opening a store there migrates nothing), unless the test is marked
    `empty_database` — the tests of migrating itself."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'tma1.db'}"
        return
    if not PG_URL:
        if os.environ.get("TMA1_REQUIRE_POSTGRES") == "1":  # CI: the leg must run
            pytest.fail("TMA1_REQUIRE_POSTGRES=1 but TMA1_TEST_POSTGRES_URL is unset")
        pytest.skip("no PostgreSQL test cluster (TMA1_TEST_POSTGRES_URL unset)")
    template = None
    if request.node.get_closest_marker("empty_database") is None:
        template = request.getfixturevalue("_pg_migrated_template")
    url = _fresh_pg_database(PG_URL, template=template)
    yield url
    _drop_pg_database(PG_URL, url)


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    st = Store.open(db_url)
    yield st
    st.close()


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    st = Store.open(f"sqlite:///{tmp_path / 'tma1.db'}")
    yield st
    st.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@dataclass
class LiveServer:
    url: str
    port: int
    token: str
    service: Service
    settings: Settings
    server: uvicorn.Server
    thread: threading.Thread

    @property
    def store(self) -> Store:
        return self.service.store

    def client(self, *, token: str | None = None, **kw: object) -> httpx.Client:
        """A client of the read API: it sends the token (another `token`, or "" for none,
        to test the refusals)."""
        kw.setdefault("verify", LOOPBACK_TLS)
        given = self.token if token is None else token
        headers = {"X-TMA1-Token": given} if given else {}
        headers.update(kw.pop("headers", None) or {})  # type: ignore[call-overload]
        return httpx.Client(base_url=self.url, timeout=10, headers=headers, **kw)  # type: ignore[arg-type]

    def hook(
        self, payload: object, *, params: dict[str, str] | None = None, token: str | None = None
    ) -> httpx.Response:
        import json

        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        # As the hook script posts: a fresh nonce and its keyed hash, never the token.
        return httpx.post(
            f"{self.url}/api/hooks",
            content=body,
            params=params,
            headers={
                **hook_headers(self.token if token is None else token),
                "Content-Type": "application/json",
            },
            timeout=10,
            verify=LOOPBACK_TLS,
        )

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)


def start_live_server(
    settings: Settings, *, clock: object | None = None, service: Service | None = None
) -> LiveServer:
    """A real uvicorn server in a thread, on a free loopback port, with a real store."""
    port = free_port()
    settings = settings.with_overrides(port=port)
    if settings.hook_db_budget_ms == Settings().hook_db_budget_ms:
        # See the `settings` fixture: only tests that set a budget on purpose get one.
        settings = settings.with_overrides(hook_db_budget_ms=30_000)
    token = ensure_token(settings.token_path)
    service = service or build_service(settings, clock=clock)  # type: ignore[arg-type]
    app = create_app(service, hook_token=token)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="on"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("test server did not start")
        time.sleep(0.01)
    return LiveServer(
        url=f"http://127.0.0.1:{port}",
        port=port,
        token=token,
        service=service,
        settings=settings,
        server=server,
        thread=thread,
    )


@pytest.fixture
def settings(tmp_path: Path, db_url: str) -> Settings:
    # A generous insert budget: behaviour tests must not turn into outage tests when a
    # loaded CI machine stalls a commit past the production 400 ms (tests/reliability/
    # exercises the budget on purpose).
    return Settings(
        data_dir=tmp_path / "data", database_url=db_url, watch_files=False, hook_db_budget_ms=30_000
    )


@pytest.fixture
def live(settings: Settings, clock: ManualClock) -> Iterator[LiveServer]:
    """A live server with an injected ManualClock (advance it to move time)."""
    srv = start_live_server(settings, clock=clock)
    yield srv
    srv.stop()


def tma1_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "tma1.cli", *args]


def require_sessions() -> Path:
    if not SESSIONS.is_dir():
        pytest.skip("../shared/data/sessions is absent")
    return SESSIONS


@contextlib.contextmanager
def writers_blocked(db_url: str) -> Iterator[None]:
    """Hold the table's write lock from another connection until the block exits."""
    if db_url.startswith("sqlite"):
        conn = sqlite3.connect(db_url.split("///", 1)[1], timeout=10, isolation_level=None)
        conn.execute("BEGIN EXCLUSIVE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return
    engine = create_engine(db_url)
    with engine.connect() as conn:
        conn.execute(text("LOCK TABLE tma1_hook_events IN EXCLUSIVE MODE"))
        try:
            yield
        finally:
            conn.rollback()
    engine.dispose()
