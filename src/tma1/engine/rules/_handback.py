"""Does the agent's final message hand a failing check back to the user?

The Stop block exists against one harm (the seed): an agent announcing success over a
check that fails. An agent that stops *saying* the check still fails — naming it, its
command, its file or its error as still failing, unresolved, a blocker, left for later —
has told the user what a block would tell it; blocking it, or telling it again on the next
prompt, is telling it what it just said (issue 15, pattern 7). Claude Code and Codex send
that final message in the Stop payload (`last_assistant_message`).

Read clause by clause. A clause is *open* when it says a failure stands: a strong marker
("still fails", "remaining errors", "blocker", "unresolved", "could not fix",
"pre-existing", "I'm fixing …"), or a present failure ("fails", "broken", "has 3 errors") with
no success word beside it ("fixed the failing test" is a success). A failure it negates
("no errors remain", "no longer fails", "fixed all remaining warnings") is not one, nor
is a guess ("there may still be lint issues"): the agent does not say the check fails.
An open clause hands the check back when it names the check, or when its sentence does
and the clause names no *other* kind of check ("tests pass, but the build still fails"
does not hand back a failing test run), and a sentence that quotes only other check
commands is about those ("`npm run compile:ts` fails" hands back no `go test`).

Success claims never hand anything back: "all tests pass" over a failing build still
blocks, and a message that calls the work done ("ready for production", "fixed all …",
"everything works") hands nothing back whatever else it says. A bare question to the
user hands nothing back on its own ("Want me to commit?"); one about the failure carries
a failure word and counts through it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from tma1.checks import Check, check_of
from tma1.engine.window import SessionWindow
from tma1.storable.textmemo import text_cache

_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
_CLAUSES = re.compile(
    r";\s+|,\s+(?=but\b|while\b|though\b|although\b|whereas\b|however\b)"
    r"|\s+(?:but|while|whereas|although|though|however)\s+",
    re.IGNORECASE,
)
_NEGATED = re.compile(
    r"\b(?:no|zero|0|none of the|without(?: any)?)\s+(?:\w+\s+){0,2}?"
    r"(?:errors?|failures?|failing\s+\w+|issues?|warnings?|blockers?|problems?)\b"
    r"(?:\s+remain(?:ing|s)?)?"
    r"|\bno longer\s+(?:\w+\s+)?(?:fail\w*|errors?|broken|breaks?|times?\s+out|hangs?)"
    r"|\b(?:not|n't|never)\s+(?:\w+\s+)?(?:failing|broken|fail)\b"
    r"|\b(?:fix(?:ed|ing)?|resolv(?:ed|ing)|address(?:ed|ing)|clean(?:ed|ing)\s+up|removed|"
    r"eliminated|suppress(?:ed|ing)|silenc(?:ed|ing))\s+(?:(?:all|the|of|every)\s+)*(?:\w+\s+)?remaining\s+\w+",
    re.IGNORECASE,
)
# A guess is no report: "there may still be some lint issues" does not say the check fails.
_HEDGE = re.compile(
    r"\b(?:may|might|possibly|perhaps|probably|presumably)\b|\bcould\s+(?:still\s+)?be\b",
    re.IGNORECASE,
)
# A message that calls the work done, whatever else it says, announces success: "the test
# failures are mock setup issues … ready for production" is the harm the block is for.
_DONE = re.compile(
    r"\bready\s+for\s+(?:production|merge|merging|review|deploy\w*|release|use)\b"
    r"|\bproduction[- ]ready\b"
    r"|\beverything\s+(?:now\s+)?(?:works|passes|builds|compiles|is\s+(?:working|green|passing))"
    r"|\b(?:successfully|fully)\s+(?:fixed|resolved|completed|implemented)\b"
    r"|\b(?:fixed|resolved)\s+all\b"
    r"|\ball\s+(?:\w+\s+)?(?:errors|issues|warnings|failures)\s+(?:are\s+|have\s+been\s+)?"
    r"(?:now\s+)?(?:fixed|resolved|gone)",
    re.IGNORECASE,
)
_STRONG = re.compile(
    r"\bstill\s+(?:\w+\s+)?(?:fail\w*|broken|red|errors?|erroring|has\s+errors?|does\s*n[o']t|won'?t|can'?t|"
    r"times?\s+out|timing\s+out|hangs?)"
    r"|\bremaining\s+(?:\w+\s+){0,2}(?:errors?|failures?|issues?|warnings?|problems?|blockers?)"
    r"|\b(?:errors?|failures?|issues?|problems?)\s+(?:remain|left|outstanding)"
    r"|\bremain(?:s)?\s+(?:failing|broken|open|unresolved)"
    r"|\bunresolved\b|\bnot\s+(?:yet\s+)?(?:resolved|fixed|passing)\b|\bblockers?\b|\bblocked\b"
    # A fix denied, an issue owned up to: "that I haven't resolved yet", "known issue: …".
    r"|\b(?:have|has)(?:\s+not|n'?t)\s+(?:yet\s+)?(?:been\s+)?(?:resolved|fixed|addressed)"
    r"|\bknown\s+(?:issues?|failures?|problems?)\b|\bran\s+out\s+of\s+time\b"
    r"|\b(?:could\s*n[o']t|can\s*n[o']t|cannot|unable\s+to|did\s*n[o']t|was\s*n[o']t\s+able\s+to)"
    r"\s+(?:\w+\s+)?(?:fix|resolve|get|make|solve|finish)"
    r"|\bpre-?existing\s+(?:\w+\s+){0,3}?(?:errors?|failures?|issues?|problems?|bugs?|breakage)"
    # (a dot inside a word, `src/types.ts`, does not end the sentence)
    r"|\b(?:errors?|failures?|fails?|failing)\b(?:[^.\n]|\.(?=\S)){0,80}"
    r"\b(?:pre-?existing|not\s+caused\s+by|outside\s+(?:of\s+)?(?:my|our|the|this)"
    r"|unrelated\s+to\s+(?:my|our|the|this))\b"
    r"|\bleft\s+(?:to\s+fix|failing|broken|open|unfixed)\b|\bneeds?\s+(?:fixing|to\s+be\s+fixed)"
    r"|\b(?:I'?m|I\s+am|I'?ll|I\s+will)\s+(?:now\s+)?(?:fixing|cleaning|working\s+on|fix|clean|address)"
    r"|\b(?:does\s*n[o']t|does\s+not|won'?t|will\s+not)\s+(?:yet\s+)?(?:compile|build|pass|type-?check)",
    re.IGNORECASE,
)
# Failure words that say something fails *now*. A bare "errors" does not: "the build
# errors were caused by X" describes what the agent fixed.
_WEAK = re.compile(
    r"\b(?:fails|failing|broken|breaks|(?:is|are)\s+red)\b|\b(?:tests|checks|builds|specs)\s+fail\b"
    # The failure said in other words: an exit status, "errors out", "times out".
    r"|\bexit(?:s|ed)?\s+(?:with\s+)?(?:non-?zero|code\s+[1-9]\d*|status\s+[1-9]\d*)"
    r"|\berrors?\s+out\b|\b(?:time|times|timed)\s+out\b"
    r"|\b(?:there\s+(?:are|is)|has|have|with|shows?|reports?|hit)\s+(?:still\s+)?"
    r"(?:\d+|some|several|many|a\s+few|a\s+(?:big\s+)?(?:cluster|bunch|number|lot)\s+of)\s+"
    r"(?:\w+\s+){0,2}(?:errors?|failures?|problems?)\b",
    re.IGNORECASE,
)
_SUCCESS = re.compile(
    r"\b(?:pass(?:es|ed|ing)?|succeed(?:s|ed)?|success(?:ful(?:ly)?)?|green|fixed|resolved|"
    r"works|working|clean(?:ly)?|all\s+good|compiles)\b|✅",
    re.IGNORECASE,
)
# "All tests pass" calls the work done only when tests are the failing check.
_ALL_PASS = re.compile(
    r"\ball\s+(?:\w+\s+)?(tests|checks|builds?|specs|lints?)\s+(?:now\s+)?"
    r"(?:pass|are\s+passing|succeed|are\s+green)",
    re.IGNORECASE,
)
_WORD = re.compile(r"[\w][\w.\-]*")

# Words that name a kind of check, by what the check's runner does.
_KIND_WORDS = {
    "build": frozenset({"build", "builds", "compile", "compiles", "compilation", "compiler"}),
    "test": frozenset({"test", "tests", "suite", "spec", "specs"}),
    "lint": frozenset({"lint", "linter", "linting", "clippy", "warnings"}),
    "types": frozenset({"typecheck", "type-check", "types", "typescript", "tsc", "mypy"}),
}
_ALL_KIND_WORDS = frozenset().union(*_KIND_WORDS.values())
_KIND_OF_RUNNER = (
    ("types", re.compile(r"tsc|mypy|pyright|type-?check|compile:ts|\bcheck:types")),
    ("lint", re.compile(r"lint|clippy|ruff|flake8|eslint|staticcheck|vet\b")),
    ("test", re.compile(r"test|jest|vitest|mocha|spec|e2e|playwright|cypress|rspec|phpunit")),
    ("build", re.compile(r"build|check|compile|make|cargo|go |gcc|clang|rustc|tsc|gradle|mvn")),
)
# Runner words that name no check by themselves.
_GENERIC = frozenset({"run", "npm", "npx", "pnpm", "yarn", "bun", "uv", "python", "python3",
                      "poetry", "in", "the", "go", "exec", "-m", "cd"})  # fmt: skip
_CODE = re.compile(r"\b(?:[A-Z]{1,4}\d{3,5}|TS\d{4}|E\d{4})\b")


def check_terms(
    check: Check, files: Iterable[str] = (), error: str | None = None
) -> frozenset[str]:
    """The words that name this failing check in prose: its runner's words and kind words
    (a `cargo check` is "the build"), the files it fails in, its error codes."""
    terms: set[str] = set()
    for step in check.steps:
        runner = step.runner.lower()
        terms.add(runner)
        terms |= {w for w in re.split(r"[\s:/]+", runner) if len(w) > 2 and w not in _GENERIC}
        for kind, pattern in _KIND_OF_RUNNER:
            if pattern.search(runner):
                terms |= _KIND_WORDS[kind]
        if check.compiles:
            terms |= _KIND_WORDS["build"]
    for f in files:
        name = f.replace("\\", "/").rsplit("/", 1)[-1].lower()
        if name:
            terms.add(name)
    if error:
        terms |= {c.lower() for c in _CODE.findall(error)}
    return frozenset(terms)


def _names(text: str, terms: frozenset[str]) -> bool:
    low = text.lower()
    words = {w.strip(".-") for w in _WORD.findall(low)}
    return any((t in words) if " " not in t else (t in low) for t in terms)


def _open(clause: str) -> bool:
    text = _NEGATED.sub(" ", clause)
    if _HEDGE.search(text):
        return False
    if _STRONG.search(text):
        return True
    return bool(_WEAK.search(text)) and not _SUCCESS.search(text)


_CODE_SPAN = re.compile(r"`([^`\n]{2,200})`")


def _about_another_check(sentence: str, terms: frozenset[str]) -> bool:
    """The sentence quotes a check command, and none of them is this check: "`npm run
    compile:ts` fails" says nothing of a failing `go test`."""
    quoted = [check for span in _CODE_SPAN.findall(sentence) if (check := check_of(span))]
    return bool(quoted) and not any(
        _same_tool(step.runner, terms) for c in quoted for step in c.steps
    )


def _same_tool(runner: str, terms: frozenset[str]) -> bool:
    """`runner` is this check's, or the same tool's (`cargo build` for a `cargo check`):
    a word of it other than a kind word ("build", "test") is one of the check's."""
    low = runner.lower()
    words = set(re.split(r"[\s:/]+", low)) - _GENERIC - _ALL_KIND_WORDS
    return low in terms or bool(words & terms)


@text_cache(maxsize=1024)
def hands_back(message: str | None, terms: frozenset[str]) -> bool:
    """The final message says the check named by `terms` still fails (see the module)."""
    if not message or not terms:
        return False
    message = message.replace("’", "'")
    if _DONE.search(message) or any(
        m.group(1).lower() in terms or m.group(1).lower() == "checks"
        for m in _ALL_PASS.finditer(message)
    ):
        return False
    others = _ALL_KIND_WORDS - terms
    for sentence in _SENTENCES.split(message):
        if _about_another_check(sentence, terms):
            continue
        named = _names(sentence, terms)
        for clause in _CLAUSES.split(sentence):
            if not clause or not _open(clause):
                continue
            if _names(clause, terms) or (named and not _names(clause, others)):
                return True
    return False


def handed_back(window: SessionWindow, now: int, since: int, terms: frozenset[str]) -> bool:
    """A Stop after `since` (at or before `now`) handed the check named by `terms` back
    to the user: it is known, and neither a block nor a reminder is news."""
    for e in reversed(window.events):
        if e.ts < since:
            break
        if e.ts > now or e.hook_event_name != "Stop":
            continue
        message = e.metadata.get("last_assistant_message")  # the agent's final message
        if isinstance(message, str) and hands_back(message, terms):
            return True
    return False
