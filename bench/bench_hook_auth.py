"""What the hook script's proof of who answers costs (issue 31): the script of a given
git revision (default: the last one before the nonce, 114ceab) against that revision's own
`tma1 serve`, and this checkout's script against this checkout's server, timed alternately
in one run (one call of each in turn, so both meet the same machine load).

Each figure is one `sh -c <script>` with the event on stdin, fork to exit: a PostToolUse
(stored, nothing to say, so no answer to check) and a UserPromptSubmit that gets a
`<tma1-context>` digest (the answer's signature checked: a second hash). Prints p50/p90
per revision and the after/before ratio of the p50s.

    .venv/bin/python bench/bench_hook_auth.py [--n 200] [--ref 114ceab] [--flavor bash|sh|both]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(src: Path, data: Path, port: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMA1_")}
    env.update(PYTHONPATH=str(src), TMA1_DATA_DIR=str(data), TMA1_LOG_LEVEL="WARNING")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tma1.cli", "serve", "--port", str(port), "--no-watch"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(300):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/ping", timeout=1).is_success:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit(f"tma1 serve from {src} did not start")


def script(src: Path, data: Path, port: int, flavor: str, out: Path) -> Path:
    code = (
        "import sys; from pathlib import Path; from tma1.config import Settings;"
        "from tma1.adapters.hookscript import write_script;"
        f"write_script(Settings(data_dir=Path({str(data)!r}), port={port}), 'claude-code',"
        f" path=Path({str(out)!r}), flavor={flavor!r})"
    )
    subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(src)}, check=True
    )
    return out


def fire(path: Path, payload: dict[str, object]) -> tuple[float, str]:
    t0 = time.perf_counter()
    r = subprocess.run(
        ["sh", "-c", shlex.quote(str(path))],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
    )
    return (time.perf_counter() - t0) * 1000, r.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--ref", default="114ceab")
    ap.add_argument("--flavor", choices=("bash", "sh", "both"), default="both")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="tma1-bench-auth-"))
    old_src = root / "old"
    old_src.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", args.ref, "src"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(old_src)], input=archive, check=True)
    sides = {"before": old_src / "src", "after": REPO / "src"}
    procs = []
    try:
        rigs = {}
        for side, src in sides.items():
            data, port = root / f"data-{side}", free_port()
            procs.append(serve(src, data, port))
            rigs[side] = (src, data, port)
        flavors = ("bash", "sh") if args.flavor == "both" else (args.flavor,)
        print(
            f"hook script, fork to exit, ms (n={args.n}, alternating; {args.ref} vs this checkout)"
        )
        for flavor in flavors:
            paths = {
                side: script(src, data, port, flavor, root / f"{side}-{flavor}.sh")
                for side, (src, data, port) in rigs.items()
            }
            for event in ("PostToolUse", "UserPromptSubmit"):
                times: dict[str, list[float]] = {"before": [], "after": []}
                answered = {"before": 0, "after": 0}
                for i in range(args.n + 10):
                    for side in ("before", "after") if i % 2 else ("after", "before"):
                        sid = f"{flavor}-{event}-{i}"
                        if event == "UserPromptSubmit":
                            # three failures of one test first, so that the prompt gets a digest
                            for k in range(3):
                                fire(
                                    paths[side],
                                    {
                                        "session_id": sid,
                                        "hook_event_name": "PostToolUseFailure",
                                        "cwd": "/tmp",
                                        "tool_name": "Bash",
                                        "tool_input": {"command": "pytest tests/test_a.py"},
                                        "tool_use_id": f"{sid}-{k}",
                                        "error": "FAILED tests/test_a.py::test_x - assert 1 == 2",
                                    },
                                )
                        ms, out = fire(
                            paths[side],
                            {
                                "session_id": sid,
                                "hook_event_name": event,
                                "cwd": "/tmp",
                                "prompt": "go on",
                                "tool_name": "Read",
                                "tool_input": {"file_path": "/tmp/a.py"},
                            },
                        )
                        if i >= 10:  # warm-up
                            times[side].append(ms)
                            answered[side] += "<tma1-context>" in out
                p50 = {s: statistics.median(t) for s, t in times.items()}
                p90 = {s: statistics.quantiles(t, n=10)[8] for s, t in times.items()}
                print(
                    f"  {flavor:<4} {event:<17} before p50 {p50['before']:6.2f}"
                    f" p90 {p90['before']:6.2f}"
                    f"  after p50 {p50['after']:6.2f} p90 {p90['after']:6.2f}"
                    f"  ratio {p50['after'] / p50['before']:.2f}"
                    f"  (digests: {answered['before']}/{answered['after']})"
                )
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=30)


if __name__ == "__main__":
    main()
