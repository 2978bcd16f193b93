"""server/security.py's pure parts: the hook nonce guard and the credential check."""

from __future__ import annotations

from tma1.auth.hooktoken import login_code, login_code_ok, request_auth, session_ok, session_value
from tma1.server.security import COOKIE, NonceGuard, credential_refusal, is_public

TOKEN = "ab" * 32
NOW = 1_900_000_000.0


def auth(nonce: str, token: str = TOKEN) -> tuple[bytes, bytes]:
    return nonce.encode(), request_auth(token, nonce).encode()


def test_nonce_guard_takes_each_fresh_nonce_once() -> None:
    g = NonceGuard(TOKEN, started=NOW - 100)
    n = f"{NOW:.6f}-abc"
    assert g.check(*auth(n), now=NOW) is None
    assert g.check(*auth(n), now=NOW) == "replayed X-TMA1-Nonce"
    assert g.check(*auth(f"{NOW - 31:.0f}-x"), now=NOW) is not None  # past the window
    assert g.check(*auth(f"{NOW + 6:.0f}-x"), now=NOW) is not None  # from the future
    assert g.check(*auth(f"{NOW:.0f}-y", "cd" * 32), now=NOW) == "wrong X-TMA1-Auth"
    for bad in ("", "123-x", f"{NOW:.0f}-a b", f"{NOW:.0f}-" + "a" * 65, f"{NOW:.0f}"):
        assert g.check(*auth(bad), now=NOW) == "malformed X-TMA1-Nonce", bad


def test_nonce_guard_refuses_what_predates_the_server() -> None:
    g = NonceGuard(TOKEN, started=NOW)
    assert g.check(*auth(f"{NOW - 3:.0f}-x"), now=NOW + 1) is not None
    assert g.check(*auth(f"{NOW:.0f}-x"), now=NOW + 1) is None  # sh's whole seconds


def test_a_full_nonce_guard_forgets_old_nonces_but_never_takes_them_again() -> None:
    g = NonceGuard(TOKEN, started=NOW - 100)
    g.MAX_SEEN = 10
    for i in range(10):
        assert g.check(*auth(f"{NOW - 10 + i:.0f}-n{i}"), now=NOW) is None
    assert g.check(*auth(f"{NOW:.0f}-new"), now=NOW) is None  # full: the older half goes
    assert len(g.seen) <= 10
    for i in range(5):  # replays of what it forgot are still refused
        assert g.check(*auth(f"{NOW - 10 + i:.0f}-n{i}"), now=NOW) is not None


def test_credentials_token_cookie_or_nothing() -> None:
    assert credential_refusal(TOKEN, [(b"x-tma1-token", TOKEN.encode())]) is None
    assert credential_refusal(TOKEN, [(b"x-tma1-token", b"nope")])[0] == 403  # type: ignore[index]
    assert credential_refusal(TOKEN, [])[0] == 401  # type: ignore[index]
    cookie = f"a=b; {COOKIE}={session_value(TOKEN)}; c=d".encode()
    assert credential_refusal(TOKEN, [(b"cookie", cookie)]) is None
    other = f"{COOKIE}={session_value('cd' * 32)}".encode()
    assert credential_refusal(TOKEN, [(b"cookie", other)])[0] == 401  # type: ignore[index]


def test_login_codes_and_sessions_expire() -> None:
    code = login_code(TOKEN, NOW)
    assert login_code_ok(TOKEN, code, NOW + 3600)
    assert not login_code_ok(TOKEN, code, NOW + 25 * 3600)
    assert not login_code_ok("cd" * 32, code, NOW)
    assert not login_code_ok(TOKEN, code.replace(".", ".0"), NOW)
    value = session_value(TOKEN, NOW)
    assert session_ok(TOKEN, value, NOW + 29 * 86400)
    assert not session_ok(TOKEN, value, NOW + 31 * 86400)


def test_only_the_shell_the_probe_and_the_hook_post_are_public() -> None:
    assert is_public("GET", "/") and is_public("GET", "/static/app.js")
    assert is_public("GET", "/api/ping") and is_public("POST", "/api/hooks")
    for method, path in [
        ("GET", "/api/hooks"),
        ("GET", "/api/health"),
        ("GET", "/openapi.json"),
        ("GET", "/docs"),
        ("GET", "/api/pingx"),
        ("GET", "/staticx"),
    ]:
        assert not is_public(method, path), path


def test_two_codes_minted_in_one_second_are_two_codes() -> None:
    """Two `tma1 doctor` runs in one second: each prints a code of its own, so using one
    (the server takes each code once) leaves the other good."""
    a, b = login_code(TOKEN, now=1000), login_code(TOKEN, now=1000)
    assert a != b
    assert login_code_ok(TOKEN, a, now=1001) and login_code_ok(TOKEN, b, now=1001)
    stamp, _, mac = a.partition(".")
    forged = f"{stamp.split('-')[0]}-ffffffff.{mac}"  # another salt under the same MAC
    assert not login_code_ok(TOKEN, forged, now=1001)
