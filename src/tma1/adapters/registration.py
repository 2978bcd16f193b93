"""What `tma1 install` puts on disk for one agent, as a list of registrations.

Each registration plans its change first (pure: the current bytes in, the wanted bytes
out), so `--dry-run` can print it and a refusal happens before anything is written.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tma1.adapters import jsonhooks
from tma1.adapters.files import FilePlan, atomic_write, read_bytes
from tma1.adapters.hookscript import render_script
from tma1.config import Settings

STATE_FILE = "install-state.json"


@dataclass
class InstallState:
    """What install found before it first touched a file, so uninstall can put it back.

    Lives in the data dir (0600: it may hold a copy of the user's settings).
    """

    path: Path
    files: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, data_dir: Path) -> InstallState:
        path = data_dir / STATE_FILE
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            files = raw.get("files", {}) if isinstance(raw, dict) else {}
        except (FileNotFoundError, ValueError):
            files = {}
        return cls(path=path, files=files if isinstance(files, dict) else {})

    def save(self) -> None:
        if not self.files:
            self.path.unlink(missing_ok=True)
            return
        data = json.dumps({"version": 1, "files": self.files}, indent=2) + "\n"
        atomic_write(self.path, data.encode("utf-8"), mode=0o600)


class Registration(Protocol):
    label: str
    path: Path

    def plan_install(self, state: InstallState) -> FilePlan: ...

    def plan_uninstall(self, state: InstallState) -> FilePlan: ...

    def record(self, change: FilePlan, state: InstallState, *, installing: bool) -> None:
        """Update `state` after `change` was applied."""
        ...


@dataclass
class ScriptRegistration:
    """The hook script itself, under the data dir."""

    path: Path
    settings: Settings
    agent: str
    label: str = "hook script"

    def plan_install(self, state: InstallState) -> FilePlan:
        before = read_bytes(self.path)
        script = render_script(self.settings, self.agent).encode("utf-8")
        return FilePlan(self.path, before, script, self.label, mode=0o755, show_diff=False)

    def plan_uninstall(self, state: InstallState) -> FilePlan:
        return FilePlan(self.path, read_bytes(self.path), None, self.label, show_diff=False)

    def record(self, change: FilePlan, state: InstallState, *, installing: bool) -> None:
        if not installing:
            with contextlib.suppress(OSError):
                self.path.parent.rmdir()  # only when empty: other adapters' scripts stay


@dataclass
class JsonHooksRegistration:
    """Our handler on each of `events` in a Claude-Code-shaped JSON hooks file."""

    path: Path
    events: tuple[str, ...]
    handler: dict[str, Any]
    marker: str
    matcher: str | None
    label: str
    # Keys under "hooks" that are settings, not events (jsonhooks.parse_document).
    config_keys: frozenset[str] = frozenset()
    # A different handler for some events (`tma1 install --transport http`).
    per_event: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The handlers carry the hook token: the file is written 0600.
    secret: bool = False
    _dir_existed: bool = field(default=True, init=False, repr=False)

    def _current(self) -> tuple[bytes | None, jsonhooks.Doc]:
        before = read_bytes(self.path)
        return before, jsonhooks.parse_document(self.path, before, self.config_keys)

    def plan_install(self, state: InstallState) -> FilePlan:
        self._dir_existed = self.path.parent.is_dir()
        before, doc = self._current()
        wanted = jsonhooks.add_hooks(
            doc, self.events, self.handler, self.marker, self.matcher, self.per_event
        )
        after = jsonhooks.installed_bytes(self.path, before, doc, wanted)
        mode = 0o600 if self.secret and after != before else None
        return FilePlan(self.path, before, after, self.label, mode=mode, backup=True)

    def plan_uninstall(self, state: InstallState) -> FilePlan:
        before, doc = self._current()
        if before is None or jsonhooks.count_ours(doc, self.marker) == 0:
            return FilePlan(self.path, before, before, self.label, backup=True)
        rec = state.files.get(str(self.path), {})
        wanted = jsonhooks.remove_hooks(
            doc,
            self.marker,
            drop_empty_hooks=rec.get("created_hooks_key", True),
            keep_events=set(rec.get("existing_events", ())),
        )
        after = jsonhooks.uninstalled_bytes(self.path, before, wanted, rec)
        # A file that install created and uninstall deletes needs no backup.
        return FilePlan(self.path, before, after, self.label, backup=after is not None)

    def record(self, change: FilePlan, state: InstallState, *, installing: bool) -> None:
        key = str(self.path)
        if installing:
            before_doc = jsonhooks.parse_document(self.path, change.before, self.config_keys)
            if jsonhooks.count_ours(before_doc, self.marker):
                if key not in state.files:
                    # Installed before, and the state file is gone: what the user had then
                    # is unknown, so uninstall will only take ours out.
                    state.files[key] = {"created_file": False, "original": None}
                return  # a reinstall: keep what the first install found
            state.files[key] = {
                "created_file": change.before is None,
                "created_dir": not self._dir_existed,
                "created_hooks_key": "hooks" not in before_doc,
                "existing_events": sorted(before_doc.get("hooks") or {}),
                "original": None if change.before is None else change.before.decode("utf-8"),
            }
            return
        rec = state.files.pop(key, None)
        if rec and rec.get("created_dir") and change.after is None:
            with contextlib.suppress(OSError):
                self.path.parent.rmdir()


def plan_all(
    registrations: list[Registration], state: InstallState, *, installing: bool
) -> list[tuple[Registration, FilePlan]]:
    """Plan every change before any is applied: one refusal stops them all."""
    ordered = registrations if installing else list(reversed(registrations))
    return [
        (reg, reg.plan_install(state) if installing else reg.plan_uninstall(state))
        for reg in ordered
    ]
