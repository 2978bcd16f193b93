"""Pure edits of a hooks file: format detection round trips, add/remove properties."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tma1.adapters import jsonhooks
from tma1.adapters.files import InstallError

MARKER = "tma1-hook-claude-code.sh"
OURS = {"type": "command", "command": f"/home/u/.tma1/hooks/{MARKER}", "timeout": 5}
EVENTS = ("PreToolUse", "Stop", "UserPromptSubmit")

SAMPLE: dict[str, Any] = {
    "model": "opus",
    "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]},
    "env": {"NAME": "Zoë", "EMPTY": {}, "LIST": []},
    "n": [1, 2.5, None, True, False],
}


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(SAMPLE, indent=2, ensure_ascii=False) + "\n",  # Claude Code's own style
        json.dumps(SAMPLE, indent=4, ensure_ascii=False),
        json.dumps(SAMPLE, indent="\t", ensure_ascii=False) + "\n",
        json.dumps(SAMPLE, separators=(",", ":"), ensure_ascii=False),
        json.dumps(SAMPLE, ensure_ascii=False) + "\n",
        json.dumps(SAMPLE, indent=2) + "\n",  # \\u escapes for non-ASCII
    ],
)
def test_detected_format_reproduces_the_file(text: str) -> None:
    fmt = jsonhooks.detect_format(text)
    assert jsonhooks.dumps(json.loads(text), fmt) == text


def test_blank_file_gets_the_default_style() -> None:
    assert jsonhooks.dumps({"a": 1}, jsonhooks.detect_format("")) == '{\n  "a": 1\n}\n'


def test_add_is_idempotent_and_keeps_user_handlers_in_order() -> None:
    once = jsonhooks.add_hooks(SAMPLE, EVENTS, OURS, MARKER, "")
    assert jsonhooks.add_hooks(once, EVENTS, OURS, MARKER, "") == once
    assert once["hooks"]["Stop"][0] == SAMPLE["hooks"]["Stop"][0]
    assert once["hooks"]["Stop"][1] == {"matcher": "", "hooks": [OURS]}
    assert jsonhooks.count_ours(once, MARKER) == len(EVENTS)
    assert SAMPLE["hooks"]["Stop"] == [{"hooks": [{"type": "command", "command": "say done"}]}]


def test_add_drops_ours_from_events_no_longer_registered() -> None:
    old = {"hooks": {"Notification": [{"hooks": [dict(OURS)]}]}}
    new = jsonhooks.add_hooks(old, EVENTS, OURS, MARKER, "")
    assert "Notification" not in new["hooks"]


@pytest.mark.parametrize(
    "bad",
    [b'{"a": }', b"[]", b'{"hooks": 3}', b'{"hooks": {"Stop": "x"}}', b"\xff\xfe{}"],
)
def test_parse_refuses_what_it_cannot_edit(bad: bytes) -> None:
    from pathlib import Path

    with pytest.raises(InstallError, match=r"settings\.json"):
        jsonhooks.parse_document(Path("/x/settings.json"), bad)


# --- property: install then uninstall gives back the document --------------------------------

_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8))
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
_handler = st.fixed_dictionaries(
    {"type": st.just("command"), "command": st.text(max_size=20).filter(lambda c: MARKER not in c)},
    optional={"timeout": st.integers(1, 600)},
)
_group = st.fixed_dictionaries(
    {"hooks": st.lists(_handler, max_size=3)},
    optional={"matcher": st.sampled_from(["", "Bash", "*"])},
)
_hooks = st.dictionaries(
    st.sampled_from([*EVENTS, "SessionEnd", "Notification"]),
    st.lists(_group, max_size=3),
    max_size=4,
)
_docs = st.builds(
    lambda extra, hooks, with_hooks: {**extra, **({"hooks": hooks} if with_hooks else {})},
    st.dictionaries(st.text(max_size=6).filter(lambda k: k != "hooks"), _values, max_size=3),
    _hooks,
    st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(_docs, st.sampled_from(["", None]))
def test_remove_after_add_is_the_identity(doc: dict[str, Any], matcher: str | None) -> None:
    added = jsonhooks.add_hooks(doc, EVENTS, OURS, MARKER, matcher)
    assert jsonhooks.count_ours(added, MARKER) == len(EVENTS)
    assert jsonhooks.add_hooks(added, EVENTS, OURS, MARKER, matcher) == added
    removed = jsonhooks.remove_hooks(
        added,
        MARKER,
        drop_empty_hooks="hooks" not in doc,
        keep_events=set(doc.get("hooks", {})),
    )
    assert removed == doc
