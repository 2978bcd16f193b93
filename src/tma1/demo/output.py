"""What `tma1 demo` prints: readable on any terminal, colour only where it shows."""

from __future__ import annotations

import functools
import os
import textwrap
from typing import TextIO


class DemoError(RuntimeError):
    pass


_ASCII = str.maketrans({"✓": "+", "✗": "x", "✎": "*", "⇒": "=>", "│": "|", "—": "-", "…": "..."})


class Out:
    """Readable terminal output; colour only on a terminal and without NO_COLOR."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.color = stream.isatty() and not os.environ.get("NO_COLOR")

    def _c(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color else text

    bold = functools.partialmethod(_c, "1")
    dim = functools.partialmethod(_c, "2")
    green = functools.partialmethod(_c, "32")
    yellow = functools.partialmethod(_c, "33")
    red = functools.partialmethod(_c, "31")

    def line(self, text: str = "") -> None:
        encoding = getattr(self.stream, "encoding", None) or "utf-8"
        try:
            text.encode(encoding)
        except (UnicodeEncodeError, LookupError):
            # A terminal that is not UTF-8 (LANG=…ISO-8859-1): plain symbols, never a crash.
            text = text.translate(_ASCII).encode(encoding, "replace").decode(encoding)
        print(text, file=self.stream, flush=True)

    def told(self, body: str, how: str) -> None:
        self.line(f"       {self.yellow('⇒ the agent was told')} {self.dim('(' + how + ')')}")
        for raw in body.splitlines():
            for piece in textwrap.wrap(raw, 92, subsequent_indent="  ") or [""]:
                self.line(f"       {self.dim('│')} {piece}")
