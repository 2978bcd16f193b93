"""Replay of a synthetic month of one heavy user (issue 16): ≈ 50,000 hook events over 30
days in tma1's own event log format (README "Event log", `tma1 export`), replayed by
`tma1 replay FILE` on one process, in a fresh process — parsing included, as a user runs it.

    .venv/bin/python bench/bench_replay_month.py [--events 50000] [--seed 1]
        [--tma1 PATH/TO/tma1 ...] [--repeat 1] [--keep FILE]

The log is generated in this process (seeded: the same file every time) and written to a
temporary file (or `--keep FILE`). Each `--tma1` (default: this venv's) is run `--repeat`
times, alternating between them, so an old and a new checkout can be compared in one run
on a noisy machine: `--tma1 ../wt-base/.venv/bin/tma1 --tma1 .venv/bin/tma1`. Printed per
run: wall seconds, the child's CPU (user + sys), its max RSS, hook events per second, the
load average before the run, and the replay's summary line counts. Target: ≤ 10 s wall.

What the month holds (a heavy Claude Code user): 4 projects, 22 working days with 6–12
sessions a day and a few weekend sessions; sessions of 5–40 prompts, each prompt a turn of
reads, greps, edits, writes and shell runs (build, tests, lint, git), ≈ 1 in 6 builds or
test runs failing, often a streak of 2–5 failures on one check before the fix; a Stop per
turn; SubagentStart/Stop and sub-agent tool calls now and then; usage records with the
context growing until a PreCompact and compaction; file changes made outside the agent.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DAY_MS = 86_400_000
START_MS = 1_790_000_000_000  # a fixed epoch (2026-09-22); the month follows it

PROJECTS = {
    "/home/dev/api": ("py", ["src/api/app.py", "src/api/models.py", "src/api/routes.py",
                             "src/api/auth.py", "src/api/db.py", "tests/test_app.py",
                             "tests/test_routes.py", "tests/test_auth.py"]),
    "/home/dev/web": ("js", ["src/App.tsx", "src/api.ts", "src/components/List.tsx",
                             "src/components/Form.tsx", "src/store.ts",
                             "src/__tests__/List.test.tsx", "src/__tests__/api.test.ts"]),
    "/home/dev/engine": ("rs", ["src/lib.rs", "src/parser.rs", "src/eval.rs", "src/main.rs",
                                "tests/parse.rs", "tests/eval.rs"]),
    "/home/dev/tools": ("py", ["tools/cli.py", "tools/sync.py", "tools/report.py",
                               "tests/test_cli.py", "tests/test_sync.py"]),
}  # fmt: skip

CHECKS = {
    "py": [("pytest -q {t}", "test"), ("python -m pytest -x", "test"),
           ("ruff check .", "lint"), ("mypy src", "build")],
    "js": [("npm run build", "build"), ("npx jest {t}", "test"), ("npm test", "test"),
           ("npx eslint src", "lint")],
    "rs": [("cargo build", "build"), ("cargo test", "test"), ("cargo clippy", "lint"),
           ("cargo build 2>&1 | tail -20", "build")],
}  # fmt: skip


def _fail_output(lang: str, cmd: str, f: str, rng: random.Random) -> str:
    line = rng.randrange(5, 300)
    if lang == "py":
        if cmd.startswith("ruff"):
            return f"{f}:{line}:1: F401 `os` imported but unused\nFound 1 error."
        if cmd.startswith("mypy"):
            return f"{f}:{line}: error: Incompatible types in assignment\nFound 1 error in 1 file"
        return (f'  File "{f}", line {line}, in test_case\nE       assert 200 == 500\n'
                f"FAILED tests/test_app.py::test_case_{line % 7} - assert 200 == 500\n"
                f"1 failed, {rng.randrange(10, 90)} passed in 1.2{line % 10}s")  # fmt: skip
    if lang == "js":
        if "jest" in cmd or "test" in cmd:
            return (f"FAIL src/__tests__/List.test.tsx\n  ● List › renders items\n"
                    f"    at Object.<anonymous> ({f}:{line}:12)\n"
                    f"Tests:       1 failed, {rng.randrange(5, 60)} passed")  # fmt: skip
        return f"{f}({line},7): error TS2322: Type 'string' is not assignable to type 'number'."
    return (f"error[E0308]: mismatched types\n  --> {f}:{line}:9\n"
            "error: could not compile `engine` due to 1 previous error")  # fmt: skip


class Month:
    def __init__(self, seed: int, target: int) -> None:
        self.rng = random.Random(seed)
        self.target = target
        self.lines: list[str] = []
        self.hooks = 0

    def emit(self, rec: dict[str, Any]) -> None:
        if "hook_event_name" in rec:
            self.hooks += 1
        self.lines.append(json.dumps(rec, separators=(",", ":")))

    def session(self, sid: str, cwd: str, t: int, prompts: int) -> int:
        rng = self.rng
        lang, files = PROJECTS[cwd]
        base = {"session_id": sid, "cwd": cwd, "transcript_path": f"/home/dev/.claude/{sid}.jsonl"}
        occupancy = rng.randrange(15_000, 30_000)

        def hook(name: str, **kw: Any) -> None:
            nonlocal t
            t += rng.randrange(800, 25_000)
            self.emit({**base, "hook_event_name": name, "ts": t, **kw})

        def tool(name: str, tin: dict[str, Any], resp: Any = None, fail: str | None = None,
                 agent: str | None = None) -> None:  # fmt: skip
            nonlocal occupancy
            extra = {"agent_id": agent, "agent_type": "general-purpose"} if agent else {}
            hook("PreToolUse", tool_name=name, tool_input=tin, **extra)
            if fail is not None:
                hook("PostToolUseFailure", tool_name=name, tool_input=tin, error=fail, **extra)
            else:
                hook("PostToolUse", tool_name=name, tool_input=tin, tool_response=resp, **extra)
            occupancy += rng.randrange(500, 4_000)
            if rng.random() < 0.3:
                self.emit({"type": "usage", "ts": t + 1, "session_id": sid,
                           "input_tokens": 3, "cache_read_tokens": occupancy - 1_000,
                           "cache_creation_tokens": 997, "output_tokens": rng.randrange(50, 900),
                           "model": "claude-sonnet-4-5", "context_window": 200_000})  # fmt: skip

        hook("SessionStart", source="startup")
        broken: tuple[str, str] | None = None  # a check failing until it is fixed
        for p in range(prompts):
            hook("UserPromptSubmit", prompt=f"task {p}: change {rng.choice(files)} and run checks")
            for _ in range(rng.randrange(2, 9)):
                f = f"{cwd}/{rng.choice(files)}"
                r = rng.random()
                if r < 0.30:
                    tool(
                        "Read",
                        {"file_path": f},
                        {"type": "text", "file": {"filePath": f, "content": "x = 1\n" * 40}},
                    )
                elif r < 0.40:
                    tool(
                        "Grep",
                        {"pattern": "def \\w+", "path": cwd},
                        {"mode": "files_with_matches", "filenames": [f], "numFiles": 1},
                    )
                elif r < 0.65:
                    tin = {"file_path": f, "old_string": "x = 1", "new_string": "x = 2"}
                    tool("Edit", tin, {"filePath": f, "oldString": "x = 1", "newString": "x = 2"})
                elif r < 0.70:
                    tool(
                        "Write",
                        {"file_path": f, "content": "y = 2\n" * 20},
                        {"type": "update", "filePath": f},
                    )
                elif r < 0.75:
                    cmd = rng.choice(["git status", "git diff --stat", "ls src", "git log -3"])
                    tool(
                        "Bash",
                        {"command": cmd, "description": cmd},
                        {"stdout": " M src/x\n", "stderr": "", "interrupted": False},
                    )
                else:
                    if broken is None and rng.random() < 0.17:
                        tmpl, _ = rng.choice(CHECKS[lang])
                        broken = (tmpl.format(t=rng.choice(files)), f)
                    if broken is not None:
                        cmd, bf = broken
                        tool("Bash", {"command": cmd}, fail="Exit code 1\n"
                             + _fail_output(lang, cmd, bf, rng))  # fmt: skip
                        if rng.random() < 0.35:  # the fix
                            broken = None
                    else:
                        tmpl, _ = rng.choice(CHECKS[lang])
                        cmd = tmpl.format(t=rng.choice(files))
                        tool("Bash", {"command": cmd},
                             {"stdout": "ok\n" + "." * 30 + "\n42 passed in 0.9s", "stderr": "",
                              "interrupted": False})  # fmt: skip
            if rng.random() < 0.04:  # a sub-agent
                aid = f"a{rng.randrange(1 << 30):08x}"
                hook("SubagentStart", agent_id=aid, agent_type="general-purpose")
                for _ in range(rng.randrange(3, 10)):
                    f = f"{cwd}/{rng.choice(files)}"
                    tool(
                        "Read",
                        {"file_path": f},
                        {"type": "text", "file": {"filePath": f}},
                        agent=aid,
                    )
                hook(
                    "SubagentStop",
                    agent_id=aid,
                    agent_type="general-purpose",
                    stop_hook_active=False,
                )
            if rng.random() < 0.05:  # the user edits outside the agent
                self.emit({"type": "file_change", "ts": t + 500, "project": cwd,
                           "path": f"{cwd}/{rng.choice(files)}", "change": "modified",
                           "session_id": None})  # fmt: skip
            hook("Stop", stop_hook_active=False)
            if occupancy > 150_000:
                hook("PreCompact", trigger="auto", custom_instructions="")
                occupancy = rng.randrange(20_000, 40_000)
            t += rng.randrange(20_000, 600_000)  # the user reads, thinks, types
        hook("SessionEnd", reason="prompt_input_exit")
        return t

    def build(self) -> None:
        rng = self.rng
        n = 0
        projects = list(PROJECTS)
        # sessions until the target; the days fill in order and wrap (weekends light)
        while self.hooks < self.target:
            for day in range(30):
                if self.hooks >= self.target:
                    break
                weekend = day % 7 in (5, 6)
                t = START_MS + day * DAY_MS + 8 * 3_600_000 + rng.randrange(0, 3_600_000)
                for _ in range(rng.randrange(0, 3) if weekend else rng.randrange(6, 13)):
                    if self.hooks >= self.target:
                        break
                    n += 1
                    sid = f"{n:08d}-5e55-4000-8000-{rng.randrange(1 << 48):012x}"
                    t = self.session(sid, rng.choice(projects), t, rng.randrange(5, 40))
                    t += rng.randrange(60_000, 1_800_000)
        self.sessions = n


def _one_process(exe: str) -> list[str]:
    """`--jobs 1` for a tma1 that still replays on several processes (older checkouts)."""
    usage = subprocess.run([exe, "replay", "--help"], capture_output=True, text=True).stdout
    return ["--jobs", "1"] if "--jobs" in usage else []


def run(exe: str, path: Path) -> dict[str, Any]:
    load = os.getloadavg()
    argv = [exe, "replay", str(path), *_one_process(exe), "--json"]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err)
        _, status, ru = os.wait4(proc.pid, 0)  # this child's own rusage
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            sys.exit(f"{exe} replay failed ({proc.returncode}):\n{err.read()[-2000:]}")
        doc = json.loads(out.read())
    return {
        "wall": wall,
        "cpu": ru.ru_utime + ru.ru_stime,
        "rss_mb": ru.ru_maxrss / 1024,  # Linux: KiB
        "load": load,
        "out": doc,
    }


def _summary(out: dict[str, Any]) -> str:
    """A few totals from `--json`, whatever the version's exact schema."""
    keys = ("hook_events", "events", "sessions", "emits", "deliveries")
    found = {k: out[k] for k in keys if isinstance(out.get(k), int | float)}
    summ = out.get("summary")
    if isinstance(summ, dict):
        found.update({k: summ[k] for k in keys if isinstance(summ.get(k), int | float)})
    return " ".join(f"{k}={v}" for k, v in found.items()) or ",".join(sorted(out)[:8])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=50_000, help="hook events (about)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tma1", action="append", help="tma1 executables to compare (repeatable)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--keep", type=Path, help="write the log here and keep it")
    args = ap.parse_args()
    exes = args.tma1 or [str(Path(sys.executable).with_name("tma1"))]

    t0 = time.perf_counter()
    month = Month(args.seed, args.events)
    month.build()
    gen = time.perf_counter() - t0
    tmp = None
    if args.keep:
        path = args.keep
    else:
        tmp = tempfile.TemporaryDirectory(prefix="tma1-month-")
        path = Path(tmp.name) / "month.jsonl"
    path.write_text("\n".join(month.lines) + "\n")
    size = path.stat().st_size / 1e6
    print(
        f"synthetic month: {month.hooks:,} hook events, {len(month.lines):,} records, "
        f"{month.sessions} sessions, {size:.1f} MB; generated in {gen:.1f} s → {path}"
    )
    print(f"{'tma1':<40} {'wall s':>7} {'cpu s':>7} {'ev/s':>7} {'maxRSS MB':>9}  load(1/5/15)")
    for _ in range(args.repeat):
        for exe in exes:
            r = run(exe, path)
            load = "/".join(f"{x:.2f}" for x in r["load"])
            print(f"{exe:<40} {r['wall']:7.2f} {r['cpu']:7.2f} {month.hooks / r['wall']:7.0f} "
                  f"{r['rss_mb']:9.0f}  {load}   {_summary(r['out'])}", flush=True)  # fmt: skip
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
