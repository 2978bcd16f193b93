"""`tma1 demo`: a scripted agent session against a real server, through the real hook script.

Everything is real except the agent: a `tma1 serve` process on a free loopback port with a
temporary data dir, a temporary git project whose files are really written (by the agent's
Edits and, once, by "a teammate" outside the agent), a Claude Code transcript that grows
with usage lines, and the installed hook script run with `sh -c` and the event JSON on
stdin, exactly as Claude Code runs it. What the script prints is what the agent would read.

The rules work in real time (30-minute and 10-minute windows), so the session is scripted
to make each finding fire within seconds: three failures in a row, an outside write between
a Read and an Edit, a transcript that crosses a lowered context-pressure threshold.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import httpx

from tma1.config import Settings
from tma1.engine.anomaly import Kind
from tma1.engine.digest import stop_block_reason

KINDS = tuple(k.value for k in Kind)
CONTEXT_THRESHOLD = 30_000
# The script's own cap is 2 s too; the demo sets it so that on a busy machine (CI, a laptop
# compiling) it never loses a line, whatever the default becomes. Each hook call may take
# up to 2 s.
HOOK_TIMEOUT_S = "2"
_FINDING = re.compile(r"\[(high|medium|low)\] ([a-z_]+):")

CART_V1 = '''\
"""Shopping cart totals."""

DISCOUNTS = {None: 0.0, "staff": 0.2}


def total(prices, customer=None):
    subtotal = sum(prices)
    return subtotal * (1 - DISCOUNTS[customer])
'''
# What a teammate saves while the agent is working: a new helper, one line changed.
CART_TEAMMATE = CART_V1.replace(
    "def total(",
    "def with_tax(amount, rate=0.2):\n    return round(amount * (1 + rate), 2)\n\n\ndef total(",
)
TEST_CART = """\
from cart import total


def test_plain_total():
    assert total([10, 20]) == 30


def test_vip_discount():
    assert total([100], customer="vip") == 90
"""
FAILURE = """\
Exit code 1
.F                                                                       [100%]
=================================== FAILURES ===================================
______________________________ test_vip_discount _______________________________

    def test_vip_discount():
>       assert total([100], customer="vip") == 90

test_cart.py:9:
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _

prices = [100], customer = 'vip'

    def total(prices, customer=None):
        subtotal = sum(prices)
>       return subtotal * (1 - DISCOUNTS[customer])
E       KeyError: 'vip'

cart.py:12: KeyError
=========================== short test summary info ============================
FAILED test_cart.py::test_vip_discount - KeyError: 'vip'
1 failed, 1 passed in 0.03s"""
TEST_COMMAND = "python -m pytest -q test_cart.py"


class DemoError(RuntimeError):
    pass


# --- output ----------------------------------------------------------------------------------


_ASCII = str.maketrans({"✓": "+", "✗": "x", "✎": "*", "⇒": "=>", "│": "|", "—": "-", "…": "..."})


class Out:
    """Readable terminal output; colour only on a terminal and without NO_COLOR."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.color = stream.isatty() and not os.environ.get("NO_COLOR")

    def _c(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color else text

    def bold(self, text: str) -> str:
        return self._c("1", text)

    def dim(self, text: str) -> str:
        return self._c("2", text)

    def green(self, text: str) -> str:
        return self._c("32", text)

    def yellow(self, text: str) -> str:
        return self._c("33", text)

    def red(self, text: str) -> str:
        return self._c("31", text)

    def line(self, text: str = "") -> None:
        encoding = getattr(self.stream, "encoding", None) or "utf-8"
        try:
            text.encode(encoding)
        except (UnicodeEncodeError, LookupError):
            # A terminal that is not UTF-8 (LANG=…ISO-8859-1): plain symbols, never a crash.
            text = text.translate(_ASCII).encode(encoding, "replace").decode(encoding)
        print(text, file=self.stream, flush=True)

    def told(self, body: str, how: str) -> None:
        self.line(f"       {self.yellow('⇒ the agent was told')} {self.dim('(' + how + ')')}")
        for raw in body.splitlines():
            for piece in textwrap.wrap(raw, 92, subsequent_indent="  ") or [""]:
                self.line(f"       {self.dim('│')} {piece}")


# --- the server --------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class DemoServer:
    data_dir: Path
    port: int
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        env = {
            k: v
            for k, v in os.environ.items()
            # the user's own tma1 settings must not leak in (their database, above all)
            if not k.startswith("TMA1_")
        }
        env.update(
            TMA1_DATA_DIR=str(self.data_dir),
            TMA1_PORT=str(self.port),
            TMA1_HOST="127.0.0.1",
            TMA1_CONTEXT_PRESSURE_THRESHOLD=str(CONTEXT_THRESHOLD),
            TMA1_LOG_LEVEL="WARNING",
        )
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tma1.cli", "serve"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in the terminal reaches the demo, which stops us
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise DemoError(f"tma1 serve exited early:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/api/health", timeout=1, trust_env=False).is_success:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise DemoError(f"tma1 serve did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def get(self, path: str, **params: Any) -> Any:
        r = httpx.get(f"{self.url}{path}", params=params, timeout=10, trust_env=False)
        r.raise_for_status()
        return r.json()

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


# --- the scripted agent ------------------------------------------------------------------------


@dataclass
class Told:
    step: int
    how: str  # "digest" | "Stop block"
    kinds: list[str]


@dataclass
class DemoAgent:
    """Plays Claude Code: fires hook events through the installed script, writes files,
    and appends usage lines to its transcript."""

    command: str
    env: dict[str, str]
    project: Path
    transcript: Path
    out: Out
    session_id: str = field(default_factory=lambda: f"demo-{uuid.uuid4()}")
    step: int = 0
    told: list[Told] = field(default_factory=list)
    tool_calls: int = 0
    hook_ms: list[float] = field(default_factory=list)

    # -- plumbing --

    def hook(self, event: str, **fields: Any) -> str:
        payload = {
            "session_id": self.session_id,
            "transcript_path": str(self.transcript),
            "cwd": str(self.project),
            "permission_mode": "default",
            "hook_event_name": event,
            **fields,
        }
        t0 = time.perf_counter()
        r = subprocess.run(
            ["/bin/sh", "-c", self.command],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.project,
            timeout=30,
        )
        self.hook_ms.append((time.perf_counter() - t0) * 1000)
        if r.returncode != 0:  # the script promises exit 0 whatever happens
            raise DemoError(f"the hook script exited {r.returncode}: {r.stderr.strip()}")
        return r.stdout

    def usage(self, occupancy: int, text: str) -> None:
        """One assistant API response in the transcript, as Claude Code writes it."""
        msg_id = f"msg_{uuid.uuid4().hex[:24]}"
        line = {
            "type": "assistant",
            "uuid": str(uuid.uuid4()),
            "parentUuid": None,
            "sessionId": self.session_id,
            "timestamp": datetime.now(UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "isSidechain": False,
            "cwd": str(self.project),
            "requestId": f"req_{uuid.uuid4().hex[:24]}",
            "message": {
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": text}],
                "usage": {
                    "input_tokens": 6,
                    "cache_read_input_tokens": occupancy - 1_206,
                    "cache_creation_input_tokens": 1_200,
                    "output_tokens": 180,
                },
            },
        }
        with self.transcript.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")

    def say(self, what: str, detail: str = "") -> None:
        self.step += 1
        tail = f"  {self.out.dim(detail)}" if detail else ""
        self.out.line(f"  {self.step:>2}  {what}{tail}")

    def show(self, body: str, how: str) -> None:
        if not body:
            return
        shown = body
        if how == "Stop block":
            shown = f"Stop blocked; the agent reads:\n{stop_block_reason(body) or body}"
        self.out.told(shown, how)
        kinds = [m.group(2) for m in _FINDING.finditer(body)]
        self.told.append(Told(step=self.step, how=how, kinds=kinds))

    # -- the agent's moves --

    def session_start(self) -> None:
        self.say("SessionStart", "a new Claude Code session in the project")
        self.hook("SessionStart", source="startup")

    def prompt(self, text: str) -> str:
        self.say(f'UserPromptSubmit  "{text}"')
        body = self.hook("UserPromptSubmit", prompt=text)
        self.show(body, "digest before its next turn")
        if not body:
            self.out.line(
                f"       {self.out.dim('(nothing new to say: the hook printed nothing)')}"
            )
        return body

    def _tool(self, tool: str, tool_input: dict[str, Any], run: Callable[[], Any]) -> None:
        self.tool_calls += 1
        tid = f"toolu_{uuid.uuid4().hex[:20]}"
        base = {"tool_name": tool, "tool_input": tool_input, "tool_use_id": tid}
        self.hook("PreToolUse", **base)
        response, failed = run()
        if failed:
            self.hook("PostToolUseFailure", error=response, is_interrupt=False, **base)
        else:
            self.hook("PostToolUse", tool_response=response, **base)

    def read(self, name: str) -> None:
        path = self.project / name
        self.say(f"Read {name}")

        def run() -> tuple[Any, bool]:
            content = path.read_text()
            lines = content.count("\n")
            return {
                "type": "text",
                "file": {
                    "filePath": str(path),
                    "content": content,
                    "numLines": lines,
                    "startLine": 1,
                    "totalLines": lines,
                },
            }, False

        self._tool("Read", {"file_path": str(path)}, run)

    def edit(self, name: str, old: str, new: str, note: str = "") -> None:
        path = self.project / name
        self.say(f"Edit {name}", note)

        def run() -> tuple[Any, bool]:
            text = path.read_text()
            path.write_text(text.replace(old, new, 1))  # a real write, seen by the watcher
            return {"filePath": str(path), "oldString": old, "newString": new}, False

        self._tool("Edit", {"file_path": str(path), "old_string": old, "new_string": new}, run)

    def bash(self, command: str, result: str, *, failed: bool, note: str = "") -> None:
        self.say(f"Bash  {command}", note)

        def run() -> tuple[Any, bool]:
            if failed:
                return result, True
            return {"stdout": result, "stderr": "", "interrupted": False, "isImage": False}, False

        self._tool("Bash", {"command": command, "description": "Run the tests"}, run)

    def stop(self, *, active: bool = False) -> str:
        label = "Stop" + ("  (stop_hook_active: true)" if active else "")
        self.say(label, "the agent wants to end its turn")
        body = self.hook("Stop", stop_hook_active=active, last_assistant_message="Done.")
        if body:
            self.show(body, "Stop block")
        elif active:
            self.out.line(
                f"       {self.out.dim('(loop guard: silent while a block is acted on)')}"
            )
        else:
            self.out.line(f"       {self.out.dim('(nothing unresolved: the turn may end)')}")
        return body


# --- the session -------------------------------------------------------------------------------


def _git(project: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=tma1 demo", "-c", "user.email=demo@localhost", *args],
        cwd=project,
        check=True,
        capture_output=True,
    )


def make_project(root: Path) -> Path:
    project = root / "shop"
    project.mkdir()
    (project / "cart.py").write_text(CART_V1)
    (project / "test_cart.py").write_text(TEST_CART)
    (project / ".gitignore").write_text("__pycache__/\n")
    if shutil.which("git"):
        _git(project, "init", "-q")
        _git(project, "add", "-A")
        _git(project, "commit", "-q", "-m", "cart totals")
    return project.resolve()


def _wait(pred: Callable[[], bool], timeout: float, step: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if pred():
                return True
        except httpx.HTTPError:
            pass
        time.sleep(step)
    return False


def play_session(agent: DemoAgent, server: DemoServer) -> None:
    out = agent.out
    sid = agent.session_id

    def watcher_ready() -> bool:
        files = server.get("/api/health")["sensors"].get("files", {})
        return any(p.get("ready") for p in files.get("projects", {}).values())

    def pending(kind: str) -> bool:
        found = server.get("/api/anomalies/preview", session_id=sid)
        return any(f["kind"] == kind for f in found["findings"])

    agent.session_start()
    if not _wait(watcher_ready, 15):
        out.line(out.red("       the file watcher did not start; external changes go unseen"))
    agent.usage(9_800, "I'll look at cart.py first.")
    agent.prompt("Give VIP customers a 10% discount")
    agent.read("cart.py")

    agent.say(out.bold("✎ a teammate saves cart.py in their editor"), "outside the agent")
    (agent.project / "cart.py").write_text(CART_TEAMMATE)
    if not _wait(lambda: pending(Kind.EXTERNAL_MODIFIED_DURING_SESSION), 15):
        out.line(out.red("       the watcher did not report the outside change in 15 s"))

    agent.usage(14_200, "Adding the VIP rate.")
    agent.prompt("Sounds good, go ahead")
    agent.edit(
        "cart.py",
        'DISCOUNTS = {None: 0.0, "staff": 0.2}',
        'DISCOUNTS = {None: 0.0, "staff": 0.2, "VIP": 0.1}',
        "without re-reading it since the teammate's save",
    )
    for n, occupancy in enumerate((19_500, 24_100, 31_700), 1):
        agent.usage(occupancy, "Running the tests.")
        agent.bash(TEST_COMMAND, FAILURE, failed=True, note=f"fails ({n}/3): KeyError: 'vip'")
    note = (
        "(transcript: the last request sent 31,700 prompt tokens; "
        f"the demo threshold is {CONTEXT_THRESHOLD:,})"
    )
    out.line(f"       {out.dim(note)}")
    agent.prompt("Why is it still failing?")
    agent.stop()
    agent.stop(active=True)

    agent.usage(32_600, "Reading the failing test, as tma1 suggested.")
    agent.read("test_cart.py")
    agent.usage(33_400, "The test says 'vip', lower-case; re-reading cart.py.")
    agent.read("cart.py")
    agent.edit("cart.py", '"VIP": 0.1', '"vip": 0.1', "the fix")
    agent.usage(34_100, "Re-running the tests.")
    agent.bash(
        TEST_COMMAND,
        "..                                     [100%]\n2 passed in 0.02s",
        failed=False,
        note="passes",
    )
    agent.stop()
    agent.say("PreCompact", "the user runs /compact, as the digest suggested")
    agent.hook("PreCompact", trigger="manual", custom_instructions="")
    agent.say("SessionEnd")
    agent.hook("SessionEnd", reason="prompt_input_exit")


# --- the report --------------------------------------------------------------------------------


def report(agent: DemoAgent, server: DemoServer, out: Out) -> list[str]:
    """Prints what each kind told the agent and the three gates; returns missing kinds."""
    out.line()
    out.line(out.bold("What the agent was told, per kind"))
    missing = []
    for kind in KINDS:
        where = [f"{t.how.split()[0]} at step {t.step}" for t in agent.told if kind in t.kinds]
        if where:
            out.line(f"  {out.green('✓')} {kind:<34} {', '.join(where)}")
        else:
            missing.append(kind)
            out.line(f"  {out.red('✗')} {kind:<34} never delivered")

    # The emit log is written asynchronously (the hook never waits for it): give it a moment.
    _wait(
        lambda: (
            len(server.get("/api/anomalies", session_id=agent.session_id)["emits"])
            >= sum(len(t.kinds) for t in agent.told)
        ),
        5,
    )
    emits = server.get("/api/anomalies", session_id=agent.session_id, limit=100)["emits"]
    out.line(out.dim(f"  emit log: {len(emits)} rows in tma1_anomaly_emits for this session"))

    budget = server.get("/api/anomalies/budget", days=1, budget=5)
    follow = server.get("/api/anomalies/follow-rate", days=1, window=5)
    precision = server.get("/api/anomalies/precision", days=1)
    out.line()
    out.line(
        out.bold("Validation gates")
        + out.dim("  (GET /api/anomalies/budget, /follow-rate, /precision — today)")
    )
    out.line(
        out.dim(
            f"  {'kind':<34} {'emits (≤5/day)':<16} {'follow-rate (≥30%, 5 calls)':<28} "
            "precision (≥70%)"
        )
    )
    for kind in KINDS:
        b = budget["kinds"].get(kind, {})
        f = follow["kinds"].get(kind, {})
        p = precision["kinds"].get(kind, {})
        b_txt = f"{b.get('total', 0)} {'ok' if b.get('pass', True) else 'OVER'}"
        if f.get("rate") is None:
            f_txt = "no emits"
        else:
            f_txt = f"{f['rate']:.0%} ({f['followed']}/{f['emits']})"
        p_txt = "no labels yet" if p.get("precision") is None else f"{p['precision']:.0%}"
        out.line(f"  {kind:<34} {b_txt:<16} {f_txt:<28} {p_txt}")
    out.line(out.dim("  precision needs a human: label each finding TP or FP on the dashboard"))
    return missing


# --- entry point --------------------------------------------------------------------------------


@contextmanager
def _workspace() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="tma1-demo-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_demo(*, keep: bool = False, port: int | None = None, stream: TextIO | None = None) -> int:
    out = Out(stream or sys.stdout)
    if not shutil.which("curl"):
        out.line("tma1 demo needs curl (the hook script posts with it); install it first.")
        return 1
    started = time.monotonic()
    # `kill` must not orphan the server (it runs in its own session) or leave files behind.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_interrupt)
    with _workspace() as root:
        data_dir = root / "data"
        data_dir.mkdir()
        server = DemoServer(
            data_dir=data_dir, port=port or free_port(), log_path=root / "serve.log"
        )
        try:
            return _run(out, root, server, keep=keep, started=started)
        except DemoError as exc:
            out.line(out.red(f"tma1 demo failed: {exc}"))
            return 1
        except KeyboardInterrupt:
            out.line("\nstopped.")
            return 130
        except BrokenPipeError:  # `tma1 demo | head`: the reader left; stop quietly
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return 1
        finally:
            server.stop()


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def install_into(home: Path, settings: Settings) -> tuple[str, Path]:
    """`tma1 install --adapter claude-code` into a throw-away HOME; returns the command the
    agent would run, read back from the settings.json that install wrote."""
    from tma1.adapters import get_adapters
    from tma1.adapters.registration import InstallState, plan_all

    home.mkdir()
    (adapter,) = get_adapters("claude-code", settings, {"HOME": str(home)})
    state = InstallState.load(settings.data_dir)
    for reg, change in plan_all(adapter.registrations, state, installing=True):
        change.apply()
        reg.record(change, state, installing=True)
    state.save()
    settings_json = home / ".claude" / "settings.json"
    doc = json.loads(settings_json.read_text(encoding="utf-8"))
    commands = {
        h["command"]
        for g in doc["hooks"]["UserPromptSubmit"]
        for h in g["hooks"]
        if "tma1-hook" in h.get("command", "")
    }
    if len(commands) != 1:
        raise DemoError(f"install wrote {len(commands)} tma1 hooks into {settings_json}")
    return commands.pop(), settings_json


def _run(out: Out, root: Path, server: DemoServer, *, keep: bool, started: float) -> int:
    project = make_project(root)
    transcript = root / "claude" / "projects" / "-shop" / "session.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.touch()
    out.line(out.bold("tma1 demo") + " — a scripted Claude Code session through the real hook")
    out.line()
    server.start()
    settings = Settings(data_dir=server.data_dir, port=server.port)
    command, settings_json = install_into(root / "home", settings)
    env = dict(os.environ)
    env.update(
        TMA1_HOST="127.0.0.1",
        TMA1_PORT=str(server.port),
        TMA1_DATA_DIR=str(server.data_dir),
        TMA1_HOOK_TIMEOUT=HOOK_TIMEOUT_S,
    )
    out.line(f"  server      {server.url}  {out.dim('(tma1 serve, SQLite in a temporary dir)')}")
    out.line(f"  project     {project}  {out.dim('(a fresh git repository, watched)')}")
    out.line(f"  hook        {command}")
    out.line(f"  installed   {settings_json}  {out.dim('(tma1 install, in a temporary HOME)')}")
    out.line(f"  transcript  {transcript}")
    out.line(f"  threshold   context_pressure at {CONTEXT_THRESHOLD:,} prompt tokens (demo value)")
    out.line()
    agent = DemoAgent(command=command, env=env, project=project, transcript=transcript, out=out)
    play_session(agent, server)
    missing = report(agent, server, out)
    ms = sorted(agent.hook_ms)
    out.line()
    out.line(
        out.dim(
            f"  {len(ms)} hook calls through the script: median {ms[len(ms) // 2]:.0f} ms, "
            f"max {ms[-1]:.0f} ms; demo took {time.monotonic() - started:.1f} s"
        )
    )
    out.line()
    if missing:
        out.line(out.red(f"Not delivered: {', '.join(missing)} (server log: {server.log_tail()})"))
    else:
        out.line(out.green("All six kinds reached the agent."))
    out.line(f"Dashboard: {out.bold(server.url + '/')}")
    if keep:
        out.line(
            "The server keeps running for the dashboard; press Ctrl-C to stop it "
            "(the demo's temporary files are deleted then)."
        )
        # Ctrl-C, or `kill` (SIGTERM), ends the wait and the cleanup runs. SIGINT is set
        # explicitly: a shell starts background jobs with it ignored.
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            assert server.proc is not None
            server.proc.wait()
        except KeyboardInterrupt:
            out.line("\nstopping.")
    else:
        out.line(
            out.dim("(stopped and cleaned up; `tma1 demo --keep` leaves it running to browse)")
        )
    return 1 if missing else 0
