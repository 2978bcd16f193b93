"""A real `tma1 serve` child and N simulated agents posting hooks to it: shared by
tests/reliability/, tests/security/ and bench/bench_load.py.

Each agent is one session running a scripted turn (prompt, Read, Edit, Bash that fails
now and then, Stop) in a closed loop. Every payload carries a unique `tool_use_id`, so a
run can check afterwards that every hook answered 200 is in the store. The server's RSS is
sampled from /proc/PID/status once a second.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from conftest import LOOPBACK_TLS

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ServeProcess:
    """A real `python -m tma1.cli serve` child on a loopback port."""

    proc: subprocess.Popen[bytes]
    port: int
    data_dir: Path
    database_url: str | None
    log_path: Path
    token: str = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    @classmethod
    def start(
        cls,
        data_dir: Path,
        *,
        database_url: str | None = None,
        port: int | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 60.0,
        log_dir: Path | None = None,
        watch: bool = False,
        nofile: tuple[int, int] | None = None,
    ) -> ServeProcess:
        """`log_dir`: where the server's log goes (default: the data dir). `nofile`: the
        child's (soft, hard) limit on open files, as a service manager would start it
        (systemd's default soft limit is 1,024)."""
        data_dir.mkdir(parents=True, exist_ok=True)
        port = port or free_port()
        child_env = {
            **os.environ,
            "TMA1_DATA_DIR": str(data_dir),
            "TMA1_LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
        }
        child_env.pop("TMA1_DATABASE_URL", None)
        if database_url:
            child_env["TMA1_DATABASE_URL"] = database_url
        child_env.update(env or {})
        log_path = (log_dir or data_dir) / f"serve-{port}-{int(time.time() * 1000)}.log"

        def limits() -> None:
            if nofile is not None:
                import resource

                resource.setrlimit(resource.RLIMIT_NOFILE, nofile)

        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    *("-m", "tma1.cli", "serve", "--port", str(port)),
                    *(() if watch else ("--no-watch",)),
                ],
                env=child_env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=str(data_dir),
                preexec_fn=limits if nofile is not None else None,
            )
        sp = cls(
            proc=proc, port=port, data_dir=data_dir, database_url=database_url, log_path=log_path
        )
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"tma1 serve exited with {proc.returncode}:\n{sp.log_tail()}")
            try:
                if (
                    httpx.get(f"{sp.url}/api/ping", timeout=2, verify=LOOPBACK_TLS).status_code
                    == 200
                ):
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                sp.kill9()
                raise RuntimeError(f"tma1 serve did not come up:\n{sp.log_tail()}")
            time.sleep(0.05)
        sp.token = (data_dir / "hook-token").read_text(encoding="ascii").strip()
        return sp

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def rss_kb(self) -> int | None:
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        except (OSError, ValueError):
            return None
        return None

    def health(self) -> dict[str, Any]:
        return httpx.get(  # type: ignore[no-any-return]
            f"{self.url}/api/health",
            headers={"X-TMA1-Token": self.token},
            timeout=10,
            verify=LOOPBACK_TLS,
        ).json()

    def kill9(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        """Send `sig` and wait for the exit; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise


class PrivatePostgres:
    """A throw-away PostgreSQL cluster of our own (initdb + pg_ctl as user postgres), so a
    test or benchmark can stop and start the server without touching anyone else's."""

    def __init__(self) -> None:
        bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
        if not bins:
            raise RuntimeError("PostgreSQL server binaries are not installed")
        self.bin = bins[-1].parent
        self.dir = Path(tempfile.mkdtemp(prefix="tma1-pgpriv-"))
        self.port = free_port()
        self._as_postgres: list[str] = []
        if os.geteuid() == 0:
            import shutil

            shutil.chown(self.dir, user="postgres")
            self._as_postgres = ["runuser", "-u", "postgres", "--"]
        self._run("initdb", "-D", str(self.dir / "data"), "-A", "trust", "-U", "postgres")

    @staticmethod
    def available() -> bool:
        if not list(Path("/usr/lib/postgresql").glob("*/bin/initdb")):
            return False
        if os.geteuid() != 0:
            import pwd

            return pwd.getpwuid(os.geteuid()).pw_name == "postgres"
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            return False
        return True

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run(
            [*self._as_postgres, str(self.bin / tool), *args],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=120,
        )

    def start(self) -> None:
        opts = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c max_connections=100"
        )
        log = str(self.dir / "log")
        self._run("pg_ctl", "-D", str(self.dir / "data"), "-l", log, "-w", "-o", opts, "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.dir / "data"), "-m", mode, "-w", "stop")

    def url(self, db: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{db}"

    def create_database(self, name: str) -> str:
        from sqlalchemy import create_engine, text

        admin = create_engine(self.url(), isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
        return self.url(name)

    def destroy(self) -> None:
        import shutil

        with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
            self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)


def hook_headers(token: str) -> dict[str, str]:
    """One hook request's headers: a fresh nonce and its keyed hash, as the script sends."""
    from tma1.auth.hooktoken import hook_headers as auth

    return {**auth(token), "Content-Type": "application/json"}


def post_hook(srv: ServeProcess, payload: dict[str, Any], timeout: float = 10) -> httpx.Response:
    """One hook, posted as the hook script posts it."""
    return httpx.post(
        f"{srv.url}/api/hooks",
        json=payload,
        headers=hook_headers(srv.token),
        timeout=timeout,
        verify=LOOPBACK_TLS,
    )


def fail_build_three_times(srv: ServeProcess, session: str, cwd: str) -> None:
    """Three failing `make build` runs: enough for a Stop block (repeated_failed_build)."""
    for i in range(3):
        r = post_hook(
            srv,
            {
                "session_id": session,
                "hook_event_name": "PostToolUseFailure",
                "tool_name": "Bash",
                "tool_use_id": f"{session}-f{i}",
                "tool_input": {"command": "make build"},
                "error": "Exit code 2\nmake: *** [build] Error 1",
                "cwd": cwd,
            },
        )
        assert r.status_code == 200


def agent_turn(session: str, marker: str, step: int, cwd: str) -> list[dict[str, Any]]:
    """One scripted turn; every payload's `tool_use_id` starts with `marker`."""
    base = {"session_id": session, "cwd": cwd, "transcript_path": f"{cwd}/t-{session}.jsonl"}
    path = f"{cwd}/src/mod_{step % 5}.py"
    fails = step % 4 == 3
    bash_post: dict[str, Any] = {
        **base,
        "hook_event_name": "PostToolUseFailure" if fails else "PostToolUse",
        "tool_name": "Bash",
        "tool_use_id": f"{marker}-bash-post",
        "tool_input": {"command": "pytest -q tests"},
    }
    if fails:
        bash_post["error"] = "Exit code 1\nFAILED tests/test_mod.py::test_x - assert 1 == 2"
    else:
        bash_post["tool_response"] = {"stdout": "3 passed in 0.1s", "stderr": "", "exitCode": 0}
    return [
        {**base, "hook_event_name": "UserPromptSubmit", "prompt": "go on",
         "tool_use_id": f"{marker}-prompt"},
        {**base, "hook_event_name": "PreToolUse", "tool_name": "Read",
         "tool_use_id": f"{marker}-read-pre", "tool_input": {"file_path": path}},
        {**base, "hook_event_name": "PostToolUse", "tool_name": "Read",
         "tool_use_id": f"{marker}-read-post", "tool_input": {"file_path": path},
         "tool_response": {"type": "text", "file": {"filePath": path, "content": "x = 1\n"}}},
        {**base, "hook_event_name": "PreToolUse", "tool_name": "Edit",
         "tool_use_id": f"{marker}-edit-pre",
         "tool_input": {"file_path": path, "old_string": "x = 1", "new_string": "x = 2"}},
        {**base, "hook_event_name": "PostToolUse", "tool_name": "Edit",
         "tool_use_id": f"{marker}-edit-post",
         "tool_input": {"file_path": path, "old_string": "x = 1", "new_string": "x = 2"},
         "tool_response": {"filePath": path, "success": True}},
        {**base, "hook_event_name": "PreToolUse", "tool_name": "Bash",
         "tool_use_id": f"{marker}-bash-pre", "tool_input": {"command": "pytest -q tests"}},
        bash_post,
        {**base, "hook_event_name": "Stop", "stop_hook_active": True,
         "tool_use_id": f"{marker}-stop"},
    ]  # fmt: skip


@dataclass
class LoadResult:
    agents: int
    duration_s: float
    latencies_ms: list[float] = field(default_factory=list)
    # When each answered request started, in seconds since the run began (same order).
    started_s: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    ok_markers: list[str] = field(default_factory=list)
    rss_kb: list[tuple[float, int]] = field(default_factory=list)
    budget_ms: float | None = None

    @property
    def requests(self) -> int:
        return sum(self.statuses.values()) + sum(self.errors.values())

    @property
    def server_errors(self) -> int:
        return sum(n for s, n in self.statuses.items() if s >= 500)

    def pct(self, p: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        xs = sorted(self.latencies_ms)
        return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]

    def window(self, t0: float, t1: float) -> list[float]:
        """Latencies of the requests that started in [t0, t1) seconds into the run."""
        return [
            lat for lat, t in zip(self.latencies_ms, self.started_s, strict=True) if t0 <= t < t1
        ]

    def rss_growth_kb(self, warmup_fraction: float = 0.25) -> tuple[int, int, int]:
        """(RSS after warm-up, RSS at the end, max) in kB; warm-up = the first quarter."""
        if not self.rss_kb:
            return (0, 0, 0)
        t0 = self.rss_kb[0][0]
        cut = t0 + (self.rss_kb[-1][0] - t0) * warmup_fraction
        after = [kb for t, kb in self.rss_kb if t >= cut] or [self.rss_kb[-1][1]]
        return (after[0], after[-1], max(kb for _, kb in self.rss_kb))

    def summary(self) -> dict[str, Any]:
        warm, end, peak = self.rss_growth_kb()
        over = sum(1 for x in self.latencies_ms if x > self.budget_ms) if self.budget_ms else None
        return {
            "agents": self.agents,
            "duration_s": round(self.duration_s, 1),
            "requests": self.requests,
            "throughput_rps": round(self.requests / self.duration_s, 1) if self.duration_s else 0,
            "statuses": dict(sorted(self.statuses.items())),
            "client_errors": self.errors,
            "5xx": self.server_errors,
            "p50_ms": round(self.pct(50), 2),
            "p95_ms": round(self.pct(95), 2),
            "p99_ms": round(self.pct(99), 2),
            "max_ms": round(max(self.latencies_ms), 2) if self.latencies_ms else None,
            "mean_ms": round(statistics.fmean(self.latencies_ms), 2) if self.latencies_ms else None,
            "over_budget": over,
            "rss_after_warmup_mb": round(warm / 1024, 1),
            "rss_end_mb": round(end / 1024, 1),
            "rss_max_mb": round(peak / 1024, 1),
            "rss_growth_after_warmup_mb": round((end - warm) / 1024, 1),
        }


def run_agents(
    url: str,
    token: str,
    *,
    agents: int = 8,
    duration_s: float = 60.0,
    think_ms: float = 0.0,
    rss_of: ServeProcess | None = None,
    stop_event: threading.Event | None = None,
    run_id: str | None = None,
    keepalive: bool = False,
    timeout_s: float = 10.0,
    cwd: str = "/tmp/tma1-bench",
) -> LoadResult:
    """Drive `agents` closed-loop sessions for `duration_s` (or until `stop_event`)."""
    run_id = run_id or uuid.uuid4().hex[:8]
    stop_event = stop_event or threading.Event()
    result = LoadResult(agents=agents, duration_s=0.0)
    lock = threading.Lock()
    start = time.monotonic()
    perf0 = time.perf_counter()
    end = start + duration_s

    def agent(i: int) -> None:
        session = f"bench-{run_id}-{i}"
        limits = httpx.Limits(max_keepalive_connections=1 if keepalive else 0)
        lat: list[float] = []
        began: list[float] = []
        statuses: dict[int, int] = {}
        errors: dict[str, int] = {}
        ok: list[str] = []
        step = 0
        with httpx.Client(
            base_url=url, timeout=timeout_s, limits=limits, verify=LOOPBACK_TLS
        ) as client:
            while time.monotonic() < end and not stop_event.is_set():
                for payload in agent_turn(session, f"{run_id}-{i}-{step}", step, cwd):
                    if time.monotonic() >= end or stop_event.is_set():
                        break
                    body = json.dumps(payload).encode()
                    t = time.perf_counter()
                    try:
                        r = client.post("/api/hooks", content=body, headers=hook_headers(token))
                    except httpx.HTTPError as exc:
                        errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                        continue
                    lat.append((time.perf_counter() - t) * 1000)
                    began.append(t - perf0)
                    statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
                    if r.status_code == 200:
                        ok.append(payload["tool_use_id"])
                    if think_ms:
                        time.sleep(think_ms / 1000)
                step += 1
        with lock:
            result.latencies_ms.extend(lat)
            result.started_s.extend(began)
            result.ok_markers.extend(ok)
            for k, v in statuses.items():
                result.statuses[k] = result.statuses.get(k, 0) + v
            for k2, v in errors.items():
                result.errors[k2] = result.errors.get(k2, 0) + v

    def sampler() -> None:
        assert rss_of is not None
        while time.monotonic() < end and not stop_event.is_set():
            kb = rss_of.rss_kb()
            if kb is not None:
                result.rss_kb.append((time.monotonic() - start, kb))
            stop_event.wait(1.0)

    threads = [threading.Thread(target=agent, args=(i,), daemon=True) for i in range(agents)]
    if rss_of is not None:
        threads.append(threading.Thread(target=sampler, daemon=True))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=duration_s + timeout_s + 30)
    result.duration_s = time.monotonic() - start
    return result


def stored_markers(database_url: str, prefix: str) -> set[str]:
    """The tool_use_ids in the store that start with `prefix`."""
    from sqlalchemy import select

    from tma1.store import Store
    from tma1.store.schema import hook_events

    store = Store.open(database_url, migrate=False)
    try:
        with store.connect() as conn:
            q = select(hook_events.c.tool_use_id).where(
                hook_events.c.tool_use_id.like(prefix.replace("_", "\\_") + "%", escape="\\")
            )
            return {r[0] for r in conn.execute(q)}
    finally:
        store.close()
