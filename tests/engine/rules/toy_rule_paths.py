"""Not collected by itself: `test_toy_rule.py` runs this file in a copy of the source tree
where the toy rule of docs/rules.md sits in the rules package. It walks the toy's finding
through every path a kind takes — hook → detector → suppression → delivery → emit log →
the API's kind enum, the kinds route, the three gates, the session bundle's re-telling —
on a real server, as an agent's hooks would."""

from __future__ import annotations

import json

from conftest import LiveServer
from enginekit import bash_ok, payload, prompt
from toykit import TOY_KIND

from tma1.clock import ManualClock
from tma1.engine.rules import SPECS

SID = "toy-session"
PUSH = "git push --force origin main"


def _post(live: LiveServer, clock: ManualClock, data: dict[str, object]) -> str:
    clock.advance(1_000)
    r = live.hook(data)
    assert r.status_code == 200, r.text
    return r.text


def test_the_toy_rule_goes_every_way_a_kind_goes(live: LiveServer, clock: ManualClock) -> None:
    assert TOY_KIND in SPECS, "run by test_toy_rule.py, with the toy dropped in"
    _post(live, clock, payload(SID, "SessionStart", source="startup"))
    _post(live, clock, bash_ok(SID, PUSH, "+ 1a2b3c...4d5e6f main -> main (forced update)"))
    # Claude Code reads a UserPromptSubmit hook's plain stdout as context: the digest.
    told = _post(live, clock, prompt(SID))
    assert told.startswith("<tma1-context>") and f"[medium] {TOY_KIND}: " in told, told
    assert "rewrote the remote branch's history" in told
    assert live.service.delivery.flush()

    with live.client() as c:
        emits = c.get("/api/anomalies", params={"kind": TOY_KIND}).json()["emits"]
        assert [(e["kind"], e["severity"], e["channel"]) for e in emits] == [
            (TOY_KIND, "medium", "user_prompt_submit")
        ]
        kinds = c.get("/api/anomalies/kinds").json()["kinds"]
        (toy,) = [k for k in kinds if k["kind"] == TOY_KIND]
        assert toy["follow_action"] == "a read or an edit of a related file"
        budget = c.get("/api/anomalies/budget").json()
        assert budget["kinds"][TOY_KIND]["total"] == 1
        follow = c.get("/api/anomalies/follow-rate").json()["kinds"][TOY_KIND]
        assert (follow["emits"], follow["action"]) == (1, "a read or an edit of a related file")
        precision = c.get("/api/anomalies/precision").json()
        assert TOY_KIND in precision["human"]["kinds"]

    # A resumed session hears its standing finding again in the session bundle.
    resumed = json.loads(_post(live, clock, payload(SID, "SessionStart", source="resume")))
    bundle = resumed["hookSpecificOutput"]["additionalContext"]
    assert "Still unresolved in this session:" in bundle and PUSH in bundle, bundle
    assert live.service.delivery.flush()
    with live.client() as c:
        emits = c.get("/api/anomalies", params={"kind": TOY_KIND}).json()["emits"]
    assert sorted(e["channel"] for e in emits) == ["session_start", "user_prompt_submit"]
