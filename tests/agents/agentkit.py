"""The real agent binaries, a throw-away home, a real `tma1 serve`, a real git project.

Everything here stays on loopback: the agents talk to `fakemodel.FakeModel` on
127.0.0.1 and to tma1 on another loopback port; every switch that would make either
binary reach further (telemetry, updates, plugins, error reports) is off. Every process
a test starts is in its own process group and is killed by that group's id when the test
ends, whatever happened.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tma1.adapters.agents import SPECS

REPO = Path(__file__).resolve().parents[2]
VERSIONS_FILE = Path(__file__).with_name("versions.json")
AGENTS_DIR = REPO / ".agents"
BIN = AGENTS_DIR / "node_modules" / ".bin"
PACKAGES = {
    "claude-code": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "gemini": "@google/gemini-cli",
    "copilot": "@github/copilot",
}
# The command each agent's npm package installs: its `AgentSpec.executable`.
EXECUTABLES = {name: spec.executable for name, spec in SPECS.items()}

BUILD_SH = """#!/bin/sh
echo "compiling src/app.py"
echo "src/app.py:3: error: expected return value 3, got $(grep -c return src/app.py)"
exit 1
"""
APP_PY = "def answer():\n    # the build wants 3\n    return 1\n"

T = TypeVar("T")


def pinned_versions() -> dict[str, str]:
    data = json.loads(VERSIONS_FILE.read_text(encoding="utf-8"))
    return {k: str(v) for k, v in data.items() if not k.startswith("_")}


def installed_version(package: str) -> str | None:
    manifest = AGENTS_DIR / "node_modules" / package / "package.json"
    try:
        return str(json.loads(manifest.read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError):
        return None


def agent_binary(agent: str) -> Path:
    """The pinned binary, or skip (fail when TMA1_REQUIRE_AGENTS=1) saying why not."""
    package = PACKAGES[agent]
    want = pinned_versions()[package]
    have = installed_version(package)
    exe = BIN / EXECUTABLES[agent]
    reason = None
    if have is None or not exe.exists():
        reason = f"{package} is not installed under .agents/ (scripts/test installs it)"
    elif have != want:
        reason = f"{package} {have} is installed, tests/agents/versions.json pins {want}"
    if reason:
        if os.environ.get("TMA1_REQUIRE_AGENTS") == "1":
            pytest.fail(f"TMA1_REQUIRE_AGENTS=1: {reason}", pytrace=False)
        pytest.skip(reason)
    return exe


def _blob_id(path: Path) -> str:
    """git's blob id of a file (tma1 stores content hashes so)."""
    import hashlib

    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 30.0) -> T:
    """Poll `probe` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """Kill the process group `proc` leads (started with start_new_session=True)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str


@dataclass
class Rig:
    """One test's world: HOME, CODEX_HOME, tma1's data dir and port, a git project."""

    root: Path
    home: Path = field(init=False)
    codex_home: Path = field(init=False)
    tmp: Path = field(init=False)
    data_dir: Path = field(init=False)
    project: Path = field(init=False)
    port: int = field(default_factory=free_port)
    procs: list[subprocess.Popen[Any]] = field(default_factory=list)
    serve_proc: subprocess.Popen[Any] | None = None
    # A loaded 2-core machine can take longer than the hook script's 0.5 s cap or the
    # server's 400 ms insert budget, and then tma1 stays silent by design (the agent is
    # never held up) — which a test would read as a missing Stop block or digest. The
    # same allowance `tma1 demo` makes (docs/hooks.md); the bench sets None to measure
    # the hook exactly as installed.
    patience_s: float | None = 3.0

    def __post_init__(self) -> None:
        self.home = self.root / "home"
        self.codex_home = self.home / ".codex"
        self.data_dir = self.root / "tma1-data"
        self.project = self.root / "proj"
        # The agents' temp files (Claude Code's /tmp/claude-<uid>/<project>/ among them)
        # stay in the test's directory, removed with it, not in the system's temp dir.
        self.tmp = self.root / "tmp"
        # ~/.claude and ~/.codex: both agents are "on this machine" for `install --adapter all`.
        for d in (self.home, self.home / ".claude", self.codex_home, self.data_dir, self.tmp):
            d.mkdir(parents=True, exist_ok=True)
        self._make_project()

    # -- environment -----------------------------------------------------------------
    def env(self, **extra: str) -> dict[str, str]:
        keep = ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR", "SYSTEMROOT")
        env = {k: os.environ[k] for k in keep if k in os.environ}
        if self.patience_s is not None:
            env["TMA1_HOOK_TIMEOUT"] = str(self.patience_s)  # the hook script's cap
            env["TMA1_HOOK_DB_BUDGET_MS"] = str(int(self.patience_s * 1000))  # serve's
        env.update(
            HOME=str(self.home),
            TMPDIR=str(self.tmp),
            CODEX_HOME=str(self.codex_home),
            TMA1_DATA_DIR=str(self.data_dir),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_CACHE_HOME=str(self.home / ".cache"),
            XDG_DATA_HOME=str(self.home / ".local" / "share"),
            XDG_STATE_HOME=str(self.home / ".local" / "state"),
            # Nobody's proxy sees this traffic; none of it leaves loopback anyway.
            NO_PROXY="*",
            no_proxy="*",
            GIT_CONFIG_NOSYSTEM="1",
        )
        env.update(extra)
        return env

    def _make_project(self) -> None:
        p = self.project
        (p / "src").mkdir(parents=True)
        (p / "src" / "app.py").write_text(APP_PY)
        (p / "README.md").write_text("# proj\n")
        (p / "notes.txt").write_text("first\n")
        build = p / "build.sh"
        build.write_text(BUILD_SH)
        build.chmod(0o755)
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
        for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "init"]):
            subprocess.run([*git, *args], cwd=p, env=self.env(), check=True)

    # -- processes -----------------------------------------------------------------------
    def popen(self, argv: list[str], **kw: Any) -> subprocess.Popen[Any]:
        proc = subprocess.Popen(argv, start_new_session=True, **kw)
        self.procs.append(proc)
        return proc

    def run(
        self,
        argv: list[str],
        *,
        env: dict[str, str],
        timeout: float = 180,
        cwd: Path | None = None,
        stdin: str | None = None,
    ) -> Run:
        proc = self.popen(
            argv,
            cwd=cwd or self.project,
            env=env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            out, err = proc.communicate()
            raise AssertionError(f"{argv[0]} did not finish in {timeout}s:\n{out}\n{err}") from None
        finally:
            kill_group(proc)  # whatever it left behind in its group
        return Run(proc.returncode, out, err)

    def close(self) -> None:
        for proc in reversed(self.procs):
            kill_group(proc)

    # -- tma1 ------------------------------------------------------------------------------
    def tma1(self, *args: str, check: bool = True) -> Run:
        r = self.run(
            [sys.executable, "-m", "tma1.cli", *args], env=self.env(), timeout=60, cwd=self.root
        )
        if check and r.returncode != 0:
            what = f"tma1 {' '.join(args)} exited {r.returncode}"
            raise AssertionError(f"{what}:\n{r.stdout}\n{r.stderr}")
        return r

    def install(self, adapter: str) -> Run:
        return self.tma1("install", "--adapter", adapter, "--port", str(self.port))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def serve(self) -> None:
        log = (self.root / "serve.log").open("ab")
        self.serve_proc = self.popen(
            [sys.executable, "-m", "tma1.cli", "serve", "--port", str(self.port)],
            cwd=self.root,
            env=self.env(),
            stdout=log,
            stderr=log,
        )
        proc = self.serve_proc

        def healthy() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"tma1 serve exited: {self.serve_log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"GET /api/ping HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
                    return s.recv(12).startswith(b"HTTP/1.1 200")
            except OSError:
                return False

        wait_for("tma1 serve to answer", healthy, timeout=60)

    def stop_serve(self) -> None:
        if self.serve_proc is not None:
            kill_group(self.serve_proc)
            self.serve_proc = None

    def serve_log(self) -> str:
        try:
            return (self.root / "serve.log").read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def events(self) -> list[dict[str, Any]]:
        """Every hook event tma1 stored, oldest first (read-only, beside the server)."""
        db = self.data_dir / "tma1.db"
        if not db.exists():
            return []
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        con.row_factory = sqlite3.Row
        try:
            rows = con.execute("SELECT * FROM tma1_hook_events ORDER BY id").fetchall()
        except sqlite3.OperationalError:
            return []
        finally:
            con.close()
        out = []
        for row in rows:
            d = dict(row)
            try:
                d["metadata"] = json.loads(d.get("metadata") or "{}")
            except ValueError:
                d["metadata"] = {}
            out.append(d)
        return out

    def file_events(self) -> list[dict[str, Any]]:
        db = self.data_dir / "tma1.db"
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        con.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in con.execute("SELECT * FROM tma1_external_changes ORDER BY id")]
        except sqlite3.OperationalError:
            return []
        finally:
            con.close()

    def change_outside(self, rel: str, text: str, timeout: float = 30) -> dict[str, Any]:
        """Write `rel` in the project as a person would (not the agent) and wait until
        tma1's file watcher stored the change as nobody's (no `writer_session`).

        Written again, with new content each time, until one write is seen so: the watch
        starts with the project's first hook event and primes its baseline from git, and
        a write within tma1's attribution slack after one of the agent's shell commands
        (2 s past its PostToolUse, docs/sensors.md) is credited to the agent by design."""
        path = self.project / rel
        deadline = time.monotonic() + timeout
        attempt = 0
        while True:
            attempt += 1
            path.write_text(f"{text} ({attempt})\n")
            seen_by = time.monotonic() + 3
            while time.monotonic() < seen_by:
                rows = [r for r in self.file_events() if r["path"] == str(path)]
                if rows and rows[-1]["content_hash"] == _blob_id(path):
                    if rows[-1]["writer_session"] is None:
                        return rows[-1]
                    break  # credited to the agent: write again
                time.sleep(0.05)
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"tma1 never stored {rel} as changed outside: "
                    f"{self.file_events()} {self.serve_log()}"
                )

    # -- the agents --------------------------------------------------------------------
    def claude_env(self, model_url: str, **extra: str) -> dict[str, str]:
        return self.env(
            ANTHROPIC_BASE_URL=model_url,
            ANTHROPIC_API_KEY="sk-ant-fake-key-for-loopback-tests",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_TELEMETRY="1",
            DISABLE_ERROR_REPORTING="1",
            DISABLE_AUTOUPDATER="1",
            DISABLE_BUG_COMMAND="1",
            DISABLE_COST_WARNINGS="1",
            DISABLE_NON_ESSENTIAL_MODEL_CALLS="1",
            CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY="1",
            CLAUDE_CODE_DISABLE_TERMINAL_TITLE="1",
            CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL="1",
            CLAUDE_CODE_IDE_SKIP_AUTO_INSTALL="1",
            CLAUDE_CODE_DISABLE_CLAUDE_MDS="1",
            # root may not skip permissions outside a sandbox; this throw-away home is one
            IS_SANDBOX="1",
            **extra,
        )

    def claude(
        self, model_url: str, prompt: str, *args: str, timeout: float = 240, **extra_env: str
    ) -> Run:
        exe = agent_binary("claude-code")
        return self.run(
            [
                str(exe),
                "-p",
                prompt,
                "--output-format",
                "stream-json",
                "--verbose",
                "--dangerously-skip-permissions",
                "--model",
                "claude-sonnet-4-5",
                "--strict-mcp-config" if "--no-mcp" in args else "--verbose",
                *[a for a in args if a != "--no-mcp"],
            ],
            env=self.claude_env(model_url, **extra_env),
            timeout=timeout,
        )

    def write_codex_config(self, model_url: str) -> None:
        """The throw-away CODEX_HOME's config.toml: the fake provider, nothing remote.

        tma1 install adds its MCP server to this same file, so write this first."""
        cfg = self.codex_home / "config.toml"
        cfg.write_text(CODEX_CONFIG.format(base_url=model_url + "/v1"))

    def trust_codex_hooks(self) -> list[str]:
        """Trust every hook Codex lists, in this throw-away CODEX_HOME only.

        Codex 0.171 keeps hook trust in config.toml as
        `[hooks.state."<hooks.json path>:<event_snake>:<group>:<handler>"]` with
        `trusted_hash = "sha256:…"`, the hash being the binary's own (`currentHash` in the
        app server's `hooks/list`; the TUI's "Trust all and continue" writes the same).
        tma1 itself never writes this for a user."""
        exe = agent_binary("codex")
        proc = self.popen(
            [str(exe), "app-server"],
            cwd=self.project,
            env=self.env(CODEX_FAKE_KEY="fake-key"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            for msg in (
                {
                    "id": 1,
                    "method": "initialize",
                    "params": {"clientInfo": {"name": "t", "version": "1"}},
                },
                {"method": "initialized"},
                {"id": 2, "method": "hooks/list", "params": {"cwds": [str(self.project)]}},
            ):
                proc.stdin.write(json.dumps(msg) + "\n")
            proc.stdin.flush()
            while True:  # bounded by the test's timeout; the app server answers in ~1 s
                line = proc.stdout.readline()
                if not line:
                    raise AssertionError("codex app-server ended before listing the hooks")
                msg = json.loads(line)
                if msg.get("id") == 2:
                    break
        finally:
            kill_group(proc)
        hooks = [h for d in msg["result"]["data"] for h in d["hooks"]]
        import tomlkit

        cfg = self.codex_home / "config.toml"
        doc = tomlkit.parse(cfg.read_text())
        state = doc.setdefault("hooks", tomlkit.table()).setdefault("state", tomlkit.table())
        for h in hooks:
            entry = tomlkit.table()
            entry["trusted_hash"] = h["currentHash"]
            state[h["key"]] = entry
        projects = doc.setdefault("projects", tomlkit.table())
        projects[str(self.project)] = {"trust_level": "trusted"}
        cfg.write_text(tomlkit.dumps(doc))
        return [str(h["key"]) for h in hooks]

    def codex(self, prompt: str, *args: str, timeout: float = 240, **extra_env: str) -> Run:
        exe = agent_binary("codex")
        return self.run(
            [
                str(exe),
                "exec",
                "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox",
                *args,
                prompt,
            ],
            env=self.env(CODEX_FAKE_KEY="fake-key", **extra_env),
            timeout=timeout,
        )

    # Gemini CLI ---------------------------------------------------------------------
    def write_gemini_settings(self) -> None:
        """Everything that would reach past loopback off (usage statistics, telemetry,
        update checks), the API-key auth that honours GOOGLE_GEMINI_BASE_URL. Written
        before `tma1 install`, which adds its hooks to this file."""
        path = self.home / ".gemini" / "settings.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(GEMINI_SETTINGS, indent=2) + "\n")

    def gemini(self, model_url: str, prompt: str, *args: str, timeout: float = 240) -> Run:
        exe = agent_binary("gemini")
        return self.run(
            [str(exe), "-p", prompt, "--yolo", "--skip-trust", "-m", "gemini-2.5-pro", *args],
            env=self.env(
                GOOGLE_GEMINI_BASE_URL=model_url,
                GEMINI_API_KEY="fake-key-for-loopback-tests",
                GEMINI_TELEMETRY_ENABLED="false",
                GEMINI_CLI_NO_RELAUNCH="true",
                NO_BROWSER="1",
            ),
            timeout=timeout,
        )

    # GitHub Copilot CLI ---------------------------------------------------------------
    def copilot(self, model_url: str, prompt: str, *args: str, timeout: float = 240) -> Run:
        """Offline (`COPILOT_OFFLINE`: no GitHub auth, telemetry, web tools, GitHub MCP
        server or auto-update) against a BYOK provider on loopback that speaks the
        Anthropic Messages API (the fake model)."""
        exe = agent_binary("copilot")
        return self.run(
            [
                str(exe),
                "-p",
                prompt,
                "--allow-all-tools",
                "--no-auto-update",
                "--disable-client-telemetry",
                *args,
            ],
            env=self.env(
                COPILOT_OFFLINE="true",
                # Exactly "true" also trusts the project (its hooks run); --trust-folder
                # would too, but cannot be given with --resume.
                COPILOT_ALLOW_ALL="true",
                COPILOT_PROVIDER_BASE_URL=model_url,
                COPILOT_PROVIDER_TYPE="anthropic",
                COPILOT_PROVIDER_API_KEY="fake-key-for-loopback-tests",
                COPILOT_MODEL="claude-sonnet-4.5",
                COPILOT_AUTO_UPDATE="false",
                NO_COLOR="1",
            ),
            timeout=timeout,
        )


GEMINI_SETTINGS: dict[str, Any] = {
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "ide": {"enabled": False},
}

CODEX_CONFIG = """\
model = "gpt-5.5"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = "{base_url}"
wire_api = "responses"
env_key = "CODEX_FAKE_KEY"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

# Everything that would start a daemon or reach past loopback (names from
# `codex features list`, 0.171.0).
[features]
apps = false
plugins = false
remote_plugin = false
plugin_sharing = false
in_app_updates = false
daemon_auto_start = false
image_generation = false
browser_use = false
browser_use_external = false
in_app_browser = false
computer_use = false
tool_suggest = false
skill_mcp_dependency_install = false
"""


# Fixtures (imported by the test modules: a second conftest.py would clash with
# tests/conftest.py under pytest's default import mode).
@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    try:
        yield r
    finally:
        r.close()  # every process group this test started, by its id


@pytest.fixture
def model() -> Iterator[Any]:
    from fakemodel import FakeModel

    with FakeModel() as fm:
        yield fm
