"""The hook script's round trip, process start to exit, as an agent pays it (issue 6).

Against a real `tma1 serve` (SQLite, temporary data dir, loopback port), each figure is
one `sh -c <installed script>` with the event JSON on stdin, timed from just before the
fork to the exit:

- empty answer: a PostToolUse(Read) — stored, nothing to say;
- digest: a UserPromptSubmit in a fresh session that has three failures of one test
  behind it (set up over HTTP, untimed), so the answer is a `<tma1-context>` digest;
- Stop block: a Stop in a fresh session with three failures of one command;
- server down: the script against a port nobody listens on (connection refused);
- wedged server: a socket that accepts and never answers (the cap, TMA1_HOOK_TIMEOUT: 2 s).

Both variants of the script are timed (`--flavor`): bash over /dev/tcp (what install
writes where /bin/bash has it) and POSIX sh + curl. Baselines from the same run: plain
`curl` against `GET /api/ping` (the trivial endpoint), `sh -c true`, `bash -c true`, and
`python3 -c pass` (what a Python hook would pay before doing anything).

    .venv/bin/python bench/bench_hook_script.py [--n 100] [--flavor bash|sh|both]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tma1.adapters.hookscript import write_script
from tma1.auth.hooktoken import hook_headers
from tma1.config import Settings


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def timed(argv: list[str], stdin: str = "", env: dict[str, str] | None = None) -> tuple[float, str]:
    t0 = time.perf_counter()
    r = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, timeout=30)
    ms = (time.perf_counter() - t0) * 1000
    if r.returncode != 0:
        raise SystemExit(f"{argv[:3]} exited {r.returncode}: {r.stderr}")
    return ms, r.stdout


def stats(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    q = statistics.quantiles(s, n=100, method="inclusive") if len(s) > 1 else s * 99
    return {"p50": statistics.median(s), "p90": q[89], "p99": q[98], "max": s[-1]}


def row(name: str, samples: list[float], base: float | None, note: str = "") -> None:
    st = stats(samples)
    ratio = f"{st['p50'] / base:5.2f}x" if base else "     "
    print(
        f"  {name:<34} {st['p50']:7.1f} {st['p90']:7.1f} {st['p99']:7.1f} {st['max']:7.1f}  "
        f"{ratio}  {note}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100, help="calls per figure (default 100)")
    ap.add_argument("--flavor", choices=("bash", "sh", "both"), default="both")
    args = ap.parse_args()
    n = max(args.n, 5)
    if not shutil.which("curl"):
        raise SystemExit("curl is needed")

    root = Path(tempfile.mkdtemp(prefix="tma1-bench-hook-"))
    data = root / "data"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMA1_")}
    env.update(TMA1_DATA_DIR=str(data), TMA1_PORT=str(port), TMA1_LOG_LEVEL="WARNING")
    server = subprocess.Popen(
        [sys.executable, "-m", "tma1.cli", "serve", "--no-watch"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(f"{url}/api/ping", timeout=1, trust_env=False).is_success:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            raise SystemExit("tma1 serve did not start")
        token = (data / "hook-token").read_text().strip()
        flavors = ("bash", "sh") if args.flavor == "both" else (args.flavor,)
        hooks = {
            f: [
                "sh",
                "-c",
                shlex.quote(
                    str(
                        write_script(
                            Settings(data_dir=data, port=port),
                            "claude-code",
                            path=data / f"hook-{f}.sh",
                            flavor=f,
                        )
                    )
                ),
            ]
            for f in flavors
        }
        hook = hooks[flavors[0]]
        hook_env = {**env}  # the script's baked-in port and data dir apply
        def fresh(request: httpx.Request) -> None:  # a fresh nonce per hook post
            request.headers.update(hook_headers(token))

        http = httpx.Client(base_url=url, event_hooks={"request": [fresh]}, trust_env=False)

        def post(payload: dict[str, object]) -> str:
            return http.post("/api/hooks", content=json.dumps(payload)).text

        def failures(sid: str, command: str, error: str) -> None:
            post({"session_id": sid, "hook_event_name": "SessionStart", "cwd": str(root)})
            for i in range(3):
                base = {
                    "session_id": sid,
                    "cwd": str(root),
                    "tool_name": "Bash",
                    "tool_input": {"command": command},
                    "tool_use_id": f"t{i}",
                }
                post({**base, "hook_event_name": "PreToolUse"})
                post({**base, "hook_event_name": "PostToolUseFailure", "error": error})

        serial = itertools.count()

        def series(
            make: Callable[[int], tuple[str, Callable[[str], None]]], hook: list[str]
        ) -> list[float]:
            out = []
            for _ in range(n):
                stdin, check = make(next(serial))  # a fresh session per call
                ms, body = timed(hook, stdin, hook_env)
                check(body)
                out.append(ms)
            return out

        def empty_event(i: int) -> tuple[str, Callable[[str], None]]:
            payload = {
                "session_id": "bench-empty",
                "cwd": str(root),
                "hook_event_name": "PostToolUse",
                "tool_name": "Read",
                "tool_input": {"file_path": f"{root}/f{i}.py"},
                "tool_response": {"type": "text", "file": {"content": "x = 1\n"}},
            }

            def check(body: str) -> None:
                assert body == "", body

            return json.dumps(payload), check

        def digest_event(i: int) -> tuple[str, Callable[[str], None]]:
            sid = f"bench-digest-{i}"
            failures(
                sid,
                "python -m pytest -q tests/test_cart.py",
                "Exit code 1\nFAILED tests/test_cart.py::test_total - assert 9 == 10\n1 failed",
            )

            def check(body: str) -> None:
                assert body.startswith("<tma1-context>"), body

            payload = {
                "session_id": sid,
                "cwd": str(root),
                "hook_event_name": "UserPromptSubmit",
                "prompt": "go on",
            }
            return json.dumps(payload), check

        def stop_event(i: int) -> tuple[str, Callable[[str], None]]:
            sid = f"bench-stop-{i}"
            failures(sid, "make build", "Exit code 2\nmain.c:3:1: error: expected ';'")

            def check(body: str) -> None:
                doc = json.loads(body)  # either answer form blocks the stop
                ctx = doc.get("hookSpecificOutput", {}).get("additionalContext", "")
                assert doc.get("decision") == "block" or ctx, body

            payload = {
                "session_id": sid,
                "cwd": str(root),
                "hook_event_name": "Stop",
                "stop_hook_active": False,
            }
            return json.dumps(payload), check

        # warm-up: the first requests pay imports and SQLite page-ins
        for i in range(5):
            timed(hook, empty_event(i)[0], hook_env)
            timed(["curl", "-s", "-o", "/dev/null", f"{url}/api/ping"])

        ping = [timed(["curl", "-s", "-o", "/dev/null", f"{url}/api/ping"])[0] for _ in range(n)]
        sh_true = [timed(["sh", "-c", "true"])[0] for _ in range(n)]
        bash_true = [timed(["bash", "-c", "true"])[0] for _ in range(n)]
        py = [timed([sys.executable, "-c", "pass"])[0] for _ in range(max(n // 4, 5))]
        figures = {}
        down_env = {**hook_env, "TMA1_PORT": str(free_port())}
        for f, hook in hooks.items():
            figures[f] = {
                "empty": series(empty_event, hook),
                "digest": series(digest_event, hook),
                "stop": series(stop_event, hook),
                "down": [timed(hook, empty_event(0)[0], down_env)[0] for _ in range(n)],
            }

        wedged_sock = socket.socket()
        wedged_sock.bind(("127.0.0.1", 0))
        wedged_sock.listen(64)
        held: list[socket.socket] = []
        stop_flag = threading.Event()

        def accept() -> None:
            wedged_sock.settimeout(0.1)
            while not stop_flag.is_set():
                with contextlib.suppress(OSError):
                    held.append(wedged_sock.accept()[0])

        threading.Thread(target=accept, daemon=True).start()
        wedged_env = {**hook_env, "TMA1_PORT": str(wedged_sock.getsockname()[1])}
        for f, hook in hooks.items():
            figures[f]["wedged"] = [
                timed(hook, empty_event(0)[0], wedged_env)[0] for _ in range(min(n, 10))
            ]
        stop_flag.set()
        for c in held:
            c.close()
        wedged_sock.close()

        base = statistics.median(ping)
        print(f"hook script round trip, process start to exit, ms (n={n}; ratio = p50 / curl p50)")
        print(f"  {'':<34} {'p50':>7} {'p90':>7} {'p99':>7} {'max':>7}  ratio")
        row("curl GET /api/ping (baseline)", ping, base)
        row("sh -c true", sh_true, base)
        row("bash -c true", bash_true, base)
        row("python -c pass", py, base, "what a Python hook pays before any work")
        for f, fig in figures.items():
            row(f"{f} hook: empty answer", fig["empty"], base, "PostToolUse, nothing to say")
            row(f"{f} hook: digest", fig["digest"], base, "UserPromptSubmit → <tma1-context>")
            row(f"{f} hook: Stop block", fig["stop"], base, "Stop → blocked")
            row(f"{f} hook: server down", fig["down"], base, "refused → empty, exit 0")
            row(f"{f} hook: wedged server", fig["wedged"], base, "never answers → the 2 s cap")
            ok = stats(fig["down"])["max"] < 600
            print(
                f"{f}: server down, max {stats(fig['down'])['max']:.1f} ms: "
                f"{'within' if ok else 'OVER'} the 0.6 s bound"
            )
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
