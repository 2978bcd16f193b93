"""The data dir holds every prompt and tool output tma1 sees: it is private to its owner.

The data dir is 0700, the SQLite database and its WAL/SHM files 0600 (design §3), and an
install made before this rule is tightened when `tma1 serve` (or `install`) starts. A data
dir tma1 cannot use (a file, a read-only mount, a path under /proc) is a ConfigError that
names it and what to do, raised before anything else touches it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from tma1.config import ConfigError

DIR_MODE = 0o700
FILE_MODE = 0o600
SQLITE_SUFFIXES = ("", "-wal", "-shm", "-journal")


def _tighten(path: Path, mode: int) -> None:
    """chmod `path` down to `mode` when it is more open; a file someone else owns (a
    read-only copy, a shared dir) is left alone."""
    with contextlib.suppress(OSError):
        st = path.stat()
        if stat.S_IMODE(st.st_mode) & ~mode and st.st_uid == os.getuid():
            os.chmod(path, stat.S_IMODE(st.st_mode) & mode)


def prepare_data_dir(path: Path) -> Path:
    """Create the data dir 0700 (or tighten an existing one) and check it is writable."""
    path = path.expanduser()
    fix = "set TMA1_DATA_DIR (or --data-dir) to a writable directory of yours"
    if path.exists() and not path.is_dir():
        raise ConfigError(f"the data dir {path} is a file, not a directory; move it away or {fix}")
    try:
        path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    except OSError as exc:
        why = os.strerror(exc.errno) if exc.errno else str(exc)
        if exc.errno == errno.ENOTDIR:
            why = "a part of the path is a file"
        raise ConfigError(f"cannot create the data dir {path}: {why}; {fix}") from None
    _tighten(path, DIR_MODE)
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"the data dir {path} is not writable; {fix}")
    probe = path / f".tma1-write-probe-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        os.close(fd)
        probe.unlink()
    except OSError as exc:
        why = os.strerror(exc.errno) if exc.errno else str(exc)
        raise ConfigError(f"the data dir {path} is not writable ({why}); {fix}") from None
    return path


def sqlite_path(url: str) -> Path | None:
    """The file behind a `sqlite:///PATH` URL; None for memory, URIs and other databases."""
    if not url.startswith("sqlite") or "///" not in url:
        return None
    raw = url.split("///", 1)[1].split("?", 1)[0]
    if not raw or raw == ":memory:" or raw.startswith("file:"):
        return None
    return Path(raw)


def secure_sqlite_file(db: Path) -> None:
    """Create the database file 0600 before SQLite does (SQLite gives its WAL and SHM the
    database's mode), and tighten the files of an older install to 0600."""
    if not db.exists():
        with contextlib.suppress(OSError):
            os.close(os.open(db, os.O_WRONLY | os.O_CREAT, FILE_MODE))
    for suffix in SQLITE_SUFFIXES:
        _tighten(db.with_name(db.name + suffix), FILE_MODE)


def check_loopback_host(host: str, name: str = "TMA1_HOST") -> None:
    """tma1 listens on this machine only (the data it serves is every prompt and tool
    output). A name that resolves to nothing, or to any address that is not loopback
    (0.0.0.0, a LAN address, a public name), is refused with the fix."""
    import ipaddress
    import socket

    fix = "use 127.0.0.1 (the default), ::1 or localhost"
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        raise ConfigError(
            f"{name}={host!r} is not an address of this machine ({why}); {fix}"
        ) from None
    for info in infos:
        addr = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if addr.is_unspecified:
            raise ConfigError(
                f"{name}={host!r} would listen on every network interface and serve every "
                f"prompt and tool output tma1 keeps to the network; tma1 listens on loopback "
                f"only: {fix}"
            )
        if not addr.is_loopback:
            raise ConfigError(
                f"{name}={host!r} ({addr}) is not a loopback address; tma1 listens on this "
                f"machine only: {fix}"
            )
