"""The hook secret: 32 random bytes, hex, in `$TMA1_DATA_DIR/hook-token`, mode 0600."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def ensure_token(path: Path) -> str:
    """Read the token, creating it (atomically, 0600) when absent."""
    try:
        token = path.read_text(encoding="ascii").strip()
        if token:
            return token
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_hex(32)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(token + "\n")
    try:
        os.link(tmp, path)  # fails if another process created it first: keep theirs
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    return path.read_text(encoding="ascii").strip()
