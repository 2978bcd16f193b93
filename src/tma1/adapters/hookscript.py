"""The hook script: rendered from `hook.sh` with this install's host, port and data dir."""

from __future__ import annotations

import importlib
import os
import shlex
import subprocess
from importlib import resources
from pathlib import Path
from typing import Any

from tma1.config import Settings

# Two variants of one script: bash speaking HTTP itself over /dev/tcp (no process exec'd
# on the agent's path), and POSIX sh + curl where there is no /bin/bash.
TEMPLATES = {"bash": "hook_bash.sh", "sh": "hook.sh"}
BASH = Path("/bin/bash")
SCRIPTS_DIR = "hooks"


def script_name(agent: str) -> str:
    """The script's file name; install recognises its own settings entries by it."""
    return f"tma1-hook-{agent}.sh"


def script_path(settings: Settings, agent: str) -> Path:
    # Absolute: agents run hooks from the project's directory, not from ours.
    return settings.data_dir.expanduser().absolute() / SCRIPTS_DIR / script_name(agent)


def shell_handler(script: Path, timeout: int, **first: str) -> dict[str, Any]:
    """A command hook running the script through the agent's shell (`first`: keys that
    come before the others)."""
    return {**first, "type": "command", "command": shlex.quote(str(script)), "timeout": timeout}


def exec_form(script: Path, *, stdin_closes: bool = False) -> dict[str, Any]:
    """The hook's command in Claude Code's exec form (`command` + `args`): the agent spawns
    the script itself, with no `/bin/sh -c` before it — 1 ms of every hook at p50 in
    Claude Code's own timing, against the shell form `LC_ALL=C exec '<script>'`
    (docs/benchmarks.md). `stdin_closes` marks the events on which the agent closes the
    hook's stdin once the event is written; the bash script once served those without
    forking a worker, but a connect(2) cannot be bounded without one (issue 31: the cap is
    wall-clock in every mode), so both scripts now ignore it. Kept so that installs stay
    as they are."""
    return {"command": str(script), "args": ["--stdin-closes"] if stdin_closes else []}


def default_flavor() -> str:
    """bash where /bin/bash is 5.2 or newer and has /dev/tcp (the script's first line names
    it), else sh + curl. TMA1_HOOK_SHELL=sh|bash at install time overrides the choice."""
    forced = os.environ.get("TMA1_HOOK_SHELL", "")
    if forced in TEMPLATES:
        return forced
    return "bash" if bash_usable() else "sh"


def bash_usable() -> bool:
    """The bash script needs two things of /bin/bash. /dev/tcp: bash can be built without
    network redirections, and then /dev/tcp/... is just a missing file (the script would
    post nothing, ever). And 5.2 or newer: there `read -N` without `-t` reads a pipe or
    socket in 4 KiB blocks (checked with strace; older bash was not checked, and
    macOS's /bin/bash 3.2 has no `-N` at all). Ask bash: a connect to port 1 is refused
    (or, rarely, succeeds) where /dev/tcp works."""
    if not (BASH.is_file() and os.access(BASH, os.X_OK)):
        return False
    probe = 'echo "${BASH_VERSINFO[0]} ${BASH_VERSINFO[1]}"; exec 3<>/dev/tcp/127.0.0.1/1'
    try:
        r = subprocess.run(
            [str(BASH), "-p", "-c", probe],
            capture_output=True,
            text=True,
            timeout=5,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"},
        )
        major, minor = (int(x) for x in r.stdout.split()[:2])
    except (OSError, subprocess.SubprocessError, ValueError):
        return False
    if (major, minor) < (5, 2):
        return False
    return r.returncode == 0 or "No such file" not in r.stderr


# SHA-256 of stdin, hex first on the line (`hex  -`, `hex *stdin`): the keyed hashes the
# script sends and checks (tma1.auth.hooktoken). Looked up once, at install, and written in with
# its absolute path: no PATH search on the agent's path, and no PATH the agent sets can
# put another program there.
HASHERS = (("sha256sum",), ("shasum", "-a", "256"), ("openssl", "dgst", "-sha256", "-r"))


def sha256_command() -> str:
    import shutil

    for name, *args in HASHERS:
        found = shutil.which(name)
        if found:
            return shlex.join([found, *args])
    return "sha256sum"  # none here: the server refuses the hooks, `tma1 doctor` says so


def query_of(agent: str) -> str:
    """The query string the agent's script posts with (`AgentSpec.query`): the others'
    payloads are tagged, and their answers need the agent's own envelope. Looked up in the
    registry when the script is rendered: the agent modules import this one."""
    registry = importlib.import_module("tma1.adapters.agents")
    return str(registry.SPECS[agent].query)


def render_script(settings: Settings, agent: str, flavor: str | None = None) -> str:
    values = {
        "@@SHA256@@": sha256_command(),
        "@@AGENT@@": agent,
        "@@HOST@@": shlex.quote(settings.host),
        "@@PORT@@": shlex.quote(str(settings.port)),
        "@@DATA_DIR@@": shlex.quote(str(settings.data_dir.expanduser().absolute())),
        "@@QUERY@@": query_of(agent),
    }
    template = resources.files("tma1.adapters").joinpath(TEMPLATES[flavor or default_flavor()])
    text = template.read_text(encoding="utf-8")
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    return text


def write_script(
    settings: Settings, agent: str, path: Path | None = None, flavor: str | None = None
) -> Path:
    """Write the rendered script (0755) atomically; the demo and the tests use this."""
    from tma1.adapters.files import atomic_write

    target = path or script_path(settings, agent)
    atomic_write(target, render_script(settings, agent, flavor).encode("utf-8"), mode=0o755)
    return target
