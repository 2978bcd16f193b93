"""The documentation a user needs lives in the repository (README.md and docs/) and names
every setting and every command."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from tma1.cli import build_parser

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / "src" / "tma1" / "config.py"


def _docs_text() -> str:
    return "\n".join(
        p.read_text(encoding="utf-8") for p in [REPO / "README.md", *(REPO / "docs").glob("*.md")]
    )


def test_every_setting_is_documented() -> None:
    names = set(re.findall(r"\"(TMA1_[A-Z0-9_]+)\"", CONFIG.read_text(encoding="utf-8")))
    assert len(names) >= 10, names
    text = _docs_text()
    missing = sorted(n for n in names if n not in text)
    assert missing == [], f"settings in config.py with no word in README.md or docs/: {missing}"


def test_every_subcommand_is_documented() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    commands = sorted(sub.choices)
    assert {"serve", "doctor", "mute", "unmute", "install", "anomalies"} <= set(commands)
    text = _docs_text()
    missing = [c for c in commands if not re.search(rf"tma1 {re.escape(c)}\b", text)]
    assert missing == [], f"commands never shown as `tma1 <command>` in README/docs: {missing}"


def test_readme_links_stay_inside_the_repository() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+)", readme)
    outside = [link for link in links if link.startswith("..") or link.startswith("/")]
    assert outside == [], outside
    for link in links:
        if not link.startswith("http"):
            assert (REPO / link).exists(), link
    assert "../shared" not in readme  # a clone does not have it


def test_every_http_route_is_documented(tmp_path: Path) -> None:
    from tma1.config import Settings
    from tma1.server.app import create_app
    from tma1.service import build_service

    settings = Settings(data_dir=tmp_path, watch_files=False)
    service = build_service(settings)
    try:
        app = create_app(service, hook_token="t")
        # The OpenAPI schema: FastAPI's own list of every route, included routers too.
        paths = sorted(p for p in app.openapi()["paths"] if p.startswith("/api/"))
    finally:
        service.stop()
    assert "/api/hooks" in paths and "/api/mutes" in paths, paths
    def params_as_one(text: str) -> str:  # `{id}` in the README, `{emit_id}` in the code
        return re.sub(r"\{[^}/]+\}", "{}", text)

    readme = params_as_one((REPO / "README.md").read_text(encoding="utf-8"))
    missing = [p for p in paths if params_as_one(p) not in readme]
    assert missing == [], f"routes with no word in README.md: {missing}"
