"""Pure edits of an agent's JSON hooks file (`{"hooks": {Event: [{matcher, hooks: [...]}]}}`).

Claude Code's settings.json and Codex's hooks.json share this shape. Our handlers are
recognised by the script's file name in their `command`, so a reinstall (even from another
data dir) replaces them in place; every other key, group and handler is left as it was.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
from pathlib import Path
from typing import Any

from tma1.adapters.files import refusal
from tma1.adapters.jsonsplice import JsonFormat, splice

Doc = dict[str, Any]


DEFAULT_FORMAT = JsonFormat()
_FIRST_INDENT = re.compile(r"\n([ \t]+)\S")
_KEY_SEP = re.compile(r'"(\s*):(\s*)')
_ITEM_SEP = re.compile(r"[\]}\"\deln](\s*),(\s*)[\[{\"\-\dtfn]")
_UNICODE_ESCAPE = re.compile(r"\\u[0-9a-fA-F]{4}")


def detect_format(text: str) -> JsonFormat:
    """The file's own style, so a rewrite changes only the lines that must change."""
    body = text.strip()
    if not body:
        return DEFAULT_FORMAT
    m = _FIRST_INDENT.search(body)
    indent = m.group(1) if m else None
    k = _KEY_SEP.search(body)
    key_sep = ":" + k.group(2) if k and "\n" not in k.group(2) else ": "
    if indent is None:
        i = _ITEM_SEP.search(body)
        item_sep = "," + (i.group(2) if i and "\n" not in i.group(2) else " ")
    else:
        item_sep = ","
    return JsonFormat(
        indent=indent,
        key_sep=key_sep,
        item_sep=item_sep,
        trailing_newline=text.endswith("\n"),
        ensure_ascii=text.isascii() and bool(_UNICODE_ESCAPE.search(text)),
    )


def dumps(doc: Doc, fmt: JsonFormat = DEFAULT_FORMAT) -> str:
    text = json.dumps(
        doc,
        indent=fmt.indent,
        separators=(fmt.item_sep, fmt.key_sep),
        ensure_ascii=fmt.ensure_ascii,
    )
    return text + "\n" if fmt.trailing_newline else text


def edit_text(text: str, doc: Doc) -> str:
    """`text` changed to hold `doc`, touching only what changed (the user's own entries
    keep their wrapping); a file that cannot be edited so is re-rendered in its style."""
    fmt = detect_format(text)
    if text.strip() and (out := splice(text, doc, fmt)) is not None:
        return out
    return dumps(doc, fmt)


def decode_text(path: Path, data: bytes | None) -> str:
    """The file's text ("" when absent); a file that is not UTF-8 is refused untouched."""
    if data is None:
        return ""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise refusal(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def parse_json_object(path: Path, data: bytes | None, key: str) -> Doc:
    """A JSON object file as a dict ({} when absent or blank) whose `key`, when there, is
    an object too; anything else is refused."""
    text = decode_text(path, data)
    if not text.strip():
        return {}
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}: {exc.msg}"
        raise refusal(f"{path} is not valid JSON ({where})") from None
    if not isinstance(doc, dict):
        raise refusal(f"{path} holds a JSON {type(doc).__name__}, not an object")
    inner = doc.get(key)
    if inner is not None and not isinstance(inner, dict):
        raise refusal(f'{path}: "{key}" is a {type(inner).__name__}, not an object', "fix it")
    return doc


def installed_bytes(path: Path, before: bytes | None, doc: Doc, wanted: Doc) -> bytes:
    """The file (`before`, parsed to `doc`) changed to hold `wanted`: `before` itself when
    that changes nothing."""
    if wanted == doc and before is not None:
        return before
    return edit_text(decode_text(path, before), wanted).encode("utf-8")


def uninstalled_bytes(path: Path, before: bytes, wanted: Doc, rec: dict[str, Any]) -> bytes | None:
    """The file changed to hold `wanted` on uninstall: the user's exact bytes from before
    install (`rec`, the install record) when nothing of theirs changed since, and None
    (delete it) when install created it and nothing is left."""
    original = rec.get("original")
    with contextlib.suppress(ValueError):
        if original is not None and (json.loads(original) if original.strip() else {}) == wanted:
            return original.encode("utf-8")
    if rec.get("created_file") and not wanted:
        return None
    return edit_text(decode_text(path, before), wanted).encode("utf-8")


def parse_document(
    path: Path, data: bytes | None, config_keys: frozenset[str] = frozenset()
) -> Doc:
    """The hooks file as a dict ({} when absent or blank). Refuses anything we can't edit
    safely. `config_keys`: keys inside "hooks" that are settings, not events (Gemini CLI's
    `enabled`, `disabled`, `notifications`); they are left alone."""
    doc = parse_json_object(path, data, "hooks")
    for event, groups in (doc.get("hooks") or {}).items():
        if event in config_keys:
            continue
        if not isinstance(groups, list):
            what = f'"hooks"."{event}" is a {type(groups).__name__}, not a list'
            raise refusal(f"{path}: {what}", "fix it")
    return doc


def is_ours(handler: object, marker: str) -> bool:
    """Ours: a command hook running our script, or an http hook whose URL names it."""
    return isinstance(handler, dict) and (
        marker in str(handler.get("command", "")) or marker in str(handler.get("url", ""))
    )


def _count_in(groups: Any, marker: str) -> int:
    """Our handlers among one event's groups."""
    if not isinstance(groups, list):
        return 0
    return sum(
        is_ours(h, marker)
        for group in groups
        if isinstance(group, dict) and isinstance(group.get("hooks"), list)
        for h in group["hooks"]
    )


def count_ours(doc: Doc, marker: str) -> int:
    return sum(_count_in(groups, marker) for groups in (doc.get("hooks") or {}).values())


def _strip_event(groups: list[Any], marker: str, keep_first: dict[str, Any] | None) -> bool:
    """Remove our handlers from one event's groups, in place. With `keep_first`, the first
    one found is replaced by it instead. Returns whether `keep_first` was placed."""
    placed = False
    emptied: list[int] = []  # by identity: a user's own empty group may compare equal
    for group in groups:
        if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
            continue
        kept: list[Any] = []
        dropped = False
        for h in group["hooks"]:
            if not is_ours(h, marker):
                kept.append(h)
            elif keep_first is not None and not placed:
                kept.append(copy.deepcopy(keep_first))
                placed = True
            else:
                dropped = True
        group["hooks"] = kept
        if dropped and not kept:
            emptied.append(id(group))  # a group that held only our handler goes with it
    groups[:] = [g for g in groups if id(g) not in emptied]
    return placed


def add_hooks(
    doc: Doc,
    events: tuple[str, ...],
    handler: dict[str, Any],
    marker: str,
    matcher: str | None,
    per_event: dict[str, dict[str, Any]] | None = None,
) -> Doc:
    """Our handler on each event (`per_event[event]` where given), exactly once; our
    handlers on other events removed."""
    out = copy.deepcopy(doc)
    hooks = out.setdefault("hooks", {})
    for event in list(hooks):
        if event not in events and _count_in(hooks[event], marker):
            _strip_event(hooks[event], marker, None)
            if not hooks[event]:
                del hooks[event]
    for event in events:
        wanted = (per_event or {}).get(event, handler)
        groups = hooks.setdefault(event, [])
        if not _strip_event(groups, marker, wanted):
            group: dict[str, Any] = {} if matcher is None else {"matcher": matcher}
            group["hooks"] = [copy.deepcopy(wanted)]
            groups.append(group)
    return out


def remove_hooks(
    doc: Doc,
    marker: str,
    *,
    drop_empty_hooks: bool,
    keep_events: frozenset[str] | set[str] = frozenset(),
) -> Doc:
    """Our handlers removed; groups and event keys that held only ours go too, except the
    events in `keep_events` (they were there, perhaps empty, before install)."""
    out = copy.deepcopy(doc)
    hooks = out.get("hooks")
    if not isinstance(hooks, dict):
        return out
    for event in list(hooks):
        groups = hooks[event]
        if not _count_in(groups, marker):
            continue
        _strip_event(groups, marker, None)
        if not groups and event not in keep_events:
            del hooks[event]
    if drop_empty_hooks and not hooks:
        del out["hooks"]
    return out
