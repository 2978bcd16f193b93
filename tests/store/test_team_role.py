"""The README's roles for a team database (issue 30): a daemon's role with only the
privileges listed there stores, reads, labels and purges once the schema's owner has
migrated the database."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from conftest import PG_URL, _drop_pg_database, _fresh_pg_database
from sqlalchemy import create_engine, text

from tma1.events import FileChange, Usage, parse_payload
from tma1.store import Store, retention
from tma1.store.emits import set_label

pytestmark = pytest.mark.skipif(not PG_URL, reason="no PostgreSQL test cluster")

GRANTS = (
    "GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA public TO {role}",
    "GRANT UPDATE ON tma1_external_changes, tma1_anomaly_labels TO {role}",
    "GRANT DELETE ON ALL TABLES IN SCHEMA public TO {role}",
    "GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role}",
)


@pytest.fixture
def daemon_url() -> Iterator[str]:
    assert PG_URL
    url = _fresh_pg_database(PG_URL)
    Store.open(url).close()  # the owner migrates
    role = f"tma1_daemon_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    owner = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f"CREATE ROLE {role} LOGIN"))
        with owner.connect() as conn:
            for grant in GRANTS:
                conn.execute(text(grant.format(role=role)))
        owner.dispose()
        # The same server and database, as the daemon's role (the test cluster trusts
        # local connections).
        base, db = url.rsplit("/", 1)
        scheme, rest = base.split("://", 1)
        host = rest.split("@", 1)[-1]
        yield f"{scheme}://{role}@{host}/{db}"
    finally:
        owner.dispose()
        _drop_pg_database(PG_URL, url)
        with admin.connect() as conn:
            conn.execute(text(f"DROP ROLE IF EXISTS {role}"))
        admin.dispose()


def test_the_daemon_role_stores_reads_labels_and_purges(daemon_url: str) -> None:
    store = Store.open(daemon_url, machine_id="m-a")  # at head: nothing to migrate
    try:
        ev = parse_payload(
            {"session_id": "s", "hook_event_name": "UserPromptSubmit", "cwd": "/w", "prompt": "p"},
            ts=10,
        )
        store.insert_events([ev], with_ids=True)
        [cid] = store.insert_changes([FileChange(11, "/w", "/w/a.py", "added")])
        assert store.set_change_writer([cid], "s") == 1
        store.insert_usages([Usage(12, "s", occupancy=3)])
        assert store.record_session_repo("s", repo="/w", repo_path="", host="h", ts=10)
        store.insert_emits(
            [
                {
                    "ts": 13,
                    "session_id": "s",
                    "kind": "test_stuck",
                    "severity": "warning",
                    "channel": "post_tool_use",
                    "evidence": "e",
                    "suggestion": "s",
                    "related_files": [],
                    "first_emitted_at": 13,
                    "stable_key": "k",
                }
            ]
        )
        [emit] = store.emits_since(0)
        assert set_label(store, int(emit["id"]), "tp", now_ms=14) is not None
        assert set_label(store, int(emit["id"]), "clear", now_ms=15) is not None
        assert [e.session_id for e in store.window_events("s", 0)] == ["s"]
        assert retention.purge_before(store, 1_000)["tma1_hook_events"] == 1
    finally:
        store.close()
