"""Per-hook cost as Claude Code itself measures it (`--debug hooks`), issue 14.

The real Claude Code binary (tests/agents/, pinned in versions.json) runs one scripted
session again and again against the fake model on loopback — Read, Edit, `./build.sh`
failing three times, end of turn (twice: tma1 blocks the first) — under each of these
hook setups, interleaved run by run so that machine load falls on all of them alike:

- command: what `tma1 install --adapter claude-code` writes: where /bin/bash has /dev/tcp,
  the bash script that speaks HTTP itself (no process exec'd), in Claude Code's exec form
  (`command` + `args`: no shell first);
- command-shell: the same script as install wrote it before the exec form, through
  Claude Code's `/bin/sh -c`: `LC_ALL=C exec '<script>' --stdin-closes`;
- command-forked: the same script, but every event as install wrote it before
  `--stdin-closes` (the command is the bare script path: Claude Code's shell forks it,
  bash loads the user's locale, and the script forks a time-capped worker);
- command-sh: the same events through the POSIX sh + curl variant of the script (what
  install writes where there is no such bash, and what every install wrote before);
- noop: a command hook `true` on the same events (the floor: what Claude Code pays to
  start any command hook);
- noop-cat: a command hook `cat >/dev/null` (the floor for a hook that reads its event);
- http: Claude Code's native `"type": "http"` hooks posting to the same `tma1 serve`
  (`timeout` 1 s, the key derived from the token as a literal header; SessionStart stays a
  command hook since Claude Code sends no SessionStart over http). The product's
  `install --transport http` is built elsewhere; this settings block is the bench's own.

Claude Code's debug log gives each hook's duration ("Hooks: PreToolUse:Read [cmd]
finished with status 0 (12ms)"); the script prints p50 and max per event and setup, and
the p50 of every event pooled, with the ratio to the noop floor.

    .venv/bin/python bench/bench_agent_hooks.py [--runs 8]
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "agents"))

from agentkit import Rig  # noqa: E402
from fakemodel import FakeModel, Text, Tool  # noqa: E402

from tma1.auth.hooktoken import http_hook_key  # noqa: E402

EVENTS = (
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "UserPromptSubmit",
    "Stop",
    "SessionStart",
    "SessionEnd",
    "PreCompact",
)
SETUPS = ("command", "command-shell", "command-forked", "command-sh", "noop", "noop-cat", "http")
LINE = re.compile(
    r"Hooks: (?P<event>[A-Za-z]+)(?::\S+)? \[(?P<what>.*?)\] finished with status \S+ "
    r"\((?P<ms>\d+(?:\.\d+)?)ms\)"
)


def settings_hooks(setup: str, rig: Rig, tma1_hooks: dict[str, Any]) -> dict[str, Any]:
    if setup == "command":
        return tma1_hooks
    if setup in ("command-shell", "command-forked"):
        return _shell_form(tma1_hooks, forked=setup == "command-forked")
    if setup == "command-sh":
        return json.loads(json.dumps(tma1_hooks).replace(".sh", "-posix.sh"))

    def group(handler: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"matcher": "", "hooks": [handler]}]

    if setup in ("noop", "noop-cat"):
        cmd = "true" if setup == "noop" else "cat >/dev/null"
        return {e: group({"type": "command", "command": cmd, "timeout": 5}) for e in EVENTS}
    token = (rig.data_dir / "hook-token").read_text().strip()
    http = {
        "type": "http",
        # transport=http: answers in JSON only, which http hooks require (i14-product)
        "url": f"{rig.url}/api/hooks?transport=http",
        "headers": {"X-TMA1-Token": http_hook_key(token)},
        "timeout": 1,
    }
    out = {e: group(http) for e in EVENTS if e != "SessionStart"}
    out["SessionStart"] = tma1_hooks["SessionStart"]
    return out


def _shell_form(hooks: dict[str, Any], *, forked: bool) -> dict[str, Any]:
    """The installed exec-form hooks as shell-form commands, as earlier installs wrote
    them: `LC_ALL=C exec '<script>' [--stdin-closes]` (`forked`: the bare script path on
    every event, the script's forked worker everywhere)."""
    out = json.loads(json.dumps(hooks))
    for groups in out.values():
        for g in groups:
            for h in g["hooks"]:
                if h.get("type") != "command" or "args" not in h:
                    continue
                script, args = shlex.quote(h["command"]), h.pop("args")
                h["command"] = script if forked else " ".join(["LC_ALL=C exec", script, *args])
    return out


def write_sh_variant(rig: Rig) -> None:
    """The sh + curl variant next to the installed script, same host, port and data dir."""
    from tma1.adapters.hookscript import script_path, write_script
    from tma1.config import Settings

    settings = Settings(data_dir=rig.data_dir, port=rig.port)
    installed = script_path(settings, "claude-code")
    assert installed.is_file(), installed
    first = installed.read_text().splitlines()[0]
    print(f"installed script: {installed.name} ({first})", file=sys.stderr)
    target = installed.with_name(installed.name.replace(".sh", "-posix.sh"))
    write_script(settings, "claude-code", path=target, flavor="sh")


def script(rig: Rig) -> list[Any]:
    app = str(rig.project / "src" / "app.py")
    return [
        Tool("Read", {"file_path": app}),
        Tool("Edit", {"file_path": app, "old_string": "return 1", "new_string": "return 1 "}),
        *[Tool("Bash", {"command": "./build.sh", "description": "build"})] * 3,
        Text("I am stopping here."),
        Text("Stopping anyway."),
    ]


STAMP = re.compile(r"^(\S+Z) \[DEBUG\] Hooks: HTTP hook (POST to|response status|error)", re.M)


def parse(log: str) -> list[tuple[str, float]]:
    """Command hooks: Claude Code's own "(N ms)". Http hooks carry no duration and no
    event name in the log: the duration is the POST line to its response line (ms
    stamps), in order; `parse_http` names them."""
    return [(m["event"], float(m["ms"])) for m in LINE.finditer(log)]


def parse_http(log: str) -> list[float]:
    from datetime import datetime

    out: list[float] = []
    sent: datetime | None = None
    for m in STAMP.finditer(log):
        at = datetime.fromisoformat(m[1].replace("Z", "+00:00"))
        if m[2] == "POST to":
            sent = at
        elif sent is not None:
            out.append((at - sent).total_seconds() * 1000)
            sent = None
    return out


def session_of(stdout: str) -> str:
    for line in reversed(stdout.splitlines()):
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("type") == "result":
            return str(msg["session_id"])
    raise SystemExit("no result message from claude")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=8, help="sessions per setup")
    ap.add_argument("--keep-logs", metavar="DIR", help="copy the debug logs here")
    args = ap.parse_args()

    samples: dict[str, dict[str, list[float]]] = {s: {} for s in SETUPS}
    with tempfile.TemporaryDirectory(prefix="tma1-bench-agent-") as tmp:
        rig = Rig(Path(tmp))
        rig.patience_s = None  # the hook and the server exactly as installed
        try:
            rig.install("claude-code")
            rig.serve()
            settings_file = rig.home / ".claude" / "settings.json"
            base = json.loads(settings_file.read_text())
            tma1_hooks = base["hooks"]
            write_sh_variant(rig)
            for i in range(args.runs):
                for setup in SETUPS:
                    doc = dict(base, hooks=settings_hooks(setup, rig, tma1_hooks))
                    settings_file.write_text(json.dumps(doc, indent=2))
                    log = Path(tmp) / f"debug-{setup}-{i}.log"
                    with FakeModel(script=script(rig)) as fm:
                        run = rig.claude(fm.url, "make the build pass", "--debug-file", str(log))
                    if run.returncode != 0:
                        raise SystemExit(f"claude exited {run.returncode}: {run.stderr[-2000:]}")
                    text = log.read_text(errors="replace")
                    got = parse(text)
                    if setup == "http":
                        # The http hooks arrive in order; tma1 stored them in that order.
                        stored = [
                            e["hook_event_name"]
                            for e in rig.events()
                            if e["session_id"] == session_of(run.stdout)
                            and e["hook_event_name"] != "SessionStart"
                        ]
                        took = parse_http(text)
                        if len(took) > len(stored):
                            raise SystemExit(f"{len(took)} http hooks, {len(stored)} stored")
                        got += list(zip(stored, took, strict=False))
                    if not got:
                        raise SystemExit(f"no hook timings in {log}")
                    if setup.startswith("command"):
                        # a fast hook that posts nothing is no figure: every event stored,
                        # and the first Stop blocked (so a second one came)
                        sid = session_of(run.stdout)
                        n = sum(1 for e in rig.events() if e["session_id"] == sid)
                        stops = sum(1 for event, _ in got if event == "Stop")
                        if n < len(got) or stops != 2:
                            raise SystemExit(
                                f"{setup}: {len(got)} hooks, {n} stored, {stops} Stops"
                            )
                    for event, ms in got:
                        samples[setup].setdefault(event, []).append(ms)
        finally:
            rig.close()
            if args.keep_logs:
                import shutil

                shutil.copytree(tmp, args.keep_logs, dirs_exist_ok=True)

    def fmt(xs: list[float]) -> str:
        return f"{statistics.median(xs):6.1f} / {max(xs):6.1f}" if xs else "     — /      —"

    events = sorted({e for s in samples.values() for e in s})
    print(f"Claude Code --debug hooks, {args.runs} sessions per setup; ms, p50 / max (n)")
    print(f"{'event':<20}" + "".join(f"{s:>22}" for s in SETUPS))
    for e in events:
        row = ""
        for s in SETUPS:
            xs = samples[s].get(e, [])
            row += f"{fmt(xs):>17} ({len(xs):>2})"
        print(f"{e:<20}{row}")
    pooled = {s: [x for xs in samples[s].values() for x in xs] for s in SETUPS}
    floor = statistics.median(pooled["noop"])
    print(
        f"{'all events':<20}"
        + "".join(f"{fmt(pooled[s]):>17} ({len(pooled[s]):>2})" for s in SETUPS)
    )
    for s in SETUPS:
        p50 = statistics.median(pooled[s])
        print(f"{s:<10} p50 {p50:6.1f} ms = noop + {p50 - floor:5.1f} ms ({p50 / floor:4.2f}x)")


if __name__ == "__main__":
    main()
