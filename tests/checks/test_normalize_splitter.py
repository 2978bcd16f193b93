"""The shell splitter (design §2.21): quotes, `$(…)`, heredocs whose bodies are data, and
parentheses inside words. What it splits decides what tma1 takes for a command, so a path
with `(group)` in it or a line of a heredoc must never become a "script" or a check.
"""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tma1.checks import check_of, normalise, split_shell


def _commands(line: str) -> list[str]:
    return [seg.strip() for seg, _ in split_shell(line) if seg.strip()]


def test_a_parenthesis_inside_a_path_is_part_of_the_path() -> None:
    # A Next.js route group, as an agent listed it (the old splitter took `(payload)` for
    # a subshell and `/admin/importMap.js` for a script, a check).
    line = "ls -l apps/web/src/app/(payload)/admin/importMap.js"
    assert _commands(line) == [line]
    assert check_of(line) is None
    assert _commands("cat src/app/(group)/page.tsx | head -5") == [
        "cat src/app/(group)/page.tsx",
        "head -5",
    ]


def test_a_subshell_and_a_substitution_still_split() -> None:
    assert _commands("(cd web && npm test)") == ["cd web", "npm test"]
    assert [op for _, op in split_shell("echo $(pwd) && ls")] == ["$(", ")", "&&", ""]
    # A `)` that closes nothing is a character, not the end of anything.
    assert _commands("echo a) b") == ["echo a) b"]


def test_a_heredoc_body_is_data_not_commands() -> None:
    # The shape of a `cat > x <<'EOF'` an agent wrote a config with: its lines (a glob, a
    # path to a build script) are file content, not commands to run.
    line = "cat > vite.config.ts <<'EOF'\nsrc/pages/**/*.{js,ts}\n./build.sh\nEOF\nnpm test"
    assert _commands(line) == ["cat > vite.config.ts <<'EOF'", "npm test"]
    check = check_of(line)
    assert check is not None and check.identity == "npm run test"
    # A body with no end runs to the end of the line; `<<-` allows tabs before the word.
    assert _commands("cat <<EOF\n./build.sh\nls") == ["cat <<EOF"]
    assert _commands('python3 <<-"PY"\n\tprint(1)\n\tPY\nmake test') == [
        'python3 <<-"PY"',
        "make test",
    ]
    # A here-string is no heredoc: the next line is a command.
    assert _commands("cat <<< 'x'\nmake test") == ["cat <<< 'x'", "make test"]


def test_heredoc_lines_are_never_checks() -> None:
    # sessions-batch3/codex/youtube-mcp-server-b96d6883/…: a quickstart.md written with a
    # heredoc whose lines show `python3 -m unittest` — the old splitter made it a check.
    line = (
        "cat > specs/001/quickstart.md <<'EOF'\n# Quickstart\n\n"
        "python3 -m unittest discover -s tests\nEOF"
    )
    assert check_of(line) is None
    # sessions-batch3/codex/taskly-b22357e5/…: a package.json written the same way.
    line = 'cat <<\'EOF\' > packages/telemetry/package.json\n{\n  "events:": "./x.sh"\n}\nEOF'
    assert check_of(line) is None


def test_normalise_drops_the_heredoc_word() -> None:
    (inv,) = normalise("python3 << 'EOF'\nimport sys\nEOF")
    assert inv.words == ("python3",)


_SHELL_ALPHABET = st.sampled_from(list("ab./ >|&;()$`'\"\\\n\t-=<EOF"))


@settings(max_examples=1500, deadline=None)
@given(st.text(_SHELL_ALPHABET, max_size=60) | st.text(max_size=60))
@example("((((")
@example("))))")
@example("cat <<")
@example("cat <<''\n\n")
@example("$($($(")
def test_the_splitter_answers_on_any_input(line: str) -> None:
    parts = split_shell(line)
    assert parts and parts[-1][1] == ""
    normalise(line)
    check_of(line)  # the hook path runs all three on every shell command


_WORD = st.text(st.sampled_from(list("abcxyz_-.")), min_size=1, max_size=8)


@settings(max_examples=500, deadline=None)
@given(st.lists(_WORD, min_size=1, max_size=4), _WORD, st.lists(_WORD, max_size=3))
def test_parentheses_inside_a_word_are_kept(dirs: list[str], group: str, rest: list[str]) -> None:
    path = "/".join([*dirs, f"({group})", *rest]) + "/page.tsx"
    line = f"ls -l {path} && wc -l {path}"
    assert _commands(line) == [f"ls -l {path}", f"wc -l {path}"]
