"""This machine's identity on a shared database (issue 30): a uuid4 made at first start in
`$TMA1_DATA_DIR/machine-id` (mode 0600), or `TMA1_MACHINE_ID`. Every row the daemon stores
carries it, and everything that decides what to tell an agent reads only its own
machine's rows: a working tree is one machine's, even when another machine's tree has the
same path (`/workspaces/app` in every devcontainer)."""

from __future__ import annotations

import os
import re
import socket
import uuid
from pathlib import Path

MACHINE_ID_FILE = "machine-id"
REPLAY_MACHINE_ID = "replay"  # a replay's rows: one fixed machine, whatever replays them
_VALID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")


def valid_machine_id(value: str) -> bool:
    """1-64 characters: letters, digits, `.`, `_`, `:`, `-` (the column is String(64))."""
    return bool(_VALID.match(value))


def ensure_machine_id(data_dir: Path) -> str:
    """Read the data dir's machine id, creating it (atomically, 0600) when absent or unusable."""
    path = data_dir / MACHINE_ID_FILE
    found = read_machine_id(data_dir)
    if found is not None:
        return found
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(str(uuid.uuid4()) + "\n")
    try:
        os.link(tmp, path)  # fails if another process made it first: keep theirs
    except FileExistsError:
        if read_machine_id(data_dir) is None:
            os.replace(tmp, path)  # an empty or damaged file: nothing was stored under it
    finally:
        tmp.unlink(missing_ok=True)
    found = read_machine_id(data_dir)
    if found is None:  # pragma: no cover - a file we just wrote is unreadable
        raise OSError(f"cannot read back {path}")
    return found


def read_machine_id(data_dir: Path) -> str | None:
    """The data dir's machine id, or None (no file yet: nothing was stored from here)."""
    try:
        value = (data_dir / MACHINE_ID_FILE).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return value if valid_machine_id(value) else None


def host_name() -> str:
    """The host name, for display only (containers share names; the id is what counts)."""
    return socket.gethostname()[:255] or "unknown"
