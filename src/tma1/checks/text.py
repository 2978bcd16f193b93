"""Text helpers every part of `tma1.checks` shares: ANSI stripping, cheap line tests.

Pure functions of strings (design §2.8, §2.11), so the ingest path, the rules and replay
agree on what an output says.
"""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


# The agent's own framing around a command's output, never the tool's words (design
# §2.21): Claude Code's `Exit code N`, Codex's `Exit code: N`, `Wall time: 1 seconds`,
# `Output:`, and exec_command's `Chunk ID: …`, `Original token count: N`.
FRAMING = re.compile(
    r"^(?:Exit code:? -?\d+|Process exited with code -?\d+|"
    r"Command exited with non-zero status code -?\d+|Wall time: [\d.]+ ?(?:seconds?|s|ms)|"
    r"Chunk ID: \S+|Original token count: \d+|Process running with session ID \S+|"
    r"Total output lines: \d+|Output:|Error:|stdout:|stderr:)\s*$"
)
# Codex's note on any command that failed inside its sandbox, whatever the cause: the
# command's own output follows it (`…, exit code: 2, stdout: ====== ERRORS ======`).
_SANDBOX_NOTE = re.compile(
    r"^failed in sandbox(?: \w+)?(?: with execution error: sandbox denied exec error, "
    r"exit code: -?\d+, stdout:)?:? ?|, stderr: ",
    re.MULTILINE,
)


def unframe(text: str) -> str:
    """`text` without the agent's sandbox note in front of the command's own output."""
    return _SANDBOX_NOTE.sub("\n", text) if "failed in sandbox" in text else text


def meaningful_lines(output: str) -> list[str]:
    """The output's lines, stripped, without blanks and the agent's framing (`Exit code:
    1`, …): what the tool itself said."""
    lines = (ln.strip() for ln in strip_ansi(output).splitlines())
    return [ln for ln in lines if ln and not FRAMING.match(ln)]


def any_of(patterns: tuple[re.Pattern[str], ...]) -> re.Pattern[str]:
    """One regex that matches where any of `patterns` would (IGNORECASE kept per part)."""
    parts = []
    for p in patterns:
        if p.flags & ~(re.UNICODE | re.IGNORECASE):
            raise ValueError(f"any_of cannot combine flags {p.flags} of {p.pattern!r}")
        parts.append(f"(?i:{p.pattern})" if p.flags & re.IGNORECASE else f"(?:{p.pattern})")
    return re.compile("|".join(parts))


def _starts_anchored(p: re.Pattern[str]) -> bool:
    """The whole pattern is tied to the start of the text: `^` first, and no top-level
    alternative that could match elsewhere (`^a|b`)."""
    if not p.pattern.startswith("^"):
        return False
    depth, escaped, in_class = 0, False, False
    for ch in p.pattern:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            return False
    return True


def lowered(text: str) -> str:
    low = text.lower()
    if not low.isascii():
        # IGNORECASE also takes `ı` and `İ` (which lower() makes `i̇`) for `i`.
        low = low.replace("ı", "i").replace("\u0307", "")
    return low


class LineTest:
    """Whether any of `patterns` is found in a line (`search`), cheaply.

    Python's regex engine tries an unanchored pattern at every position of the line, and
    it has no fast literal scan for one that starts with `\\b` or ignores case. So the
    patterns anchored at the start are one regex tried once (`match`), and each other one
    runs only on lines that contain one of its `needs` — lowercase text that every match
    contains, looked up in the line as `lowered` makes it (tested:
    tests/checks/test_extract.py). Most lines of a long failure output
    contain none of the words, and `in` is many times faster than the regex.

    Anchored patterns that begin with one of `heads` (a whole regex, such as a file path)
    share it: `^head(?:rest1|rest2)` scans the head once where `^head rest1|^head rest2`
    scans it once per pattern, backtracking included."""

    __slots__ = ("_anchored", "_loose")

    def __init__(
        self,
        patterns: tuple[re.Pattern[str], ...],
        needs: dict[re.Pattern[str], tuple[str, ...]] | None = None,
        heads: tuple[str, ...] = (),
    ) -> None:
        needs = needs or {}
        anchored = tuple(p for p in patterns if _starts_anchored(p))
        self._anchored = _anchored_any(anchored, heads).match if anchored else None
        self._loose = tuple(
            (needs.get(p, ("",)), p.search) for p in patterns if not _starts_anchored(p)
        )

    def __call__(self, line: str) -> bool:
        if self._anchored is not None and self._anchored(line):
            return True
        if self._loose:
            low = lowered(line)
            for words, search in self._loose:
                if any(w in low for w in words) and search(line):
                    return True
        return False


def _anchored_any(patterns: tuple[re.Pattern[str], ...], heads: tuple[str, ...]) -> re.Pattern[str]:
    """`any_of(patterns)` for patterns tied to the line start, with shared `heads` factored."""
    shared: dict[str, list[str]] = {}
    alone: list[re.Pattern[str]] = []
    for p in patterns:
        for head in heads:
            rest = p.pattern[1 + len(head) :]
            # The rest must stand alone: no quantifier of the head's last atom.
            if (
                p.pattern.startswith("^" + head)
                and not p.flags & re.IGNORECASE
                and not rest.startswith(("*", "+", "?", "{"))
            ):
                shared.setdefault(head, []).append(rest)
                break
        else:
            alone.append(p)
    parts = [f"^{head}(?:{'|'.join(f'(?:{r})' for r in rests)})" for head, rests in shared.items()]
    if alone:
        parts.append(any_of(tuple(alone)).pattern)
    return re.compile("|".join(f"(?:{part})" for part in parts))
