"""The scripted session: a small git project, and the moves that make each finding fire
within seconds (see `tma1.demo`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tma1.demo.agent import DemoAgent
from tma1.demo.server import CONTEXT_THRESHOLD, DemoServer, wait_for
from tma1.engine.anomaly import Kind

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
    if not wait_for(watcher_ready, 15):
        out.line(out.red("       the file watcher did not start; external changes go unseen"))
    agent.usage(9_800, "I'll look at cart.py first.")
    agent.prompt("Give VIP customers a 10% discount")
    agent.read("cart.py")

    agent.say(out.bold("✎ a teammate saves cart.py in their editor"), "outside the agent")
    (agent.project / "cart.py").write_text(CART_TEAMMATE)
    if not wait_for(lambda: pending(Kind.EXTERNAL_MODIFIED_DURING_SESSION), 15):
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
        if n == 1:
            agent.prompt("The tests fail, try again")
    note = (
        "(transcript: the last request sent 31,700 prompt tokens; "
        f"the demo threshold is {CONTEXT_THRESHOLD:,})"
    )
    agent.note(note)
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
