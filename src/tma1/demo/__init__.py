"""`tma1 demo`: a scripted agent session against a real server, through the real hook script.

Everything is real except the agent: a `tma1 serve` process on a free loopback port with a
temporary data dir, a temporary git project whose files are really written (by the agent's
Edits and, once, by "a teammate" outside the agent), a Claude Code transcript that grows
with usage lines, and the installed hook script run with `sh -c` and the event JSON on
stdin, exactly as Claude Code runs it. What the script prints is what the agent would read.

The rules work in real time (30-minute and 10-minute windows), so the session is scripted
to make each finding fire within seconds: three failures in a row, an outside write between
a Read and an Edit, a transcript that crosses a lowered context-pressure threshold.
"""

from __future__ import annotations

from tma1.demo.run import run_demo

__all__ = ["run_demo"]
