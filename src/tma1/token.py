"""The hook secret: 32 random bytes, hex, in `$TMA1_DATA_DIR/hook-token`, mode 0600."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path


def ensure_token(path: Path) -> str:
    """Read the token, creating it (atomically, 0600) when absent; an existing token
    readable by others (made by hand, or by an older tma1) is tightened to 0600."""
    try:
        token = path.read_text(encoding="ascii").strip()
        if token:
            _private(path)
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


def _private(path: Path) -> None:
    """chmod down to 0600 a file of ours that is more open; another user's is left alone."""
    with contextlib.suppress(OSError):
        st = path.stat()
        if stat.S_IMODE(st.st_mode) & 0o077 and st.st_uid == os.getuid():
            os.chmod(path, stat.S_IMODE(st.st_mode) & 0o600)
