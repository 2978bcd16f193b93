# ruff: noqa: E501  (the session excerpt is kept as the recorded lines)
"""Context epochs and the half-window threshold on a real Codex session (design §2.12,
§2.17; issue 15, pattern 5 and the "never re-arms after a compaction" miss).

The excerpt is cut from `data/sessions/codex/ship-rollout-2026-03-12T16-36-47-019ce3fb-
1087-7980-8f92-8d0171aaea6a.jsonl` (line numbers in the comments): gpt-5.4 with a
258,400-token window, compacted twice. Trimmed: `base_instructions`/`git` of the
session_meta, all but cwd/model of the turn_context, `rate_limits` and reasoning counts of
each token_count, the compaction's replacement history, the first prompt's text.
"""

from __future__ import annotations

from pathlib import Path

from tma1.clock import epoch_ms
from tma1.replay import codex_rollout
from tma1.replay.driver import replay_items
from tma1.replay.formats import read_records
from tma1.replay.model import USAGE

SHIP = [
    # line 1
    '{"timestamp":"2026-03-12T21:36:51.608Z","type":"session_meta","payload":{"id":"019ce3fb-1087-7980-8f92-8d0171aaea6a","timestamp":"2026-03-12T21:36:47.755Z","cwd":"/Users/ivanma/Desktop/gauntlet/ShipShape/ship","originator":"codex_cli_rs","cli_version":"0.114.0","source":"cli"}}',
    # line 6
    '{"timestamp":"2026-03-12T21:36:51.609Z","type":"turn_context","payload":{"turn_id":"019ce3fb-1f66-7f61-ae11-83f0bf85050b","cwd":"/Users/ivanma/Desktop/gauntlet/ShipShape/ship","model":"gpt-5.4"}}',
    # line 8
    '{"timestamp":"2026-03-12T21:36:51.609Z","type":"event_msg","payload":{"type":"user_message","message":"Use `ship-worktree-preflight` first. I want to improve numeric unit-test coverage in this repo [cut]"}}',
    # line 243
    '{"timestamp":"2026-03-12T21:44:58.020Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":1920397,"cached_input_tokens":1787136,"output_tokens":17149,"total_tokens":1937546},"last_token_usage":{"input_tokens":101159,"cached_input_tokens":100352,"output_tokens":47,"total_tokens":101206},"model_context_window":258400}}}',
    # line 343
    '{"timestamp":"2026-03-12T21:54:34.928Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":4027714,"cached_input_tokens":3651072,"output_tokens":24907,"total_tokens":4052621},"last_token_usage":{"input_tokens":126794,"cached_input_tokens":3456,"output_tokens":1741,"total_tokens":128535},"model_context_window":258400}}}',
    # line 345
    '{"timestamp":"2026-03-12T21:54:35.013Z","type":"event_msg","payload":{"type":"user_message","message":"whats next, any way to improve those numbers?"}}',
    # line 356
    '{"timestamp":"2026-03-12T21:56:25.810Z","type":"event_msg","payload":{"type":"user_message","message":"lets implement a plan to improve the coverage"}}',
    # line 367
    '{"timestamp":"2026-03-12T21:59:12.174Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":4409365,"cached_input_tokens":3914880,"output_tokens":27830,"total_tokens":4437195},"last_token_usage":{"input_tokens":131712,"cached_input_tokens":126336,"output_tokens":1933,"total_tokens":133645},"model_context_window":258400}}}',
    # line 373
    '{"timestamp":"2026-03-12T21:59:23.376Z","type":"event_msg","payload":{"type":"user_message","message":"Implement the plan."}}',
    # line 786
    '{"timestamp":"2026-03-12T22:41:38.880Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":15176859,"cached_input_tokens":14177920,"output_tokens":55779,"total_tokens":15232638},"last_token_usage":{"input_tokens":229173,"cached_input_tokens":222336,"output_tokens":383,"total_tokens":229556},"model_context_window":258400}}}',
    # line 791
    '{"timestamp":"2026-03-12T22:42:18.892Z","type":"compacted","payload":{"message":"","replacement_history":[]}}',
    # line 794
    '{"timestamp":"2026-03-12T22:42:18.897Z","type":"event_msg","payload":{"type":"context_compacted"}}',
    # line 795
    '{"timestamp":"2026-03-12T22:42:19.023Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":15176859,"cached_input_tokens":14177920,"output_tokens":55779,"total_tokens":15232638},"last_token_usage":{"input_tokens":0,"cached_input_tokens":0,"output_tokens":0,"total_tokens":17476},"model_context_window":258400}}}',
    # line 1123
    '{"timestamp":"2026-03-12T23:00:40.257Z","type":"event_msg","payload":{"type":"user_message","message":"can we check if the e2e tests we changed covered the \\"  What we did not cover from that audit:\\""}}',
    # line 1206
    '{"timestamp":"2026-03-12T23:05:20.283Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":18769522,"cached_input_tokens":17473536,"output_tokens":84826,"total_tokens":18854348},"last_token_usage":{"input_tokens":136920,"cached_input_tokens":118912,"output_tokens":628,"total_tokens":137548},"model_context_window":258400}}}',
    # line 1329
    '{"timestamp":"2026-03-12T23:11:06.583Z","type":"event_msg","payload":{"type":"user_message","message":"you should lso take a peek in   003-improve-test-reliability branch bcuz i think i have some work i did there that belongs with this"}}',
]


def _ms(iso: str) -> int:
    ts = epoch_ms(iso)
    assert ts is not None
    return ts


def _replay(tmp_path: Path, threshold: int | None = None) -> list[dict[str, object]]:
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(SHIP) + "\n")
    conv = codex_rollout.convert(read_records(path))
    items = sorted(conv.items, key=lambda i: (i.ts, i.seq))
    _, emits, _, _ = replay_items(items, threshold=threshold)
    return [e for e in emits if e["kind"] == "context_pressure"]


def test_the_rollout_carries_the_model_context_window(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(SHIP) + "\n")
    usages = [i.usage for i in codex_rollout.convert(read_records(path)).items if i.kind == USAGE]
    assert {u.context_window for u in usages if u is not None and u.kind == "usage"} == {258_400}


def test_half_the_window_and_once_per_context_epoch(tmp_path: Path) -> None:
    emits = _replay(tmp_path)
    # 126,794 tokens (49 % of the window) at the 21:54 prompt is under half the window:
    # a fixed 100k fired there. The first prompt past 129,200 is 21:59 ("Implement the
    # plan.", 131,712 = 50 %); after the compaction at 22:42 the context filled again
    # (136,920 at 23:05) and the 23:11 prompt is told again.
    assert [e["ts"] for e in emits] == [
        _ms("2026-03-12T21:59:23.376Z"),
        _ms("2026-03-12T23:11:06.583Z"),
    ]
    first, second = emits
    assert "131,712" in str(first["evidence"]) and "129,200" in str(first["evidence"])
    assert "258,400" in str(first["evidence"])
    assert first["stable_key"] == "context_pressure|medium|"
    assert second["stable_key"] == "context_pressure|medium|compacted 2026-03-12T22:42:18.897Z"
    assert "136,920" in str(second["evidence"]) and "compacted" in str(second["evidence"])


def test_a_configured_threshold_wins_and_still_rearms(tmp_path: Path) -> None:
    emits = _replay(tmp_path, threshold=100_000)
    assert [e["ts"] for e in emits] == [
        _ms("2026-03-12T21:54:35.013Z"),
        _ms("2026-03-12T23:11:06.583Z"),
    ]
