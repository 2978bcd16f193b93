"""A Stop's final message is stored with its head and its tail: what an agent says is
still failing comes at the end of a long report as often as at its start."""

from __future__ import annotations

from tma1.events import parse_payload
from tma1.storable.caps import MESSAGE_HEAD, MESSAGE_TAIL, METADATA_CAP


def test_a_long_final_message_keeps_its_closing_words() -> None:
    report = "Summary of the changes.\n" + "- touched a file\n" * 1_000
    report += "The build still fails on main.rs:12; I could not fix it."
    ev = parse_payload(
        {"session_id": "s", "hook_event_name": "Stop", "last_assistant_message": report}, ts=1
    )
    kept = ev.metadata["last_assistant_message"]
    assert kept.startswith("Summary of the changes.")
    assert kept.endswith("The build still fails on main.rs:12; I could not fix it.")
    assert len(kept) < MESSAGE_HEAD + MESSAGE_TAIL + 20 < METADATA_CAP
    assert ev.metadata["_truncated"] is True


def test_a_short_final_message_is_kept_whole() -> None:
    ev = parse_payload(
        {"session_id": "s", "hook_event_name": "Stop", "last_assistant_message": "Done."}, ts=1
    )
    assert ev.metadata == {"last_assistant_message": "Done."}
