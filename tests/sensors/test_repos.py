"""Each session's repository, recorded once and off the hook path (tma1.sensors.repos)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from tma1.counters import Counters
from tma1.events import parse_payload
from tma1.sensors.repos import RepoRecorder
from tma1.store import Store
from tma1.store.schema import session_repos


def _event(sid: str, cwd: Path, ts: int = 1) -> object:
    return parse_payload(
        {"session_id": sid, "hook_event_name": "UserPromptSubmit", "cwd": str(cwd), "prompt": "p"},
        ts=ts,
    )


def _rows(store: Store) -> list[tuple[str, str, str, str]]:
    t = session_repos.c
    with store.connect() as conn:
        q = select(t.session_id, t.machine_id, t.repo, t.repo_path).order_by(t.session_id)
        return [tuple(r) for r in conn.execute(q).all()]  # type: ignore[misc]


def test_one_row_per_session_with_the_remote_and_the_path_inside(
    db_url: str, tmp_path: Path
) -> None:
    top = tmp_path / "app"
    (top / ".git").mkdir(parents=True)
    (top / ".git" / "config").write_text('[remote "origin"]\n\turl = git@GitHub.com:o/r.git\n')
    (top / "svc").mkdir()
    store = Store.open(db_url, machine_id="m-a")
    try:
        rec = RepoRecorder(store=store, counters=Counters())
        for ts in (1, 2, 3):
            rec.notice(_event("s1", top / "svc", ts))  # type: ignore[arg-type]
        rec.notice(_event("s2", tmp_path))  # type: ignore[arg-type]
        rec.drain()
        assert _rows(store) == [
            ("s1", "m-a", "github.com/o/r", "svc"),
            ("s2", "m-a", str(tmp_path), ""),
        ]
    finally:
        store.close()


def test_a_database_away_is_asked_again_on_the_next_event(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tma1.db'}"
    store = Store.open(url, machine_id="m-a")
    counters = Counters()
    rec = RepoRecorder(store=store, counters=counters)
    (tmp_path / "tma1.db").unlink()
    (tmp_path / "tma1.db").mkdir()  # not a database any more: the insert fails
    store.close()
    rec.notice(_event("s1", tmp_path))  # type: ignore[arg-type]
    rec.drain()  # never raises
    assert counters.get("errors.repos") == 1
    (tmp_path / "tma1.db").rmdir()
    store2 = Store.open(url, machine_id="m-a")
    rec._store = store2
    try:
        rec.notice(_event("s1", tmp_path, ts=2))  # type: ignore[arg-type]
        rec.drain()
        assert [r[0] for r in _rows(store2)] == ["s1"]
    finally:
        store2.close()
