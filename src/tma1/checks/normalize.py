"""Shell command normalisation (design §2.15): split a line into simple commands, peel
wrappers and output plumbing, and tell file plumbing and reads from checks.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache


def split_shell(command: str) -> list[tuple[str, str]]:
    """(simple command, the operator after it), split at `||`, `&&`, `|&`, `$(`, `|`, `;`,
    `(`, `)`, newline and backquote, only outside quotes (design §2.21).

    A parenthesis inside a word is part of it (`src/app/(group)/page.tsx` is a path, not a
    subshell), and so is the `)` that closes it; a `)` that closes nothing is a character.
    A heredoc's body (`cat > x.ts <<'EOF'` … `EOF`) is data, not commands: it is left out
    (the `<<'EOF'` stays in its command). An unbalanced quote keeps the rest of the line in
    one piece (agents' broken greps).
    """
    return list(_split_shell(command))


# One token at a time: a quoted string (to its closing quote, or to the end of the line
# when it has none), an escaped character, an operator, a heredoc or here-string
# operator, or a run of ordinary characters. A regex step per token, not a Python step per
# character: Codex sends whole patches as commands (and a heredoc body is skipped in one
# search). Not `shlex`: it has no heredocs and steps through every character in Python;
# not a bash grammar (tree-sitter-bash): like bash, it takes `a/(b)/c` for a subshell.
_SHELL_TOKEN = re.compile(
    r"""'[^']*'?|"(?:\\.|[^"\\])*"?|\\.|(\|\||&&|\|&|\$\(|[|;()\n`])|(<<<|<<-?)|"""
    r"""[^'"\\|&;()$\n`<]+|.""",
    re.DOTALL,
)
# The word that names a heredoc's end: quoted, escaped or bare.
_HEREDOC_WORD = re.compile(r"""[ \t]*(?:'([^'\n]*)'|"([^"\n]*)"|\\?([\w.\-+/@%:,=~]+))""")


@lru_cache(maxsize=256)
def _heredoc_end(word: str) -> re.Pattern[str]:
    # Bash wants the word alone on its line (after tabs, with `<<-`); agents indent it.
    return re.compile(rf"^[ \t]*{re.escape(word)}[ \t]*$", re.MULTILINE)


@lru_cache(maxsize=4096)
def _split_shell(command: str) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    buf: list[str] = []
    parens: list[bool] = []  # open parentheses: True = inside a word, False = a subshell
    heredocs: list[str] = []  # words whose bodies start after the next newline
    pos, end = 0, len(command)
    while pos < end:
        m = _SHELL_TOKEN.match(command, pos)
        if m is None:  # never: `.` matches any character
            break
        pos = m.end()
        op = m.group(1)
        if m.group(2):  # `<<`, `<<-`: the word that ends the body follows
            buf.append(m.group(2))
            if m.group(2) != "<<<" and (w := _HEREDOC_WORD.match(command, pos)):
                buf.append(w.group(0))
                pos = w.end()
                word = w.group(1) if w.group(1) is not None else w.group(2) or w.group(3)
                if word:
                    heredocs.append(word)
            continue
        if op == "(" and buf and buf[-1] and not buf[-1][-1].isspace():
            parens.append(True)  # `(group)` inside a path, `arr=(a b)`, `<(cmd)`
            op = None
        elif op == "(" or op == "$(":
            parens.append(False)
        elif op == ")":
            if not parens or parens.pop():
                op = None  # closes a word's parenthesis, or nothing
        elif op == "|" and buf and buf[-1].endswith(">"):
            op = None  # `>|` is a redirect, not a pipe
        if not op:
            buf.append(m.group(0))
            continue
        out.append(("".join(buf), op))
        buf = []
        if op == "\n":
            for word in heredocs:  # each body in turn, up to its word's own line
                body_end = _heredoc_end(word).search(command, pos)
                pos = body_end.end() if body_end else end
            heredocs.clear()
    out.append(("".join(buf), ""))
    return tuple(out)


_WRAPPER = re.compile(
    r"^(?:[A-Za-z_]\w*=\S*\s+|sudo\s+(?:-\S+\s+)*|time\s+|nice\s+|env\s+|command\s+|exec\s+|"
    r"timeout\s+(?:-\S+\s+)*\d+\w?\s+|xvfb-run\s+|dotenv\s+(?:-\S+\s+)*--\s+|"
    r"npx\s+(?:--yes\s+|-y\s+)?|bunx\s+|pnpm\s+(?:exec|dlx)\s+|yarn\s+(?:exec|dlx)\s+|"
    r"uv\s+run\s+|poetry\s+run\s+|pipenv\s+run\s+|hatch\s+run\s+|pdm\s+run\s+|"
    r"bundle\s+exec\s+|python[\d.]*\s+-m\s+|(?:ba|z)?sh\s+-l?c\s+['\"]?|\S*/(?=\w))"
)


def simple_commands(command: str) -> list[str]:
    """The simple commands of a shell line, wrappers (env, time, npx, …) peeled off."""
    out = []
    for segment, _ in split_shell(command):
        seg = segment.strip().lstrip("&!").strip()
        for _ in range(6):
            m = _WRAPPER.match(seg)
            if not m or not m.group(0):
                break
            seg = seg[m.end() :]
        if seg:
            out.append(seg)
    return out


_PRINTERS = frozenset({"cat", "head", "tail", "nl", "bat", "batcat", "less", "more", "sed"})
# Options that take a value, per printer (`head -n 50 f`, `sed -e 's/a/b/' f`).
_VALUE_OPTIONS = {
    "head": frozenset({"-n", "-c", "--lines", "--bytes"}),
    "tail": frozenset({"-n", "-c", "--lines", "--bytes", "-s", "--pid"}),
    "sed": frozenset({"-e", "-f", "--expression", "--file", "-l"}),
}
_MAYBE_PRINTER = re.compile(rf"\b(?:{'|'.join(sorted(_PRINTERS))})\b")
_REDIRECT = re.compile(r"^\d*(?:>>?|<)&?$")  # `>` alone: the target is the next token
_REDIRECTED = re.compile(r"^\d*[<>]")  # `2>/dev/null`, `>out.txt`


def files_read_by(command: str) -> list[str]:
    """Files a read-only shell command prints: `cat f`, `sed -n '1,80p' f`, `head -n 50 f`.

    Codex has no Read tool; this is how it reads. `sed -i` edits, so it is no read.
    """
    return list(_files_read_by(command))


@lru_cache(maxsize=2048)
def _files_read_by(command: str) -> tuple[str, ...]:
    if not _MAYBE_PRINTER.search(command):
        return ()
    out: dict[str, None] = {}
    for seg in simple_commands(command):
        try:
            tokens = _words(seg)
        except ValueError:
            continue
        name = tokens[0].rsplit("/", 1)[-1] if tokens else ""
        if name not in _PRINTERS:
            continue
        args = tokens[1:]
        if name == "sed" and any(t.startswith(("-i", "--in-place")) for t in args):
            continue
        takes_value = _VALUE_OPTIONS.get(name, frozenset())
        positional: list[str] = []
        scripted = False
        skip = False
        for t in args:
            if skip:
                skip = False
            elif t in takes_value or _REDIRECT.match(t):
                skip = True  # the option's value, or the redirection's target
                scripted = scripted or t in ("-e", "-f", "--expression", "--file")
            elif not t.startswith(("-", "+", "&")) and not t.isdigit() and not _REDIRECTED.match(t):
                positional.append(t)
        if name == "sed" and not scripted:
            positional = positional[1:]  # the first plain argument is the sed script
        for p in positional:
            out.setdefault(p, None)
    return tuple(out)


# Nothing shlex treats specially, and no character str.split() takes for a space and
# shlex does not (\v \f \x1c-\x1f).
_PLAIN_WORDS = re.compile(r"[^'\"\\\x0b\x0c\x1c-\x1f]*")


def _words(segment: str) -> list[str]:
    """`shlex.split(segment)`; a segment without quotes or backslashes is just its words."""
    if segment.isascii() and _PLAIN_WORDS.fullmatch(segment):
        return segment.split()
    return shlex.split(segment)


_PLUMBING_HEAD = re.compile(
    r"^(?:git\s+(?!commit|push)\S+|git$|gh|ls|cat|less|head|tail|wc|sort|uniq|cut|tr|tee|"
    r"rm|rmdir|cp|mv|mkdir|touch|chmod|chown|ln|cd|pushd|popd|pwd|echo|printf|grep|egrep|rg|"
    r"ag|find|fd|sed|awk|diff|stat|file|which|type|sleep|kill|pkill|ps|curl|wget|open|code|"
    r"true|false|test|\[)(?=$|\s)"
)


@lru_cache(maxsize=4096)
def runs_only_plumbing(command: str) -> bool:
    """Every part of the command only moves, reads or lists files (git, ls, rm, grep, …)."""
    segs = simple_commands(command)
    return bool(segs) and all(_PLUMBING_HEAD.match(seg) for seg in segs)


_FILTER_HEAD = re.compile(
    r"^\s*(?:tail|head|grep|egrep|fgrep|rg|tee|less|more|cat|wc|sort|uniq|cut|sed|awk|"
    r"column|jq)(?=$|\s)"
)


# --- normalised invocations (design §2.15) ------------------------------------------------
#
# A check is recognised by its runner, not its spelling. `normalise` turns a shell line into
# the simple commands it runs, each as (working directory, words): a leading `cd DIR &&`
# moves the working directory, wrappers and env assignments are peeled, output plumbing
# after a pipe and redirections are dropped, and so are flags that only change verbosity,
# colour or report format. What remains is what `identity.check_of` reads.


@dataclass(frozen=True, slots=True)
class Invocation:
    workdir: str  # relative to the command's cwd ("" = the cwd itself), `/`-separated
    words: tuple[str, ...]


# Wrappers that run the rest of the line as the command: (words they consist of, how many
# option words may follow them before the command).
_WRAPPER_WORDS: tuple[tuple[tuple[str, ...], frozenset[str]], ...] = (
    (("time",), frozenset({"-p"})),
    (("nice",), frozenset()),
    (("command",), frozenset()),
    (("exec",), frozenset()),
    (("sudo",), frozenset({"-E", "-H"})),
    (("xvfb-run",), frozenset({"-a"})),
    (("npx",), frozenset({"--yes", "-y", "--no-install", "--no"})),
    (("bunx",), frozenset()),
    (("pnpm", "exec"), frozenset()),
    (("pnpm", "dlx"), frozenset()),
    (("yarn", "exec"), frozenset()),
    (("yarn", "dlx"), frozenset()),
    (("npm", "exec"), frozenset({"--yes", "-y", "--"})),
    (("uv", "run"), frozenset({"--frozen", "--locked", "--no-sync", "--offline", "-q", "--"})),
    (("poetry", "run"), frozenset()),
    (("pipenv", "run"), frozenset()),
    (("hatch", "run"), frozenset()),
    (("pdm", "run"), frozenset()),
    (("rye", "run"), frozenset()),
    (("bundle", "exec"), frozenset()),
    (("nix", "develop", "--command"), frozenset()),
    (("nix", "develop", "-c"), frozenset()),
    (("dotenv", "--"), frozenset()),
)
# Python modules that are runners: `python -m pytest` is `pytest`.
_PY_MODULE_RUNNERS = frozenset(
    {"pytest", "mypy", "ruff", "pylint", "flake8", "black", "isort", "pyright", "unittest",
     "tox", "nox", "coverage", "django"}
)  # fmt: skip
_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")
PYTHON_NAME = re.compile(r"^python[\d.]*$")
_SHELLS = frozenset({"bash", "sh", "zsh"})
# Flags that only change how the output looks, never what is checked.
_COSMETIC = re.compile(
    r"^(?:-v+|--verbose|-q+|--quiet|-s|--silent|--color(?:=.*)?|--colou?rs?|--no-colou?r|"
    r"--reporter(?:=.*)?|--reporters(?:=.*)?|--format(?:=.*)?|--tb(?:=.*)?|-r[aAfEsxXpPwN]+|"
    r"--pretty(?:=.*)?|--no-pretty|--progress(?:=.*)?|--no-progress|--ci|--noEmit|"
    r"--no-fund|--no-audit|--loglevel(?:=.*)?|--message-format(?:=.*)?|--durations(?:=.*)?|"
    r"--show-error-codes|--no-error-summary|--output-format(?:=.*)?|--passWithNoTests)$"
)
# Flags whose value is a separate word, so the value is not taken for a path or target.
VALUE_FLAGS = frozenset(
    {"--reporter", "--reporters", "--format", "--tb", "--color", "-n", "--maxfail", "-j",
     "--jobs", "-c", "--config", "-o", "--timeout", "--target", "--features", "-F",
     "--profile", "--manifest-path", "--max-workers", "-w", "--workers", "--junitxml",
     "--cov", "--cov-report", "--cov-fail-under", "--log-level", "-f", "--seed", "--shard",
     "--env", "--rootdir", "--ignore", "--deselect", "--exclude", "--message-format",
     "--loglevel", "--output-format", "--durations", "-r", "--require", "--count",
     "-timeout", "-count", "-tags", "--tags", "-coverprofile", "--coverage-provider",
     "--testTimeout", "--workspace-root", "--filter", "--prefix", "-C", "--dir"}
)  # fmt: skip
# `>` alone: its target follows (`<<` alone: the heredoc's word; `<<<`: the string).
_REDIRECT_ALONE = re.compile(r"^(?:\d*|&)(?:>>?|<<?-?|<<<)&?$")
_REDIRECT_ATTACHED = re.compile(r"^(?:\d*|&)(?:>>?|<)")  # `2>&1`, `>out.txt`, `2>/dev/null`


def _without(
    words: list[str], dropped: Callable[[str], object], with_value: Callable[[str], object]
) -> list[str]:
    """`words` without the ones `dropped` names, nor the word after one `with_value` names."""
    out: list[str] = []
    skip = False
    for w in words:
        if skip:
            skip = False
        elif dropped(w):
            skip = bool(with_value(w))
        else:
            out.append(w)
    return out


def _peel(words: list[str]) -> tuple[list[str], str | None]:
    """Wrappers and env assignments off the front; (the command's words, a `bash -c`
    script to normalise in their place, if any)."""
    for _ in range(8):
        if not words:
            break
        head = words[0]
        if _ENV_ASSIGNMENT.match(head):
            words = words[1:]
            continue
        if head == "env":
            words = words[1:]
            while words and (_ENV_ASSIGNMENT.match(words[0]) or words[0].startswith("-")):
                words = words[1:]
            continue
        if head == "timeout":
            words = words[1:]
            while words and words[0].startswith("-"):
                words = words[1:]
            words = words[1:]  # the duration
            continue
        if PYTHON_NAME.match(head.rsplit("/", 1)[-1]) and len(words) > 2 and words[1] == "-m":
            if words[2] in _PY_MODULE_RUNNERS:
                words = words[2:]
                continue
            break
        if head in _SHELLS and len(words) >= 3 and words[1] in ("-c", "-lc", "-ic", "-l"):
            rest = words[2:] if words[1] != "-l" else words[3:] if words[2] == "-c" else []
            if rest:
                return [], rest[0]
            break
        for wrapper, options in _WRAPPER_WORDS:
            n = len(wrapper)
            if tuple(words[:n]) == wrapper:
                words = words[n:]
                while words and words[0] in options:
                    words = words[1:]
                break
        else:
            break
    return words, None


def _join_dir(base: str, sub: str) -> str:
    if sub.startswith(("/", "~")):
        return sub.rstrip("/") or "/"
    return posixpath.normpath(posixpath.join(base, sub)) if base else posixpath.normpath(sub)


_SUBSTITUTION = re.compile(r"\$\([^()'\"`]*\)|`[^`'\"]*`")
# Cosmetic flags whose value may follow as its own word (`--reporter dot`).
_COSMETIC_WITH_VALUE = frozenset(
    {"--reporter", "--reporters", "--format", "--tb", "--loglevel", "--message-format",
     "--output-format", "--durations"}
)  # fmt: skip


@lru_cache(maxsize=4096)
def normalise(command: str, _depth: int = 0) -> tuple[Invocation, ...]:
    """The simple commands a shell line runs, each with the directory it runs in (relative
    to the line's cwd) and its words, spelling removed (design §2.15)."""
    out: list[Invocation] = []
    workdir = ""
    piped = False
    # A command substitution inside a word (`GOCACHE=$(pwd)/.cache go test`) is part of
    # that word, not a command of its own: one placeholder word keeps the line's shape.
    command = _SUBSTITUTION.sub("X", command)
    for segment, op in split_shell(command):
        seg = segment.strip().lstrip("&!").strip()
        after_pipe, piped = piped, op in ("|", "|&")
        if not seg or (after_pipe and _FILTER_HEAD.match(seg)):
            continue  # output plumbing: `| tail -20`, `| grep FAIL`, `| tee log`
        try:
            words = _words(seg)
        except ValueError:
            words = seg.split()
        words, script = _peel(_without(words, _REDIRECT_ATTACHED.match, _REDIRECT_ALONE.match))
        if script is not None:
            if _depth < 2:
                inner = normalise(script, _depth + 1)
                out.extend(Invocation(_join_dir(workdir, i.workdir) if i.workdir else workdir,
                                      i.words) for i in inner)  # fmt: skip
            continue
        if not words:
            continue
        if words[0] in ("cd", "pushd") and len(words) <= 2:
            if op in ("&&", ";", "\n"):
                workdir = _join_dir(workdir, words[1]) if len(words) == 2 else "~"
            continue
        shown = _without(words, _COSMETIC.match, _COSMETIC_WITH_VALUE.__contains__)
        out.append(Invocation(workdir, tuple(shown)))
    return tuple(out)
