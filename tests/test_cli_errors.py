"""Every user-facing error is one line that names the problem and the fix, with the right
exit code and no traceback (issue 17). Each runs `tma1` as a real subprocess."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import free_port, tma1_cmd
from gateseed import emit_row
from trustkit import clean_env, run

from tma1.clock import SystemClock
from tma1.events import parse_payload
from tma1.store import Store


def _errors(res: subprocess.CompletedProcess[str]) -> list[str]:
    assert "Traceback" not in res.stderr, res.stderr
    assert "Exception ignored" not in res.stderr, res.stderr
    return [ln for ln in res.stderr.splitlines() if ln.strip()]


def _one_line(res: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    lines = _errors(res)
    assert res.returncode == code, (res.returncode, res.stdout, res.stderr)
    assert len(lines) == 1, res.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def _seed(data: Path, n: int = 3, evidence: str | None = None) -> Path:
    store = Store.open(f"sqlite:///{data / 'tma1.db'}")
    now = SystemClock().now_ms()
    store.insert_emits(
        [
            emit_row(ts=now + i, session_id=f"s{i}", kind="test_stuck", evidence=evidence)
            for i in range(n)
        ]
    )
    store.close()
    return data / "tma1.db"


# --- a closed pipe (`… | head`) --------------------------------------------------------


def _closed_pipe(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run with stdout a pipe whose reader is already gone: every write fails (EPIPE)."""
    r, w = os.pipe()
    os.close(r)
    try:
        proc = subprocess.run(
            tma1_cmd(*args), env=env, stdout=w, stderr=subprocess.PIPE, text=True, timeout=60
        )
    finally:
        os.close(w)
    return subprocess.CompletedProcess(proc.args, proc.returncode, "", proc.stderr)


@pytest.mark.parametrize(
    "args",
    [("anomalies", "--json"), ("gates", "--json"), ("uninstall", "--dry-run")],
    ids=["anomalies", "gates", "uninstall"],
)
def test_closed_pipe_ends_quietly(tmp_path: Path, args: tuple[str, ...]) -> None:
    data = tmp_path / "data"
    data.mkdir()
    _seed(data, n=50)
    (tmp_path / ".claude").mkdir()
    env = clean_env(tmp_path, data)
    res = _closed_pipe(env, *args)
    assert _errors(res) == []
    assert res.returncode == 141  # 128 + SIGPIPE, as `git log | head`


def test_real_head_pipeline_has_no_traceback(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    _seed(data, n=400)
    env = clean_env(tmp_path, data)
    cmd = " ".join(tma1_cmd("anomalies", "--json", "--limit", "400")) + " | head -1"
    res = subprocess.run(["sh", "-c", cmd], env=env, capture_output=True, text=True, timeout=60)
    assert res.stdout == "{\n"
    assert _errors(res) == []


# --- the server's address ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "words"),
    [
        ("example.com", ["TMA1_HOST='example.com'", "127.0.0.1"]),
        ("192.0.2.1", ["TMA1_HOST='192.0.2.1'", "not a loopback address", "127.0.0.1"]),
        ("0.0.0.0", ["TMA1_HOST='0.0.0.0'", "every network interface", "127.0.0.1"]),
        ("::", ["TMA1_HOST='::'", "every network interface"]),
    ],
)
def test_non_loopback_host_is_refused(tmp_path: Path, host: str, words: list[str]) -> None:
    env = clean_env(tmp_path, tmp_path / "data", TMA1_HOST=host, TMA1_PORT=str(free_port()))
    res = run(env, "serve", "--no-watch")
    _one_line(res, 2, *words)
    assert "serving on" not in res.stderr + res.stdout


def test_port_taken_is_one_line_and_never_says_serving(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = clean_env(tmp_path, tmp_path / "data", TMA1_PORT=str(port))
        res = run(env, "serve", "--no-watch")
    assert "serving on" not in res.stderr
    line = _one_line(res, 1, f"127.0.0.1:{port}", "in use", "TMA1_PORT")
    assert line.startswith("tma1:")


# --- read commands never create a database ---------------------------------------------


@pytest.mark.parametrize(
    "args",
    [("anomalies",), ("gates",), ("export", "--session", "x"), ("label", "1", "tp")],
    ids=["anomalies", "gates", "export", "label"],
)
def test_mistyped_data_dir_is_an_error_and_creates_nothing(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    typo = tmp_path / "dtaa"
    env = clean_env(tmp_path, tmp_path / "data")
    res = run(env, *args, "--data-dir", str(typo))
    _one_line(res, 2, f"no tma1 database at {typo / 'tma1.db'}", "--data-dir")
    assert not typo.exists()
    url = f"sqlite:///{tmp_path / 'tpyo.db'}"
    res = run(env, *args, "--database-url", url)
    _one_line(res, 2, "no tma1 database at", "--database-url")
    assert list(tmp_path.glob("tpyo*")) == []


def test_a_file_that_is_not_a_tma1_database(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    import sqlite3

    sqlite3.connect(other).execute("CREATE TABLE x (y)").connection.commit()
    res = run(
        clean_env(tmp_path, tmp_path / "d"), "anomalies", "--database-url", f"sqlite:///{other}"
    )
    _one_line(res, 2, "is not a tma1 database")


@contextlib.contextmanager
def _read_only_copy(tmp_path: Path, db: Path) -> Iterator[Path]:
    ro = tmp_path / "ro"
    ro.mkdir()
    if os.geteuid() != 0:
        shutil.copy(db, ro / "tma1.db")
        os.chmod(ro / "tma1.db", 0o444)
        os.chmod(ro, 0o555)
        try:
            yield ro
        finally:
            os.chmod(ro, 0o755)
        return
    if subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(ro)], check=False).returncode:
        pytest.skip("root without mount: cannot make a read-only copy")
    try:
        shutil.copy(db, ro / "tma1.db")
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        yield ro
    finally:
        subprocess.run(["umount", str(ro)], check=False)


def test_read_only_copy_can_be_inspected(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    db = _seed(data, n=2)
    with _read_only_copy(tmp_path, db) as ro:
        env = clean_env(tmp_path, ro)
        res = run(env, "anomalies")
        assert res.returncode == 0, res.stderr
        assert "test_stuck" in res.stdout
        assert run(env, "gates").returncode == 0
        assert sorted(p.name for p in ro.iterdir()) == ["tma1.db"]


# --- replay -----------------------------------------------------------------------------


def test_replay_of_a_missing_path_is_the_error_alone(tmp_path: Path) -> None:
    res = run(clean_env(tmp_path, tmp_path / "d"), "replay", "/nonexistent")
    _one_line(res, 1, "/nonexistent", "no such file or directory")
    assert res.stdout == ""


def test_replay_of_an_empty_directory_says_so(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    res = run(clean_env(tmp_path, tmp_path / "d"), "replay", str(empty))
    _one_line(res, 1, f"nothing to replay in {empty}")
    assert res.stdout == ""


def test_replay_notes_are_explained_in_plain_words() -> None:
    from tma1.commands.replay import render_text

    note = SimpleNamespace(kind="validation_rejected", ts=0, session_id="s", detail="d")
    result = SimpleNamespace(
        events_fed=1,
        items_fed=1,
        elapsed_s=1.0,
        inputs=[],
        duplicates_dropped=1,
        notes=[note, note],
        all_problems=[],
        deliveries=[],
        summary={},
    )
    text = render_text(result)
    assert "1 items were in more than one input" in text and "replayed once" in text
    assert "validation_rejected ×2: tool calls the agent's tool layer refused" in text
    assert "seen in an earlier input dropped" not in text


def test_columns_are_cut_at_a_word(tmp_path: Path) -> None:
    from tma1.commands.anomalies import one_line as cut

    assert cut("alpha beta gamma delta", 14) == "alpha beta…"
    assert cut("a-very-long-identifier-without-spaces", 10) == "a-very-lo…"
    data = tmp_path / "data"
    data.mkdir()
    words = "the build broke after your edit of calculator " * 4
    _seed(data, n=1, evidence=words)
    res = run(clean_env(tmp_path, data), "anomalies")
    row = res.stdout.splitlines()[2]
    evidence = row.split("  ")[-1]
    assert evidence.endswith("…")
    assert evidence[:-1].split(" ")[-1] in words.split(), evidence


# --- label ------------------------------------------------------------------------------


def test_label_clear_says_what_it_cleared_and_what_remains(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    _seed(data, n=1)
    env = clean_env(tmp_path, data)
    assert run(env, "label", "1", "fp", "--source", "agent").returncode == 0
    assert run(env, "label", "1", "tp").returncode == 0
    res = run(env, "label", "1", "clear")
    assert res.returncode == 0
    assert res.stdout.strip() == (
        "emit 1: the human label is cleared; the agent label fp remains "
        "(clear it with `tma1 label 1 clear --source agent`)"
    )
    assert "fp" in run(env, "anomalies").stdout  # the agent's label still shows
    res = run(env, "label", "1", "clear", "--source", "agent")
    assert res.stdout.strip() == "emit 1: the agent label is cleared; it has no label now"


# --- issue 28.8 --------------------------------------------------------------------------


def test_a_real_head_pipeline_ends_the_demo_like_every_other_command(tmp_path: Path) -> None:
    """`tma1 demo | head -1` exited 1 where `anomalies | head` exits 141 (SIGPIPE's)."""
    env = clean_env(tmp_path, tmp_path / "data")
    cmd = " ".join(tma1_cmd("demo")) + " | head -1; echo \"status=${PIPESTATUS[0]}\""
    res = subprocess.run(
        ["bash", "-c", cmd], env=env, capture_output=True, text=True, timeout=120
    )
    lines = res.stdout.splitlines()
    assert lines[0].startswith("tma1 demo") and lines[-1] == "status=141", res.stdout
    assert _errors(res) == []


def test_an_unknown_session_says_the_others_have_anomalies(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    _seed(data, n=3)
    env = clean_env(tmp_path, data)
    res = run(env, "anomalies", "--session", "nope")
    assert res.returncode == 0
    assert res.stdout.strip() == "no anomalies for session nope; 3 in other sessions"
    res = run(env, "anomalies", "--kind", "stale_file_view")
    assert res.stdout.strip() == "no anomalies match --kind stale_file_view; 3 in the emit log"
    empty = tmp_path / "empty"
    empty.mkdir()
    _seed(empty, n=0)
    res = run(clean_env(tmp_path, empty), "anomalies", "--session", "nope")
    assert res.stdout.startswith("no anomalies emitted yet")


def test_export_and_replay_share_one_rule_for_an_existing_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    store = Store.open(f"sqlite:///{data / 'tma1.db'}")
    store.insert_event(parse_payload({"session_id": "s1", "hook_event_name": "Stop"}, ts=1))
    store.close()
    env = clean_env(tmp_path, data)
    out = tmp_path / "session.jsonl"
    out.write_text("mine\n")
    refused = run(env, "export", "--session", "s1", "--out", str(out))
    _one_line(refused, 2, f"--out {out} exists", "--force")
    assert out.read_text() == "mine\n"  # untouched
    forced = run(env, "export", "--session", "s1", "--out", str(out), "--force")
    assert forced.returncode == 0, forced.stderr
    assert '"session_id": "s1"' in out.read_text()

    db = tmp_path / "replay.db"
    db.write_text("old")
    refused = run(env, "replay", str(out), "--db", str(db))
    _one_line(refused, 2, f"--db {db} exists", "--force")
    assert db.read_text() == "old"
    forced = run(env, "replay", str(out), "--db", str(db), "--force")
    assert forced.returncode == 0, forced.stderr
    assert db.read_bytes().startswith(b"SQLite format 3")


def test_a_setting_is_validated_only_by_the_commands_that_use_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    _seed(data, n=1)
    env = clean_env(tmp_path, data, TMA1_PORT="nope")
    listed = run(env, "anomalies")  # reads the database, never the port
    assert listed.returncode == 0 and "test_stuck" in listed.stdout, listed.stderr
    _one_line(run(env, "serve", "--no-watch"), 2, "TMA1_PORT='nope'")


def test_an_unknown_option_prints_that_commands_usage(tmp_path: Path) -> None:
    res = run(clean_env(tmp_path, tmp_path / "data"), "serve", "--bogus")
    assert res.returncode == 2
    assert res.stderr.startswith("usage: tma1 serve ")
    assert "tma1 serve: error: unrecognized arguments: --bogus" in res.stderr
    assert not (tmp_path / "data").exists()
