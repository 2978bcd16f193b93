"""Transcript parsing and tailing on real published sessions, and context_pressure live.

The expected occupancy numbers below were computed by hand with a throwaway script that
read each file line by line with `json.loads` — independent of tma1's parser — keeping, for
Claude Code, the `assistant` lines that are not `isSidechain` and whose model is not
`<synthetic>`, the first line of each (`message.id`, `requestId`) pair, and summing
`input_tokens + cache_read_input_tokens + cache_creation_input_tokens`; for Codex, every
`event_msg`/`token_count` line with a non-null `info` whose `total_token_usage` differs from
the previous one, taking `last_token_usage.input_tokens`.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import LiveServer, require_sessions, start_live_server
from sqlalchemy import select

from tma1.clock import ManualClock, SystemClock, epoch_ms
from tma1.config import Settings
from tma1.counters import Counters
from tma1.events import TURN_END, Usage
from tma1.sensors.transcripts import (
    CodexState,
    TranscriptTailer,
    parse_claude_usage_lines,
    parse_codex_usage_lines,
)
from tma1.store import Store
from tma1.store.schema import messages

VIEWER = "claude-code/viewer-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
CCTRACE = "claude-code/cctrace-phase0.jsonl"
TEMPLAR = "claude-code/templar-d423c9b0.chat.json"
CODEX = "codex/moonmind-rollout-2025-11-13T18-21-11-019a802a-aab1-7c31-9831-d2510c7a74a2.jsonl"


def load_jsonl(path: Path) -> list[Any]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def stored(store: Store, session_id: str) -> list[Usage]:
    q = select(messages).where(messages.c.session_id == session_id).order_by(messages.c.id)
    with store.connect() as conn:
        rows = conn.execute(q).all()
    return [
        Usage(
            ts=r.ts,
            session_id=r.session_id,
            occupancy=r.occupancy,
            input_tokens=r.input_tokens,
            cache_read_tokens=r.cache_read_tokens,
            cache_creation_tokens=r.cache_creation_tokens,
            output_tokens=r.output_tokens,
            model=r.model,
            message_id=r.message_id,
            kind=r.kind,
        )
        for r in rows
    ]


# --- the pure parsers on real files ------------------------------------------------------


def test_claude_series_dedup_and_sidechains_viewer() -> None:
    objs = load_jsonl(require_sessions() / VIEWER)
    assistant = [o for o in objs if o.get("type") == "assistant"]
    assert len(assistant) == 262  # 244 of them are sidechain (subagent) lines
    rows = parse_claude_usage_lines(objs)
    assert [u.occupancy for u in rows] == [
        16208,
        16447,
        16750,
        18300,
        18575,
        19854,
        20127,
        20545,
        21552,
    ]
    # msg_01PrGGvEvreqPUaqe4qRsCgA is one response written as 4 lines with the same usage.
    lines = [o for o in assistant if o["message"]["id"] == "msg_01PrGGvEvreqPUaqe4qRsCgA"]
    assert len(lines) == 4
    assert [u.message_id for u in rows].count("msg_01PrGGvEvreqPUaqe4qRsCgA") == 1
    assert rows[2].message_id == "msg_01PrGGvEvreqPUaqe4qRsCgA"
    assert rows[0].ts == epoch_ms("2025-09-03T00:52:34.495Z")
    assert all(u.session_id == objs[-1]["sessionId"] for u in rows)
    assert {u.kind for u in rows} == {"usage"}


def test_claude_series_cctrace_peaks_at_180k() -> None:
    parsed = parse_claude_usage_lines(load_jsonl(require_sessions() / CCTRACE))
    rows = [u for u in parsed if u.kind == "usage"]
    occ = [u.occupancy for u in rows]
    # The user pressed Esc once (09:56:27, "[Request interrupted by user]"): a turn end.
    ends = [u for u in parsed if u.kind == TURN_END]
    assert [(u.ts, u.occupancy) for u in ends] == [(epoch_ms("2026-01-06T09:56:27.045Z"), 0)]
    # 326 assistant lines, 100 distinct responses.
    assert len(occ) == 100
    assert occ[:5] == [26818, 39604, 52028, 53497, 54413]
    assert occ[-3:] == [179260, 179858, 180437]
    assert max(occ) == 180437
    assert sum(occ) == 10796362


def test_claude_json_array_transcript() -> None:
    objs = json.loads((require_sessions() / TEMPLAR).read_text(encoding="utf-8"))
    rows = parse_claude_usage_lines(objs, session_id="replayed")
    occ = [u.occupancy for u in rows]
    assert len(occ) == 124  # of 207 assistant entries
    assert occ[:4] == [21715, 22087, 22439, 24478]
    assert occ[-2:] == [104257, 105134]
    assert sum(occ) == 8532897
    assert {u.session_id for u in rows} == {"replayed"}
    assert rows[0].model == "claude-sonnet-4-20250514"


def test_codex_series() -> None:
    objs = load_jsonl(require_sessions() / CODEX)
    state = CodexState()
    rows = parse_codex_usage_lines(objs, state=state)
    occ = [u.occupancy for u in rows]
    # 85 token_count events with info; Codex repeats each one, 43 distinct requests.
    assert len(occ) == 43
    assert occ[:5] == [5233, 5382, 5519, 5934, 6230]
    assert occ[-3:] == [53880, 54046, 54305]
    assert sum(occ) == 1064529
    assert rows[0].input_tokens + rows[0].cache_read_tokens == 5233
    assert rows[0].cache_read_tokens == 3072
    assert {u.model for u in rows} == {"gpt-5.1-codex"}
    assert {u.session_id for u in rows} == {"019a802a-aab1-7c31-9831-d2510c7a74a2"}
    assert state.session_id == "019a802a-aab1-7c31-9831-d2510c7a74a2"


def test_codex_in_slices_equals_whole() -> None:
    objs = load_jsonl(require_sessions() / CODEX)
    state = CodexState()
    sliced: list[Usage] = []
    for i in range(0, len(objs), 7):
        sliced += parse_codex_usage_lines(objs[i : i + 7], session_id="s", state=state)
    whole = parse_codex_usage_lines(objs, session_id="s")
    assert sliced == whole


def test_compaction_unknown_and_malformed_lines() -> None:
    objs: list[Any] = [
        {"type": "summary", "summary": "x", "leafUuid": "u0"},
        {"type": "brand-new-kind", "sessionId": "S", "whatever": [1, 2]},
        "not an object",
        {
            "type": "assistant",
            "sessionId": "S",
            "timestamp": "2025-01-01T00:00:00Z",
            "requestId": "r1",
            "message": {"id": "m1", "model": "claude-x", "usage": {"input_tokens": "bad"}},
        },
        {
            "type": "system",
            "subtype": "compact_boundary",
            "sessionId": "S",
            "uuid": "c1",
            "timestamp": "2025-01-01T00:01:00Z",
        },
        {
            "type": "assistant",
            "sessionId": "S",
            "requestId": "r2",
            "message": {"id": "m2", "model": "<synthetic>", "usage": {"input_tokens": 0}},
        },
        {
            "type": "user",
            "sessionId": "S",
            "uuid": "c2",
            "isCompactSummary": True,
            "timestamp": "2025-01-01T00:02:00Z",
            "message": {"role": "user", "content": "This session is being continued…"},
        },
        {
            "type": "assistant",
            "sessionId": "S",
            "requestId": "r3",
            "message": {
                "id": "m3",
                "usage": {
                    "input_tokens": 10,
                    "cache_read_input_tokens": 20,
                    "cache_creation_input_tokens": 30,
                    "output_tokens": 5,
                },
            },
        },
    ]
    rows = parse_claude_usage_lines(objs, default_ts=42)
    assert [(u.kind, u.occupancy, u.ts) for u in rows] == [
        ("usage", 0, epoch_ms("2025-01-01T00:00:00Z")),
        ("compaction", 0, epoch_ms("2025-01-01T00:01:00Z")),
        ("compaction", 0, epoch_ms("2025-01-01T00:02:00Z")),
        ("usage", 60, 42),
    ]
    assert (rows[3].input_tokens, rows[3].cache_read_tokens, rows[3].output_tokens) == (10, 20, 5)
    codex = parse_codex_usage_lines(
        [
            {"timestamp": "2025-01-01T00:00:00Z", "type": "compacted", "payload": {"message": ""}},
            {"type": "event_msg", "payload": {"type": "token_count", "info": None}},
        ],
        session_id="C",
    )
    assert [(u.kind, u.occupancy) for u in codex] == [("compaction", 0)]


# --- the tailer -------------------------------------------------------------------------


def tailer(store: Store, changed: list[str], **kw: Any) -> TranscriptTailer:
    return TranscriptTailer(
        store=store,
        clock=ManualClock(),
        counters=Counters(),
        on_session_change=changed.append,
        **kw,
    )


def test_tailing_a_growing_real_file_in_random_pieces(store: Store, tmp_path: Path) -> None:
    """Bytes arrive in random pieces, cutting lines anywhere: the stored series is the
    whole-file series, each response once."""
    src = (require_sessions() / CCTRACE).read_bytes()
    dst = tmp_path / "t.jsonl"
    dst.write_bytes(b"")
    changed: list[str] = []
    t = tailer(store, changed)
    rng = random.Random(7)
    pos = 0
    while pos < len(src):
        step = rng.randint(1, 120_000)
        with dst.open("ab") as fh:
            fh.write(src[pos : pos + step])
        pos += step
        t.catch_up("S1", str(dst))
    rows = stored(store, "S1")
    expected = parse_claude_usage_lines(load_jsonl(require_sessions() / CCTRACE), session_id="S1")
    assert [(u.occupancy, u.message_id, u.ts) for u in rows] == [
        (u.occupancy, u.message_id, u.ts) for u in expected
    ]
    assert changed and set(changed) == {"S1"}


def test_partial_last_line_waits_for_its_newline(store: Store, tmp_path: Path) -> None:
    line = json.dumps(
        {
            "type": "assistant",
            "sessionId": "S",
            "requestId": "r",
            "timestamp": "2025-01-01T00:00:00Z",
            "message": {"id": "m", "usage": {"input_tokens": 7}},
        }
    ).encode()
    f = tmp_path / "p.jsonl"
    f.write_bytes(line[:40])
    t = tailer(store, [])
    t.notice("S", str(f))
    assert stored(store, "S") == []
    with f.open("ab") as fh:
        fh.write(line[40:])  # complete, but no newline yet
    t.notice("S", str(f))
    assert stored(store, "S") == []
    with f.open("ab") as fh:
        fh.write(b"\n")
    t.notice("S", str(f))
    assert [u.occupancy for u in stored(store, "S")] == [7]


def _assistant(mid: str, occ: int, ts: str = "2025-01-01T00:00:00Z") -> str:
    return json.dumps(
        {
            "type": "assistant",
            "sessionId": "S",
            "requestId": f"r-{mid}",
            "timestamp": ts,
            "message": {"id": mid, "usage": {"input_tokens": occ}},
        }
    )


def test_truncation_and_rotation(store: Store, tmp_path: Path) -> None:
    f = tmp_path / "r.jsonl"
    f.write_text(_assistant("a", 1) + "\n" + _assistant("b", 2) + "\n")
    t = tailer(store, [])
    t.notice("S", str(f))
    # Truncated and rewritten (the same first response, then a new one): no double count.
    f.write_text(_assistant("a", 1) + "\n" + _assistant("c", 3) + "\n")
    t.notice("S", str(f))
    # Rotated: renamed away, a new file at the same path.
    os.rename(f, tmp_path / "r.jsonl.1")
    f.write_text(
        _assistant("d", 4)
        + "\n"
        + '{"type": "assistant", "message": {"usage": {broken\n'
        + _assistant("e", 5)
        + "\n"
    )
    t.notice("S", str(f))
    assert [u.occupancy for u in stored(store, "S")] == [1, 2, 3, 4, 5]
    assert t.counters.get("transcripts.rewound") == 2
    assert t.counters.get("transcripts.bad_lines") == 1
    t.notice("S", str(tmp_path / "missing.jsonl"))  # a path that is gone: nothing, no error


def test_hook_path_reads_a_bounded_slice_and_the_rest_in_background(
    store: Store, tmp_path: Path
) -> None:
    src = require_sessions() / CCTRACE
    f = tmp_path / "big.jsonl"
    shutil.copyfile(src, f)
    size = f.stat().st_size
    assert size > 1_000_000
    t = tailer(store, [], inline_bytes=64 * 1024)
    t.notice("S", str(f))  # the background thread is not running yet
    state = t._files[str(f)]
    assert 0 < state.offset <= 64 * 1024
    assert t.health()["backlog"] == 1
    t.start()
    try:
        deadline = time.monotonic() + 30
        while state.offset < size and time.monotonic() < deadline:
            time.sleep(0.02)
        assert state.offset == size
    finally:
        t.stop()
    rows = stored(store, "S")
    assert len([u for u in rows if u.kind == "usage"]) == 100
    assert len([u for u in rows if u.kind == TURN_END]) == 1  # the user's one Esc


def test_codex_rollout_tailed_with_agent_hint(store: Store, tmp_path: Path) -> None:
    f = tmp_path / "rollout.jsonl"
    shutil.copyfile(require_sessions() / CODEX, f)
    t = tailer(store, [])
    t.catch_up("hook-session", str(f), "codex")
    occ = [u.occupancy for u in stored(store, "hook-session")]
    assert len(occ) == 43 and sum(occ) == 1064529


# --- turn ends: the user interrupted the turn (no Stop hook) ------------------------------


ABORTED = {"type": "turn_aborted", "reason": "interrupted"}


def _codex(ts: str, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": ts, "type": kind, "payload": payload}


def test_a_codex_turn_aborted_is_a_turn_end_row() -> None:
    """Codex sends no hook for `turn_aborted` (the user pressed Esc, or the session was
    left mid-turn): the rollout's event is the only evidence the turn is over."""
    lines = [
        _codex("2026-01-09T14:04:01.000Z", "session_meta", {"id": "S"}),
        _codex("2026-01-09T14:04:01.100Z", "turn_context", {"model": "gpt-5.2-codex"}),
        _codex("2026-01-09T14:04:05.497Z", "event_msg", ABORTED),
        # A command's output quoting the words is no turn end.
        _codex("2026-01-09T14:04:06.000Z", "response_item",
               {"type": "function_call_output", "output": '"type":"turn_aborted"'}),
    ]  # fmt: skip
    rows = parse_codex_usage_lines(lines)
    assert [(u.kind, u.ts, u.occupancy, u.session_id, u.model) for u in rows] == [
        (TURN_END, epoch_ms("2026-01-09T14:04:05.497Z"), 0, "S", "gpt-5.2-codex")
    ]


def test_a_claude_interruption_is_a_turn_end_row() -> None:
    """Claude Code sends no Stop when the user interrupts (Esc): its transcript says
    "[Request interrupted by user]" as a user line, or as the result of the cut tool call.
    A sub-agent's interruption, or the words inside an assistant's text, are not the
    main turn's end."""

    def user(uuid: str, content: Any, **kw: Any) -> dict[str, Any]:
        return {"type": "user", "uuid": uuid, "sessionId": "S", "isSidechain": False,
                "timestamp": f"2026-01-06T09:56:{uuid[-2:]}.000Z",
                "message": {"role": "user", "content": content}, **kw}  # fmt: skip

    lines = [
        user("u10", [{"type": "text", "text": "[Request interrupted by user]"}]),
        user(
            "u11",
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": "[Request interrupted by user for tool use]",
                }
            ],
        ),
        user(
            "u11",
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": "[Request interrupted by user for tool use]",
                }
            ],
        ),
        user("u12", "[Request interrupted by user]", isSidechain=True),
        user("u13", [{"type": "text", "text": "why did you say [Request interrupted by user]?"}]),
        {
            "type": "assistant",
            "uuid": "a14",
            "sessionId": "S",
            "message": {
                "id": "m",
                "content": [{"type": "text", "text": "[Request interrupted by user]"}],
            },
        },
    ]
    rows = parse_claude_usage_lines(lines)
    assert [(u.kind, u.ts, u.message_id) for u in rows] == [
        (TURN_END, epoch_ms("2026-01-06T09:56:10.000Z"), "turn_end:u10"),
        (TURN_END, epoch_ms("2026-01-06T09:56:11.000Z"), "turn_end:u11"),  # once
    ]


def test_the_tailer_stores_a_turn_end_that_the_usage_read_passes_over(
    store: Store, tmp_path: Path
) -> None:
    """Through the tailer into the store: the turn end is found by the peers' read, and
    is no context size (the latest usage is still the last request's)."""
    f = tmp_path / "rollout.jsonl"
    token = {"type": "token_count", "info": {
        "total_token_usage": {"input_tokens": 9, "cached_input_tokens": 0,
                              "output_tokens": 1, "total_tokens": 10},
        "last_token_usage": {"input_tokens": 5_000, "cached_input_tokens": 0,
                             "output_tokens": 1}}}  # fmt: skip
    lines = [
        _codex("2026-01-09T14:04:01.000Z", "session_meta", {"id": "S"}),
        _codex("2026-01-09T14:04:02.000Z", "event_msg", token),
    ]
    f.write_text("".join(json.dumps(o) + "\n" for o in lines))
    t = tailer(store, [])
    t.notice("S", str(f), "codex")
    end = epoch_ms("2026-01-09T14:04:05.497Z")
    assert store.latest_turn_end_ts("S", end + 1) is None
    with f.open("a") as fh:
        fh.write(json.dumps(_codex("2026-01-09T14:04:05.497Z", "event_msg", ABORTED)) + "\n")
    t.notice("S", str(f), "codex")
    assert store.latest_turn_end_ts("S", end) == end
    assert store.latest_turn_end_ts("S", end - 1) is None  # not yet at that time
    usage = store.latest_usage("S")
    assert usage is not None and usage.kind == "usage" and usage.occupancy == 5_000


# --- live: context_pressure fires once ---------------------------------------------------


@pytest.fixture
def plive(tmp_path: Path, db_url: str) -> Iterator[LiveServer]:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=db_url,
        watch_files=False,
        context_pressure_threshold=100_000,
    )
    srv = start_live_server(settings, clock=SystemClock())
    yield srv
    srv.stop()


def _now_iso() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def test_transcript_growing_past_threshold_fires_context_pressure_once(
    plive: LiveServer, tmp_path: Path
) -> None:
    sid = f"cp-{uuid.uuid4().hex[:8]}"
    transcript = tmp_path / f"{sid}.jsonl"

    def append_response(occupancy: int, lines: int = 2) -> None:
        mid = f"msg_{uuid.uuid4().hex[:12]}"
        obj = {
            "type": "assistant",
            "sessionId": sid,
            "isSidechain": False,
            "requestId": f"req_{mid}",
            "timestamp": _now_iso(),
            "message": {
                "id": mid,
                "model": "claude-sonnet-4",
                "usage": {
                    "input_tokens": 3,
                    "cache_read_input_tokens": occupancy - 1003,
                    "cache_creation_input_tokens": 1000,
                    "output_tokens": 50,
                },
            },
        }
        with transcript.open("a", encoding="utf-8") as fh:
            for _ in range(lines):  # one response, several lines
                fh.write(json.dumps(obj) + "\n")

    def prompt() -> str:
        r = plive.hook(
            {
                "session_id": sid,
                "hook_event_name": "UserPromptSubmit",
                "cwd": str(tmp_path),
                "transcript_path": str(transcript),
                "prompt": "next",
            }
        )
        assert r.status_code == 200
        return r.text

    def pressure_emits() -> list[dict[str, Any]]:
        flush = getattr(plive.service.delivery, "flush", None)
        if callable(flush):
            flush()
        return [
            e
            for e in plive.store.emits_since(0)
            if e["session_id"] == sid and e["kind"] == "context_pressure"
        ]

    append_response(40_000)
    append_response(60_000)
    assert prompt() == ""
    assert plive.store.latest_usage(sid).occupancy == 60_000
    append_response(99_999)
    prompt()
    assert pressure_emits() == []
    append_response(120_000, lines=3)
    body = prompt()
    assert plive.store.latest_usage(sid).occupancy == 120_000
    assert "120,000" in body
    assert len(pressure_emits()) == 1
    for occupancy in (130_000, 150_000, 170_000):
        append_response(occupancy)
        prompt()
        assert len(pressure_emits()) == 1  # one-shot: never again in this session
    # Each response stored once although written on several lines.
    assert [u.occupancy for u in stored(plive.store, sid)] == [
        40_000,
        60_000,
        99_999,
        120_000,
        130_000,
        150_000,
        170_000,
    ]


def test_codex_hook_reads_rollout_through_the_live_server(
    plive: LiveServer, tmp_path: Path
) -> None:
    """A 412 KB rollout: the hook reads the first slice inline, the background thread the
    rest; rows carry the hook's session id."""
    rollout = tmp_path / "rollout.jsonl"
    shutil.copyfile(require_sessions() / CODEX, rollout)
    assert rollout.stat().st_size > 256 * 1024
    sid = f"codex-{uuid.uuid4().hex[:8]}"
    r = plive.hook(
        {
            "session_id": sid,
            "hook_event_name": "UserPromptSubmit",
            "cwd": str(tmp_path),
            "transcript_path": str(rollout),
            "model": "gpt-5.1-codex",
            "prompt": "hi",
        },
        params={"source": "codex"},
    )
    assert r.status_code == 200
    deadline = time.monotonic() + 30
    while len(stored(plive.store, sid)) < 43 and time.monotonic() < deadline:
        time.sleep(0.05)
    occ = [u.occupancy for u in stored(plive.store, sid)]
    assert len(occ) == 43 and sum(occ) == 1064529
    assert plive.store.latest_usage(sid).occupancy == 54305
    health = plive.client().get("/api/health").json()
    assert health["sensors"]["transcripts"] >= 1


def test_usage_of_whole_transcripts() -> None:
    base = require_sessions()
    codex = parse_codex_usage_lines(load_jsonl(base / CODEX), session_id="r")
    claude = parse_claude_usage_lines(load_jsonl(base / VIEWER), session_id="r")
    assert (len(codex), codex[-1].occupancy) == (43, 54305)
    assert (len(claude), claude[-1].occupancy) == (9, 21552)
    # The legacy Codex format carries no token counts at all.
    legacy = load_jsonl(base / "codex" / "ocodex-rollout-2025-08-24-legacy-format.jsonl")
    assert parse_codex_usage_lines(legacy) == []
    assert parse_codex_usage_lines([]) == []


def test_a_line_longer_than_every_budget(store: Store, tmp_path: Path) -> None:
    """A tool result of 300 KB on one line: the hook path leaves it to the background
    reader, which finishes the line even past its own chunk size."""
    huge = json.dumps({"type": "user", "sessionId": "S", "message": {"content": "x" * 300_000}})
    f = tmp_path / "huge.jsonl"
    f.write_text(_assistant("m1", 11) + "\n" + huge + "\n" + _assistant("m2", 22) + "\n")
    t = tailer(store, [], inline_bytes=64 * 1024, chunk_bytes=128 * 1024)
    t.notice("S", str(f))
    assert [u.occupancy for u in stored(store, "S")] == [11]
    assert t.health()["backlog"] == 1
    t.notice("S", str(f))  # still stuck inline: no progress, no error
    assert [u.occupancy for u in stored(store, "S")] == [11]
    t.catch_up("S", str(f))
    assert [u.occupancy for u in stored(store, "S")] == [11, 22]
    assert t._files[str(f)].offset == f.stat().st_size


def test_codex_tailer_skips_byte_repeats_but_not_across_a_compaction(
    store: Store, tmp_path: Path
) -> None:
    def token(total: int, last: int, ts: str) -> str:
        usage = {"input_tokens": last, "cached_input_tokens": 0, "output_tokens": 1}
        info = {
            "total_token_usage": {**usage, "input_tokens": total, "total_tokens": total},
            "last_token_usage": usage,
        }
        return json.dumps(
            {"timestamp": ts, "type": "event_msg", "payload": {"type": "token_count", "info": info}}
        )

    compacted = json.dumps(
        {"timestamp": "2025-01-01T00:00:03Z", "type": "compacted", "payload": {"message": "s"}}
    )
    lines = [
        token(100, 100, "2025-01-01T00:00:01Z"),
        token(100, 100, "2025-01-01T00:00:02Z"),  # Codex's repeat
        compacted,
        token(100, 100, "2025-01-01T00:00:04Z"),  # same bytes, but after the compaction
        token(150, 50, "2025-01-01T00:00:05Z"),
    ]
    f = tmp_path / "rollout.jsonl"
    f.write_text("\n".join(lines) + "\n")
    t = tailer(store, [])
    t.catch_up("S", str(f), "codex")
    whole = parse_codex_usage_lines([json.loads(x) for x in lines], session_id="S")
    got = stored(store, "S")
    assert [(u.kind, u.occupancy, u.ts) for u in got] == [
        (u.kind, u.occupancy, u.ts) for u in whole
    ]
    assert [(u.kind, u.occupancy) for u in got] == [
        ("usage", 100),
        ("compaction", 0),
        ("usage", 100),
        ("usage", 50),
    ]


def test_codex_context_window_is_stored_with_the_usage(store: Store, tmp_path: Path) -> None:
    """`token_count.info.model_context_window` rides with each usage row into the store
    and back (design §2.12: the threshold is half of it), without a schema change; the
    rollout's compaction is the start of a context epoch (§2.17). Lines trimmed from
    data/sessions/codex/ship-rollout-2026-03-12T16-36-47-019ce3fb-….jsonl (1, 6, 367, 791)."""
    lines = [
        {"timestamp": "2026-03-12T21:36:51.608Z", "type": "session_meta",
         "payload": {"id": "019ce3fb-1087-7980-8f92-8d0171aaea6a", "cwd": "/w/ship"}},
        {"timestamp": "2026-03-12T21:36:51.609Z", "type": "turn_context",
         "payload": {"cwd": "/w/ship", "model": "gpt-5.4"}},
        {"timestamp": "2026-03-12T21:59:12.174Z", "type": "event_msg",
         "payload": {"type": "token_count", "info": {
             "total_token_usage": {"input_tokens": 4409365, "cached_input_tokens": 3914880,
                                   "output_tokens": 27830, "total_tokens": 4437195},
             "last_token_usage": {"input_tokens": 131712, "cached_input_tokens": 126336,
                                  "output_tokens": 1933, "total_tokens": 133645},
             "model_context_window": 258400}}},
    ]  # fmt: skip
    f = tmp_path / "rollout.jsonl"
    f.write_text("".join(json.dumps(o) + "\n" for o in lines))
    t = tailer(store, [])
    t.catch_up("S", str(f), "codex")
    u = store.latest_usage("S")
    assert u is not None and (u.occupancy, u.model, u.context_window) == (
        131_712,
        "gpt-5.4",
        258_400,
    )
    assert store.latest_compaction_ts("S") is None
    compacted = {"timestamp": "2026-03-12T22:42:18.892Z", "type": "compacted",
                 "payload": {"message": "", "replacement_history": []}}  # fmt: skip
    with f.open("a") as fh:
        fh.write(json.dumps(compacted) + "\n")
    t.catch_up("S", str(f), "codex")
    assert store.latest_compaction_ts("S") == epoch_ms("2026-03-12T22:42:18.892Z")
    u = store.latest_usage("S")
    assert u is not None and (u.kind, u.model, u.context_window) == (
        "compaction",
        "gpt-5.4",
        258_400,
    )
