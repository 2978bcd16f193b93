from conftest import LiveServer


def test_live_server_stores_a_hook_event(live: LiveServer) -> None:
    r = live.hook({"session_id": "s1", "hook_event_name": "SessionStart", "cwd": "/tmp"})
    assert r.status_code == 200
    assert live.store.counts()["tma1_hook_events"] == 1
