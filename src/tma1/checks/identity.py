"""Runner identity (design §2.15): does a command run a build, test, lint or type check,
and which one.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from tma1.checks.normalize import PYTHON_NAME, VALUE_FLAGS, Invocation, normalise, simple_commands

# Compilers run by hand: a build, though no check identity is kept for them.
_COMPILER_HEAD = re.compile(r"^(?:gcc|g\+\+|cc|c\+\+|clang\+?\+?|meson)(?=$|\s)")


@lru_cache(maxsize=4096)
def runs_build_or_test(command: str) -> bool:
    """True when the shell command runs a check (`check_of`) or a compiler.

    `grep FAIL build.log`, `cat out | grep error`, `cargo run` or `./target/release/app`
    never does: they check nothing (design §2.21).
    """
    if check_of(command) is not None:
        return True
    return any(_COMPILER_HEAD.match(seg) for seg in simple_commands(command))


# --- checks: identity, scope, coverage (design §2.15) ---------------------------------------


@dataclass(frozen=True, slots=True)
class Step:
    """One runner invocation: where it runs, which runner and target, and its scope
    (paths, packages, test filters; empty = the whole project)."""

    workdir: str
    runner: str
    scope: tuple[str, ...] = ()

    @property
    def identity(self) -> str:
        return f"{self.runner} (in {self.workdir})" if self.workdir else self.runner


@dataclass(frozen=True, slots=True)
class Check:
    """What a shell command checks: its steps (`cargo build && cargo test` has two)."""

    steps: tuple[Step, ...]
    # The check however spelled and whatever its scope: the subject of its findings. Kept,
    # with the hash, because the rules key every run by it at every detection.
    identity: str = field(init=False, compare=False, repr=False)
    _hash: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        ident = " && ".join(dict.fromkeys(s.identity for s in self.steps))
        object.__setattr__(self, "identity", ident)
        object.__setattr__(self, "_hash", hash(self.steps))

    def __hash__(self) -> int:
        return self._hash

    @property
    def compiles(self) -> bool:
        return any(s.runner in _COMPILE_RUNNERS for s in self.steps)

    @property
    def lints(self) -> bool:
        """Every step is a linter or type checker: a run lists each finding of a file, old
        ones included, so a finding is an edit's only where the edit was."""
        return all(_FINDINGS_RUNNER.search(s.runner) for s in self.steps)


# A profile (`--release`) changes what is built, not whether it compiles.
_COMPILE_RUNNERS = frozenset(
    {"cargo build", "cargo check", "cargo clippy", "go build", "go vet", "tsc", "make",
     "dotnet build", "swift build", "zig build"}
)  # fmt: skip
_FINDINGS_RUNNER = re.compile(
    r"lint|clippy|\bruff\b|flake8|staticcheck|\bgo vet\b|\bmypy\b|pyright|\btsc\b|"
    r"type-?check|\bdeno check\b|svelte-check|shellcheck|stylelint|\bbiome\b"
)
# Subcommands that name the check: `cargo test`, `go vet`, `dotnet build`.
_SUBCOMMAND_RUNNERS = {
    # `cargo run` and `go run` run the program: no check (design §2.21).
    "cargo": frozenset({"build", "check", "test", "clippy", "nextest", "bench", "doc"}),
    "go": frozenset({"build", "test", "vet", "install", "generate"}),
    "dotnet": frozenset({"build", "test"}),
    "swift": frozenset({"build", "test"}),
    "zig": frozenset({"build", "test"}),
    "deno": frozenset({"test", "check", "lint"}),
    "bun": frozenset({"test"}),
    "mix": frozenset({"test", "compile"}),
    "golangci-lint": frozenset({"run"}),
    "ruff": frozenset({"check", "format"}),
    "rails": frozenset({"test"}),
    "node": frozenset({"--test"}),
    "cmake": frozenset({"--build"}),
}
# Runners whose first word is the check: any positional argument is scope.
_PLAIN_RUNNERS = frozenset(
    {"pytest", "py.test", "tox", "nox", "mypy", "pyright", "flake8", "pylint", "black",
     "isort", "unittest", "tsc", "eslint", "jest", "vitest", "mocha", "ava", "playwright",
     "cypress", "staticcheck", "gotestsum", "rspec", "phpunit", "pest", "ctest", "ninja",
     "rustc", "biome", "prettier", "svelte-check", "vue-tsc", "stylelint", "shellcheck",
     "clippy-driver", "xcodebuild", "bazel", "tap"}
)  # fmt: skip
# Task runners: the targets are part of the check (`make test` is not `make lint`).
_TASK_RUNNERS = {"make": "make", "gmake": "make", "gradle": "gradle", "gradlew": "gradle",
                 "mvn": "mvn", "mvnw": "mvn", "rake": "rake", "just": "just",
                 "ant": "ant", "sbt": "sbt"}  # fmt: skip
_NODE_PMS = frozenset({"npm", "pnpm", "yarn", "bun"})
# npm scripts that are checks (`npm run dev` is a server, `npm install` an install).
_CHECK_SCRIPT = re.compile(
    r"^(?:test|build|lint|typecheck|type-check|check|tsc|compile|ci|e2e|verify|types|"
    r"validate)(?:[:.\-_][\w:.\-]*)?$"
)
_JS_TEST_RUNNERS = frozenset({"jest", "vitest", "mocha", "ava", "tap", "node --test"})
# What a project's own npm script runs, when the script is the usual one: the whole test
# suite passing covers a jest file's failure (the script's runner is not in the command).
_SCRIPT_COVERS: dict[str, frozenset[str]] = {
    "test": _JS_TEST_RUNNERS,
    "build": frozenset({"tsc"}),
    "typecheck": frozenset({"tsc", "vue-tsc"}),
    "type-check": frozenset({"tsc", "vue-tsc"}),
    "tsc": frozenset({"tsc"}),
    "lint": frozenset({"eslint", "biome"}),
}
_SCRIPT_FILE = re.compile(r"\.(?:sh|bash|py|js|mjs|cjs|ts|rb|pl)$")
# Flags that narrow what is checked: their value is scope.
_SCOPE_FLAGS = frozenset(
    {"-k", "-m", "-t", "--testNamePattern", "-run", "--run", "-p", "--package", "--test",
     "--bin", "--example", "--project", "--testPathPattern", "--grep", "-g", "--spec",
     "--select", "--lib", "--enable-only", "--enable", "-E", "--skip", "--ignored"}
)  # fmt: skip
_NO_VALUE_SCOPE = frozenset({"--lib", "--ignored"})
# Test-name filters: they only narrow the files or packages the run was given, so the same
# run without them covers it. (Not linter selections: `--enable-only`, `--select` and
# `-E` pick rules, which a run without them may not run at all.)
_NAME_FILTERS = (
    "-k=", "-m=", "-t=", "--testNamePattern=", "-run=", "--run=", "--grep=", "--skip=",
    "--ignored",
)  # fmt: skip
_WHOLE = frozenset({".", "./", "./...", "...", "all"})


def is_script_file(name: str) -> bool:
    """`name` is a script a project check may run by its path (`build.sh`, `x.mjs`)."""
    return bool(_SCRIPT_FILE.search(name))


def _clean_path(p: str) -> str:
    p = p.replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    return p.rstrip("/") if p not in ("/",) else p


def _scope(args: Sequence[str]) -> tuple[str, ...]:
    scope: list[str] = []
    take: str | None = None
    for a in args:
        if take is not None:
            scope.append(f"{take}={a}")
            take = None
            continue
        if a == "--":
            continue
        if a.startswith("-"):
            flag, eq, value = a.partition("=")
            if flag in _SCOPE_FLAGS:
                if flag in _NO_VALUE_SCOPE:
                    scope.append(flag)
                elif eq:
                    scope.append(f"{flag}={value}")
                else:
                    take = flag
            elif flag == "--release" or flag == "--profile":
                continue
            elif not eq and a in VALUE_FLAGS:
                take = ""
            continue
        p = _clean_path(a)
        if p in _WHOLE or not p:
            continue
        scope.append(p)
    # `take == ""` marked a value to skip; a skipped value is no scope.
    return tuple(sorted(s for s in dict.fromkeys(scope) if not s.startswith("=")))


# --- what is no check (design §2.21) ---------------------------------------------------
#
# A check is a build, test, lint, type-check or compile run. A project script is one only
# when its name (or, like a make target, its first argument) says so; running the program,
# asking a tool for its help or version, deploying, pushing or flashing checks nothing.

# A word of a script's name or a task's target that says it checks: `build.sh`,
# `run_tests.py`, `check-types.ts`, `typecheck`, `ci`, `pretest`, `make lint`
# (not `latest`, `checkout` or `install_all`).
_CHECK_WORD = re.compile(
    r"^(?:(?:pre|post|re|unit|smoke|type|self|integration)?"
    r"(?:build|test|check|lint|verify|compile|typecheck)(?:s|ing|er|ed)?|ci|tsc|vet|e2e)$"
)
# The words of a name: `runTests` is run + tests, `check-types` is check + types.
# (`test2` is test + 2, `e2e` one word.)
_NAME_WORDS = re.compile(r"[eE]2[eE]|[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
# Never a check, whatever else the name says: starting or serving the program, shipping it.
_PROGRAM_NAME = re.compile(r"^(?:start|serve|dev|deploy|publish|release|push|flash|upload)")
# Shipping the program, wherever the word stands in the name: `build-and-deploy.sh` deploys.
_SHIP_WORDS = frozenset({"deploy", "deployment", "publish", "push", "flash", "upload"})
_MACHINE_WORDS = frozenset(
    {"prereq", "prereqs", "prerequisite", "prerequisites", "env", "environment", "setup",
     "deps", "dependencies", "health", "healthcheck", "status", "install", "tools",
     "version", "versions", "updates", "update", "links", "ports"}
)  # fmt: skip
_SHIPPING = frozenset(
    {"deploy", "push", "flash", "publish", "release", "upload", "install", "run", "start",
     "serve", "dev", "preview", "watch", "clean", "fmt", "format", "generate", "docs"}
)  # fmt: skip
# Directories that hold built programs: `./target/release/app`, `./build/app`, `bin/srv`.
_BUILT_DIRS = frozenset({"target", "build", "dist", "bin", "out", "release", "debug"})
# Of those, the ones whose scripts too are build output (`dist/cli.js` is compiled code).
_OUTPUT_DIRS = frozenset({"target", "dist", "out"})
_TEMP_DIRS = ("/tmp/", "/var/tmp/", "/private/tmp/", "/var/folders/", "/private/var/folders/")
_PATH_WORD = re.compile(r"[\w@%+=:,.~/-]+")
_TASK_WORD = re.compile(r"[\w:.-]+")  # `./dev.sh test`, `./x.py check:types`
_HELP_FLAGS = frozenset({"--help", "-h", "--version", "-V"})
# Package managers' options whose value is a separate word (`pnpm --filter api test`).
_PM_VALUE_FLAGS = frozenset({"--filter", "-F", "--workspace", "-w", "--cwd", "--dir", "-C"})


def ships(name: str) -> bool:
    """A script's name says it ships the program (`deploy.sh`, `build-and-deploy.sh`,
    `publish-test-release.sh`): whatever else it or its arguments say, no check."""
    stem = _SCRIPT_FILE.sub("", name.rsplit("/", 1)[-1])
    return any(w.lower() in _SHIP_WORDS for w in _NAME_WORDS.findall(stem))


def says_check(name: str) -> bool:
    """A script's file name (or a task's name) says it checks: one of its words is
    build, test, check, lint, verify, ci, compile or typecheck (`run_tests.sh`,
    `check-types.ts`), and it does not start or ship the program (`ships`)."""
    stem = _SCRIPT_FILE.sub("", name.rsplit("/", 1)[-1])
    if _PROGRAM_NAME.match(stem.lower()) or ships(stem):
        return False  # `start-test-server`, `build-and-deploy`
    words = [w.lower() for w in _NAME_WORDS.findall(stem)]
    # `check-prerequisites.sh`, `check_env.py`, `healthcheck`: the machine, not the code.
    if any(w in _MACHINE_WORDS for w in words):
        return False
    return any(_CHECK_WORD.match(w) for w in words)


def _asks_for_help(rest: Sequence[str]) -> bool:
    """`tool --help`, `tool --version`, `go help test`: the tool describes itself (an
    option after `--` is the program's, not the tool's)."""
    if rest[:1] in (["help"], ["version"]):
        return True
    for w in rest:
        if w == "--":
            return False
        if w in _HELP_FLAGS:
            return True
    return False


# After `--` the words are the tool's, not the runner's (design §2.15): for these runners
# they are the compiler's or the test binary's flags, which change how strictly a check
# judges (`cargo clippy -- -D warnings`) or how it prints (`-args -v`), never which code it
# looks at.
_TAIL_IS_FLAGS = frozenset(
    {"cargo build", "cargo check", "cargo clippy", "cargo doc", "dotnet build", "go test",
     "go vet", "go build"}
)  # fmt: skip
# libtest's own options (`cargo test -- …`): which of them narrow the run. Its positional
# words are test-name filters and narrow it like `cargo test name` does.
_LIBTEST_NARROWING = frozenset({"--skip", "--ignored"})
_LIBTEST_VALUE_FLAGS = frozenset(
    {"--skip", "--test-threads", "--format", "--color", "--logfile", "-Z", "--shuffle-seed",
     "--report-time"}
)  # fmt: skip


def _runner_args(runner: str, args: Sequence[str]) -> list[str]:
    """`args` less what after `--` (Go: `-args`) goes to the tool and does not narrow the
    check. `cargo test -- parse` narrows to the tests named parse; `cargo test --
    --nocapture` does not; `npm test -- src/a.test.ts` and `pytest -- tests/x.py` keep
    their paths (the script's runner, and pytest, take them as scope)."""
    mark = "-args" if runner == "go test" else "--"
    if mark not in args:
        return list(args)
    cut = args.index(mark)
    head, tail = list(args[:cut]), list(args[cut + 1 :])
    if runner in _TAIL_IS_FLAGS:
        return head
    if runner not in ("cargo test", "cargo bench", "cargo nextest"):
        return [*head, "--", *tail]
    kept: list[str] = []
    it = iter(tail)
    for a in it:
        flag = a.partition("=")[0]
        if not a.startswith("-"):
            kept.append(a)
        elif flag in _LIBTEST_NARROWING:
            value = a.partition("=")[2] or (next(it, "") if flag == "--skip" else "")
            kept.append(f"{flag}={value}" if value else flag)
        elif flag in _LIBTEST_VALUE_FLAGS and "=" not in a:
            next(it, None)
    return [*head, *kept]


def _script_step(workdir: str, script: str, args: list[str]) -> Step | None:
    """A project script run by its path: a check only when its name or its first
    argument says so (`./build.sh`, `./dev.sh test`), never a built program."""
    name = _clean_path(script)
    base = name.rsplit("/", 1)[-1]
    if not _PATH_WORD.fullmatch(name):
        return None  # no path: a quoted text (a PowerShell here-string), a variable
    if name.startswith(_TEMP_DIRS):
        return None  # a throw-away script the agent wrote outside the project
    if base in _ALIASED_RUNNERS:
        # `./gradlew build`, `./node_modules/.bin/vitest run`, `bin/rails test`.
        return _step(Invocation(workdir, (base, *args)))
    dirs = name.split("/")[:-1]
    if base == "manage.py" and args[:1] == ["test"]:
        return Step(workdir, "manage.py test", _scope(args[1:]))
    if not _SCRIPT_FILE.search(base) and any(d in _BUILT_DIRS for d in dirs):
        return None  # a program the build made: running it checks nothing
    if any(d in _OUTPUT_DIRS for d in dirs) or ships(base):
        return None  # `node dist/cli.js test`, `./deploy.sh build`: the program, shipping it
    first = next((a for a in args if not a.startswith("-")), "")
    if says_check(base) or (
        _TASK_WORD.fullmatch(first) and first not in _SHIPPING and says_check(first)
    ):
        return Step(workdir, f"script {name}", _scope(args))
    return None


_SCRIPT_INTERPRETERS = re.compile(r"^(?:bash|sh|zsh|node|tsx|ts-node|ruby|perl|deno|python[\d.]*)$")
# Runners also run by a path: the wrapper scripts and installed binaries of known tools.
_ALIASED_RUNNERS = frozenset(
    {"gradlew", "mvnw", "rails", "rspec", "rake", "pytest", "jest", "vitest", "tsc", "eslint",
     "mocha", "phpunit", "pest", "playwright", "golangci-lint", "mypy", "ruff", "biome",
     "vue-tsc", "svelte-check", "cargo", "go", "make", "ctest"}
)  # fmt: skip
# Standard-library modules whose names could read like checks (`python -m compileall`).
_STDLIB_TOOLS = frozenset({"compileall", "py_compile", "doctest", "test"})


# --- the runners: one function each, asked in order (`_RUNNERS`) ------------------------
#
# Each takes the command's working directory, its program's base name and the words after
# it, and says which check it runs (None: none). The first runner whose matcher claims the
# program decides, whatever it answers.

RunnerStep = Callable[[str, str, list[str]], Step | None]


def _package_script_step(workdir: str, base: str, rest: list[str]) -> Step | None:
    """`npm test`, `pnpm -F api run build`, `yarn lint`, `bun test`: the project's own
    script, a check when its name says so (`npm run dev` is a server)."""
    if base == "bun" and rest[:1] == ["test"]:
        return Step(workdir, "bun test", _scope(rest[1:]))
    while rest and rest[0].startswith("-"):
        rest = rest[2:] if rest[0] in _PM_VALUE_FLAGS else rest[1:]
    if rest[:1] in (["run"], ["run-script"]):
        rest = rest[1:]
    elif rest[:1] == ["t"]:
        rest = ["test", *rest[1:]]
    if not rest or not _CHECK_SCRIPT.match(rest[0]):
        return None
    return Step(workdir, f"npm run {rest[0]}", _scope(rest[1:]))


def _task_step(workdir: str, base: str, rest: list[str]) -> Step | None:
    """`make`, `gradle test`, `just lint`: the targets are part of the check."""
    runner = _TASK_RUNNERS[base]
    targets = [w for w in rest if not w.startswith("-") and "=" not in w]
    if runner == "make" and any(w.startswith(("-n", "--dry-run")) for w in rest):
        return None
    # No target: the default one (a build). Targets: one must say it checks, and
    # none may ship or run the program (`make install`, `make run-uvicorn`).
    # A target that is a file (`app.o`, `bin/server`) is built.
    if targets and (
        not any(t == "all" or "." in t or "/" in t or says_check(t) for t in targets)
        or any(t in _SHIPPING for t in targets)
    ):
        return None
    return Step(workdir, " ".join([runner, *targets]), ())


def _names_subcommand(base: str, rest: list[str]) -> bool:
    # `node --test`, `deno test` are runners; `node scripts/check.mjs` runs a script.
    return base in _SUBCOMMAND_RUNNERS and (
        not _SCRIPT_INTERPRETERS.match(base)
        or (bool(rest) and rest[0] in _SUBCOMMAND_RUNNERS[base])
    )


def _subcommand_step(workdir: str, base: str, rest: list[str]) -> Step | None:
    """`cargo test`, `go vet ./...`, `ruff check`: the subcommand names the check."""
    sub = next((w for w in rest if not w.startswith("-") or w in ("--test", "--build")), None)
    if sub is None or sub not in _SUBCOMMAND_RUNNERS[base]:
        if base == "ruff" and (not rest or rest[0].startswith("-") or "." in rest[0]):
            return Step(workdir, "ruff check", _scope(rest))
        return None
    i = rest.index(sub)
    runner = f"{base} {sub}"
    if runner == "ruff format" and "--check" not in rest:
        return None  # a formatter that formats checks nothing
    if runner == "cmake --build":
        return Step(workdir, "cmake --build", ())
    args = rest[i + 1 :]
    if runner == "cargo nextest" and args[:1] == ["run"]:
        args = args[1:]
    return Step(workdir, runner, _scope(_runner_args(runner, args)))


def _plain_step(workdir: str, base: str, rest: list[str]) -> Step | None:
    """`pytest tests/x.py`, `tsc --noEmit`, `prettier --check .`: the program is the check."""
    if base in ("prettier", "black", "isort") and not any(
        w in ("--check", "-c", "--diff", "--list-different", "-l") for w in rest
    ):
        return None  # formatting, not checking
    runner = "pytest" if base == "py.test" else base
    if runner == "vitest" and rest[:1] in (["run"], ["related"]):
        rest = rest[1:]
    if runner == "playwright":
        if rest[:1] != ["test"]:
            return None  # `playwright install`, `show-report`, `codegen`
        rest = rest[1:]
    return Step(workdir, runner, _scope(rest))


def _interpreted_step(workdir: str, base: str, rest: list[str]) -> Step | None:
    """A project script run by its interpreter: `bash build.sh`, `python scripts/x.py`."""
    if base == "deno" and rest[:1] == ["run"]:
        rest = rest[1:]
    if PYTHON_NAME.match(base) and rest[:1] == ["-m"] and len(rest) > 1:
        # `python -m app.main` runs the program; `python -m scripts.check_types`, by
        # its name, checks; `python -m json.tool`, `venv`, `pip` are tools.
        module = rest[1]
        if says_check(module.rsplit(".", 1)[-1]) and module.split(".")[0] not in _STDLIB_TOOLS:
            return Step(workdir, f"python -m {module}", _scope(rest[2:]))
        return None
    pos = [w for w in rest if not w.startswith("-")]
    if pos and _SCRIPT_FILE.search(pos[0]) and not rest[0].startswith(("-c", "-e")):
        return _script_step(workdir, pos[0], rest[rest.index(pos[0]) + 1 :])
    return None


# (does this runner claim the program, given its base name and the words after it; its step)
_RUNNERS: tuple[tuple[Callable[[str, list[str]], bool], RunnerStep], ...] = (
    (lambda base, _rest: base in _NODE_PMS, _package_script_step),
    (lambda base, _rest: base in _TASK_RUNNERS, _task_step),
    (_names_subcommand, _subcommand_step),
    (lambda base, _rest: base in _PLAIN_RUNNERS, _plain_step),
    (lambda base, _rest: bool(_SCRIPT_INTERPRETERS.match(base)), _interpreted_step),
)


def _describes_itself(base: str, rest: list[str]) -> bool:
    """`cargo --help`, `go help test`; `npm test -- --help`: the words after `--` are the
    script's tool's (vitest, jest), which describes itself; no compiler runs first, unlike
    `cargo test -- --help`."""
    if _asks_for_help(rest):
        return True
    return base in _NODE_PMS and "--" in rest and _asks_for_help(rest[rest.index("--") + 1 :])


def _moved_workdir(base: str, workdir: str, rest: list[str]) -> tuple[str, list[str]]:
    """`npm --prefix web test`, `pnpm -C web test`, `make -C dir`: the directory moves;
    the words less the option."""
    if base not in (*_NODE_PMS, "make", "gmake"):
        return workdir, rest
    for flag in ("--prefix", "-C", "--dir", "--cwd"):
        if flag in rest[:-1]:
            i = rest.index(flag)
            workdir = posixpath.normpath(posixpath.join(workdir, rest[i + 1]))
            rest = rest[:i] + rest[i + 2 :]
    return workdir, rest


def _step(inv: Invocation) -> Step | None:
    if not inv.words:
        return None
    program, rest = inv.words[0], list(inv.words[1:])
    base = program.rsplit("/", 1)[-1]
    if _describes_itself(base, rest):
        return None
    workdir, rest = _moved_workdir(base, inv.workdir, rest)
    if "/" in program and base not in _ALIASED_RUNNERS and not _SCRIPT_INTERPRETERS.match(base):
        # A project script or a program by its path: `./build.sh`, `./target/release/app`.
        return _script_step(workdir, program, rest)
    for claims, step in _RUNNERS:
        if claims(base, rest):
            return step(workdir, base, rest)
    return None


@lru_cache(maxsize=4096)
def check_of(command: str, workdir: str = "") -> Check | None:
    """The check a shell command runs, or None (`git add`, `ls`, `npm install`, `npm run
    dev` run none). `workdir` is the command's cwd relative to its project."""
    steps: list[Step] = []
    for inv in normalise(command):
        step = _step(inv)
        if step is None:
            continue
        if workdir and not step.workdir.startswith(("/", "~")):
            wd = posixpath.normpath(posixpath.join(workdir, step.workdir or "."))
            step = Step("" if wd == "." else wd, step.runner, step.scope)
        elif step.workdir == ".":
            step = Step("", step.runner, step.scope)
        if step not in steps:
            steps.append(step)
    return Check(tuple(steps)) if steps else None


def _scope_covers(wide: str, narrow: str) -> bool:
    if wide == narrow:
        return True
    if wide.endswith("/..."):
        wide = wide[:-4]
    if "=" in wide or "=" in narrow:
        return False  # a filter covers only itself
    return narrow.startswith((wide + "/", wide + "::", wide + " > ", wide + ":"))


def step_covers(wide: Step, narrow: Step) -> bool:
    """A passing `wide` shows that `narrow` passes too (design §2.15)."""
    if wide.workdir != narrow.workdir:
        return False
    if wide.runner != narrow.runner:
        # The project's own test/build/lint script, run whole, runs the usual runner.
        script = wide.runner.removeprefix("npm run ").split(":", 1)[0]
        return (
            wide.runner.startswith("npm run ")
            and not wide.scope
            and narrow.runner in _SCRIPT_COVERS.get(script, frozenset())
        )
    if not wide.scope:
        return True
    # A name filter only narrows the files it is given: `wide` covers when it has no filter
    # `narrow` lacks, and its files and packages cover `narrow`'s.
    w_paths, w_filters = _split_filters(wide.scope)
    n_paths, n_filters = _split_filters(narrow.scope)
    if not w_filters <= n_filters:
        return False
    if not w_paths:
        return True
    return bool(n_paths) and all(any(_scope_covers(w, n) for w in w_paths) for n in n_paths)


def _split_filters(scope: tuple[str, ...]) -> tuple[list[str], set[str]]:
    paths = [s for s in scope if not s.startswith(_NAME_FILTERS)]
    return paths, {s for s in scope if s.startswith(_NAME_FILTERS)}


def covers(wide: Check, narrow: Check) -> bool:
    """Every step of `narrow` is covered by a step of `wide`."""
    return all(any(step_covers(w, n) for w in wide.steps) for n in narrow.steps)


def relative_workdir(cwd: str | None, project: str | None) -> str:
    """`cwd` relative to the project root ("" at the root or when unknown)."""
    if not cwd or not project:
        return ""
    c, p = cwd.replace("\\", "/").rstrip("/"), project.replace("\\", "/").rstrip("/")
    if c == p or not c.startswith(p + "/"):
        return ""
    return c[len(p) + 1 :]
