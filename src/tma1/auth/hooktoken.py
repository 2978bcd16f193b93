"""The hook secret (32 random bytes, hex, in `$TMA1_DATA_DIR/hook-token`, mode 0600) and
everything derived from it.

The hook script never sends the token itself (docs/hooks.md, "Who is on the other end"):
it sends a fresh nonce and a keyed hash of it, and prints an answer only when the answer
carries the server's keyed hash of the same nonce and of the answer. Keyed hashes are plain
SHA-256 over a fixed layout with the token inside, because that is what the script can
compute with the tools every machine has (`sha256sum`, `shasum -a 256`, `openssl dgst`);
every variable part is length-delimited or of a fixed alphabet, so the length extension a
bare SHA-256 allows yields no message the server or the script would accept.

Clients of the read API send the token as `X-TMA1-Token`; the dashboard gets a session
cookie in exchange for a one-time login code (`login_url`).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
import stat
import time
from pathlib import Path

PROTOCOL = "tma1-hook-v2"
# `<seconds>[.<fraction>]-<unique>`: the time lets the server refuse an old nonce (a replay
# of a request a squatter on the port recorded) without remembering every nonce forever.
NONCE_RE = re.compile(r"^([0-9]{9,12})(?:\.[0-9]{1,9})?-[0-9A-Za-z]{1,64}$")
LOGIN_TTL_S = 24 * 3600
SESSION_TTL_S = 30 * 24 * 3600


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


def _sha256(*lines: str | bytes) -> str:
    """SHA-256 (hex) of the lines, each ended by a newline: what the script's
    `printf '%s\\n' a b c | sha256sum` (or bash's here-string) hashes."""
    h = hashlib.sha256()
    for line in lines:
        h.update(line.encode("utf-8") if isinstance(line, str) else line)
        h.update(b"\n")
    return h.hexdigest()


def new_nonce(now: float | None = None) -> str:
    return f"{time.time() if now is None else now:.6f}-{secrets.token_hex(12)}"


def request_auth(token: str, nonce: str) -> str:
    """What a hook request carries as `X-TMA1-Auth` with its `X-TMA1-Nonce`."""
    return _sha256(PROTOCOL, "request", token, nonce)


def response_sig(token: str, nonce: str, body: bytes) -> str:
    """The `X-TMA1-Sig` of an answer: proves to the script that whoever answered holds the
    token, for this very request and this very body (its length first: no extension)."""
    return _sha256(PROTOCOL, "response", token, nonce, str(len(body)), body)


def hook_headers(token: str, nonce: str | None = None) -> dict[str, str]:
    """The auth headers of one hook request (the script's, for Python clients)."""
    n = nonce or new_nonce()
    return {"X-TMA1-Nonce": n, "X-TMA1-Auth": request_auth(token, n)}


def http_hook_key(token: str) -> str:
    """The static header of Claude Code's native http hooks (`install --transport http`):
    derived, so that whoever captures it can post hook events but read nothing."""
    return _sha256(PROTOCOL, "http", token)


def _mac(token: str, purpose: str, value: str) -> str:
    return hmac.new(token.encode(), f"{purpose}\n{value}".encode(), hashlib.sha256).hexdigest()


def login_code(token: str, now: float | None = None) -> str:
    """A login code for the dashboard, valid once for LOGIN_TTL_S: any process holding the
    token can mint one (`tma1 serve`, `tma1 doctor`), the server checks it statelessly."""
    # A random part: two codes minted in one second (two `tma1 doctor` runs) are two
    # codes, each good once.
    stamp = f"{int(time.time() if now is None else now)}-{secrets.token_hex(4)}"
    return f"{stamp}.{_mac(token, 'login', stamp)[:40]}"


def session_value(token: str, now: float | None = None) -> str:
    """The dashboard's cookie value: a timestamp and its MAC (not the token)."""
    ts = str(int(time.time() if now is None else now))
    return f"{ts}.{_mac(token, 'session', ts)}"


def _stamped_ok(token: str, purpose: str, value: str, ttl: float, now: float, cut: int) -> bool:
    stamp, _, mac = value.partition(".")
    ts, _, salt = stamp.partition("-")
    if not ts.isdigit() or len(ts) > 12 or not mac or len(salt) > 16:
        return False
    if salt and not salt.isalnum():
        return False
    if not -60 <= now - int(ts) <= ttl:
        return False
    want = _mac(token, purpose, stamp)[:cut] if cut else _mac(token, purpose, stamp)
    return hmac.compare_digest(mac.encode(), want.encode())


def login_code_ok(token: str, code: str, now: float | None = None) -> bool:
    t = time.time() if now is None else now
    return _stamped_ok(token, "login", code, LOGIN_TTL_S, t, 40)


def session_ok(token: str, value: str, now: float | None = None) -> bool:
    t = time.time() if now is None else now
    return _stamped_ok(token, "session", value, SESSION_TTL_S, t, 0)


def login_url(base: str, token: str) -> str:
    return f"{base}/?login={login_code(token)}"


def _private(path: Path) -> None:
    """chmod down to 0600 a file of ours that is more open; another user's is left alone."""
    with contextlib.suppress(OSError):
        st = path.stat()
        if stat.S_IMODE(st.st_mode) & 0o077 and st.st_uid == os.getuid():
            os.chmod(path, stat.S_IMODE(st.st_mode) & 0o600)


def data_dir_tag(data_dir: Path) -> str:
    """What `/api/ping` says of the server's data dir without the token: a hash, so that
    `tma1 doctor` holding another data dir's token (a typo, a second install) can tell
    that the server keeps other data, while a stranger learns at most whether a guess is
    right."""
    return hashlib.sha256(str(data_dir.expanduser().absolute()).encode()).hexdigest()[:16]
