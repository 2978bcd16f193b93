"""One entry path for a hook (issue 29): the body the HTTP route receives and the payload a
replay has already decoded go through the same steps — a Codex shell call's exit status
read from its rollout, and a cut event marked `truncated` — and the live ingest is built
with the step that follows its commits (`Responder`), not patched afterwards."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from ingestkit import make_payload

from tma1.clock import ManualClock
from tma1.config import Settings
from tma1.events import TOOL_RESULT_CAP
from tma1.live.service import Service, build_service

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "real-agents"
HOOKS = FIXTURES / "codex-0.171.0.hooks-buildsh.jsonl"
ROLLOUT = FIXTURES / "codex-0.171.0.rollout-buildsh.jsonl"
BUILD_CALL = "call_30e8da1770f143d3ab43"  # ./build.sh, exit status 1 in the rollout only


@pytest.fixture
def service(tmp_path: Path) -> Any:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'tma1.db'}",
        watch_files=False,
        hook_db_budget_ms=30_000,
    )
    svc = build_service(settings, clock=ManualClock())
    svc.start()
    yield svc
    svc.stop()
    svc.store.close()


def _enter(service: Service, payload: dict[str, Any], form: str, source: str | None) -> str:
    hook: bytes | dict[str, Any] = json.dumps(payload).encode() if form == "body" else payload
    return asyncio.run(service.handle_hook_async(hook, source=source))


@pytest.mark.parametrize("form", ["body", "payload"])
def test_a_codex_shell_calls_exit_status_is_read_from_its_rollout_either_way(
    service: Service, form: str
) -> None:
    payload = next(
        p
        for p in (json.loads(line)["payload"] for line in HOOKS.read_text().splitlines())
        if p.get("tool_use_id") == BUILD_CALL and p["hook_event_name"] == "PostToolUse"
    )
    payload = {**payload, "transcript_path": str(ROLLOUT)}
    _enter(service, payload, form, "codex")
    [event] = service.store.session_events(payload["session_id"], 0)
    assert event.tool_use_id == BUILD_CALL
    assert event.is_failure and event.failure_kind == "exit"
    assert service.counters.get("codex_exit.found") == 1


@pytest.mark.parametrize("form", ["body", "payload"])
def test_an_event_cut_to_the_caps_is_marked_either_way(service: Service, form: str) -> None:
    payload = make_payload("cut", session="s-cut")
    payload["tool_response"] = {"stdout": "x" * (3 * TOOL_RESULT_CAP), "exitCode": 0}
    _enter(service, payload, form, None)
    [event] = service.store.session_events("s-cut", 0)
    assert event.metadata["truncated"] is True
    assert event.metadata["original_bytes"] > 3 * TOOL_RESULT_CAP
    assert service.counters.get("events.truncated") == 1


def test_the_live_ingest_is_built_with_what_follows_its_commits(service: Service) -> None:
    """The outage queue's late writes reach the responder the service answers with: wired
    when the ingest is built (it was patched onto the ingest after the Service existed)."""
    assert service.ingest.on_stored == service.responder.stored  # type: ignore[attr-defined]
