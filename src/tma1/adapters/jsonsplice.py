"""Edit a JSON file's text so that only what changed changes (`tma1 install`'s diff).

`splice(text, new_doc)` returns text that parses to `new_doc`, reusing the original
bytes of every value that did not change: a member added to an object or an item added
to a list is inserted before its closing bracket, in the indentation of its siblings; a
removed one is cut out with its comma; a changed one is replaced in place. The user's own
entries keep their wrapping, spacing and key order. When the change cannot be expressed
that way (a list reordered, say), the smallest enclosing value is re-rendered, and when
anything is off the caller falls back to re-rendering the document.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class JsonFormat:
    """How a file writes its JSON: indent, separators, final newline, escapes."""

    indent: str | None = "  "
    key_sep: str = ": "
    item_sep: str = ","
    trailing_newline: bool = True
    ensure_ascii: bool = False


@dataclass
class _Node:
    start: int
    end: int
    value: Any
    # Objects: (key, key start, value node); lists: (None, item start, item node).
    children: list[tuple[str | None, int, _Node]] = field(default_factory=list)
    kind: str = "scalar"


def _skip(text: str, i: int) -> int:
    m = _WS.match(text, i)
    return m.end() if m else i


def _parse(text: str, i: int) -> _Node:
    i = _skip(text, i)
    c = text[i]
    if c not in "{[":
        value, end = _DECODER.raw_decode(text, i)
        return _Node(i, end, value)
    close = "}" if c == "{" else "]"
    node = _Node(i, i, {} if c == "{" else [], kind="obj" if c == "{" else "arr")
    j = _skip(text, i + 1)
    if text[j] == close:
        node.end = j + 1
        return node
    while True:
        start = j
        key: str | None = None
        if c == "{":
            key, j = _DECODER.raw_decode(text, j)
            j = _skip(text, j)
            if text[j] != ":":
                raise ValueError("expected ':'")
            j += 1
        child = _parse(text, j)
        node.children.append((key, start, child))
        if key is not None:
            node.value[key] = child.value
        else:
            node.value.append(child.value)
        j = _skip(text, child.end)
        if text[j] == ",":
            j = _skip(text, j + 1)
            continue
        if text[j] != close:
            raise ValueError(f"expected ',' or {close!r}")
        node.end = j + 1
        return node


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and json.dumps(a) == json.dumps(b)


class _Splicer:
    def __init__(self, text: str, style: JsonFormat) -> None:
        self.text = text
        self.style = style

    def _line_indent(self, pos: int) -> str | None:
        """The whitespace that starts the line holding `pos` (None: no line break before
        it within the whitespace run, i.e. an inline member)."""
        k = pos
        while k > 0 and self.text[k - 1] in " \t":
            k -= 1
        if k > 0 and self.text[k - 1] in "\n\r":
            return self.text[k:pos]
        return None

    def _dump(self, value: Any, indent_at: str | None) -> str:
        s = self.style
        if indent_at is None or s.indent is None:
            return json.dumps(
                value,
                separators=(s.item_sep if s.indent is None else ", ", s.key_sep),
                ensure_ascii=s.ensure_ascii,
            )
        out = json.dumps(
            value, indent=s.indent, separators=(",", s.key_sep), ensure_ascii=s.ensure_ascii
        )
        return out.replace("\n", "\n" + indent_at)

    def _member(self, key: str | None, value: Any, indent_at: str | None) -> str:
        body = self._dump(value, indent_at)
        if key is None:
            return body
        return json.dumps(key, ensure_ascii=self.style.ensure_ascii) + self.style.key_sep + body

    def render(self, node: _Node, new: Any, indent_at: str | None) -> str:
        text = self.text
        if _same(node.value, new):
            return text[node.start : node.end]
        if node.kind == "obj" and isinstance(new, dict) and node.children:
            return self._edit(node, [(k, new[k]) for k in new], indent_at, keyed=True)
        if node.kind == "arr" and isinstance(new, list) and node.children:
            old = [c.value for _, _, c in node.children]
            grown = len(new) > len(old) and all(map(_same, old, new))
            if grown or len(new) == len(old) or _match_subsequence(new, old) is not None:
                return self._edit(node, [(None, v) for v in new], indent_at, keyed=False)
        return self._dump(new, indent_at)

    def _edit(
        self,
        node: _Node,
        wanted: list[tuple[str | None, Any]],
        indent_at: str | None,
        *,
        keyed: bool,
    ) -> str:
        """The container's text with its children edited in place."""
        text = self.text
        children = node.children
        # Which old child each wanted entry maps to (None: new).
        if keyed:
            old_index = {k: i for i, (k, _, _) in enumerate(children)}
            plan = [(old_index.get(k), k, v) for k, v in wanted]
            if [i for i, _, _ in plan if i is not None] != sorted(
                i for i, _, _ in plan if i is not None
            ):
                return self._dump(dict(wanted), indent_at)  # reordered: render it whole
        elif len(wanted) >= len(children):
            plan = [(i if i < len(children) else None, None, v) for i, (_, v) in enumerate(wanted)]
        else:
            matched = _match_subsequence([v for _, v in wanted], [c.value for _, _, c in children])
            plan = [(i, None, v) for i, (_, v) in zip(matched or (), wanted, strict=True)]
        out_parts: list[str] = []
        first_start = children[0][1]
        last_end = children[-1][2].end
        # The separator between siblings: what follows the first comma, if there are two.
        if len(children) > 1:
            comma = text.index(",", children[0][2].end)
            sep_ws = text[comma + 1 : children[1][1]]
        else:
            sep_ws = text[node.start + 1 : first_start]
        member_indent = self._line_indent(first_start)
        for i, key, value in plan:
            if i is None:
                out_parts.append(self._member(key, value, member_indent))
                continue
            mstart, child = children[i][1:]
            head = text[mstart : child.start]  # the key, its colon and the spaces
            out_parts.append(head + self.render(child, value, member_indent))
        if not out_parts:
            return "{}" if keyed else "[]"
        return (
            text[node.start : first_start]
            + ("," + sep_ws).join(out_parts)
            + text[last_end : node.end]
        )


def _match_subsequence(small: list[Any], big: list[Any]) -> list[int] | None:
    """Where each of `small` is in `big`, in order; None when `small` is not a subsequence."""
    out: list[int] = []
    j = 0
    for v in small:
        while j < len(big) and not _same(big[j], v):
            j += 1
        if j == len(big):
            return None
        out.append(j)
        j += 1
    return out


def splice(text: str, new_doc: Any, style: JsonFormat) -> str | None:
    """`text` edited to hold `new_doc` in `style` (the file's own), or None when it cannot
    be done faithfully."""
    try:
        root = _parse(text, 0)
        if _skip(text, root.end) != len(text):
            return None
        splicer = _Splicer(text, style)
        body = splicer.render(root, new_doc, splicer._line_indent(root.start) or "")
        out = text[: root.start] + body + text[root.end :]
        if json.loads(out) != new_doc:
            return None
        return out
    except (ValueError, IndexError):
        return None
