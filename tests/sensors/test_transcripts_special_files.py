"""Only regular files are read: a FIFO, a device or a directory named as a transcript or
a rollout is no transcript, and opening one must never block (issue 31 item 2)."""

from __future__ import annotations

import os
from pathlib import Path

from tma1.sensors.codex_exit import read_command_end, read_patch_lines
from tma1.sensors.transcripts import open_regular


def test_open_regular_takes_only_regular_files(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    plain = tmp_path / "t.jsonl"
    plain.write_text("{}\n")
    link = tmp_path / "link"
    link.symlink_to(fifo)
    for path in (fifo, link, tmp_path, Path("/dev/null"), tmp_path / "missing", "a\x00b"):
        assert open_regular(path) is None, path  # a blocking open would hang here
    with open_regular(plain) as fh:  # type: ignore[union-attr]
        assert fh.read() == b"{}\n"


def test_rollout_reads_of_a_fifo_answer_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "rollout.jsonl"
    os.mkfifo(fifo)
    assert read_command_end(fifo, "call_1") is None
    assert read_patch_lines(fifo, "call_1") is None
