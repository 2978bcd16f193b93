"""`tma1 demo` from start to end: workspace, server, install, session, report, clean-up."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TextIO

from tma1.config import Settings
from tma1.demo.agent import DemoAgent
from tma1.demo.output import DemoError, Out
from tma1.demo.server import CONTEXT_THRESHOLD, DemoServer, free_port, wait_for
from tma1.demo.session import make_project, play_session
from tma1.engine.anomaly import Kind
from tma1.engine.rules import SPECS

# The seed's six: the kinds the demo's scripted session makes fire. The gates table lists
# every rule there is (SPECS), so a rule added as one module shows up there too.
KINDS = tuple(k.value for k in Kind)
# The script's own cap is 2 s too; the demo sets it so that on a busy machine (CI, a laptop
# compiling) it never loses a line, whatever the default becomes. Each hook call may take
# up to 2 s.
HOOK_TIMEOUT_S = "2"


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
    wait_for(
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
    for kind in SPECS:
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


def run_demo(*, keep: bool = False, port: int | None = None, stream: TextIO | None = None) -> int:
    out = Out(stream or sys.stdout)
    if not shutil.which("curl"):
        out.line("tma1 demo needs curl (the hook script posts with it); install it first.")
        return 1
    started = time.monotonic()
    # `kill` must not orphan the server (it runs in its own session) or leave files behind.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.default_int_handler)
    with tempfile.TemporaryDirectory(prefix="tma1-demo-", ignore_cleanup_errors=True) as tmp:
        root = Path(tmp)
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
        # A BrokenPipeError (`tma1 demo | head`) goes on to the command line's handler,
        # which every command shares: quiet, exit 141 as SIGPIPE would.
        finally:
            server.stop()


def install_into(home: Path, settings: Settings) -> tuple[list[str], Path]:
    """`tma1 install --adapter claude-code` into a throw-away HOME; returns the program and
    arguments the agent would spawn (the exec form: `command` + `args`), read back from the
    settings.json that install wrote."""
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
        (h["command"], *h.get("args", []))
        for g in doc["hooks"]["UserPromptSubmit"]
        for h in g["hooks"]
        if "tma1-hook" in h.get("command", "")
    }
    if len(commands) != 1:
        raise DemoError(f"install wrote {len(commands)} tma1 hooks into {settings_json}")
    return list(commands.pop()), settings_json


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
    out.line(f"  hook        {shlex.join(command)}")
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
    out.line(f"Dashboard: {out.bold(server.login_url())}  {out.dim('(a one-time login URL)')}")
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
