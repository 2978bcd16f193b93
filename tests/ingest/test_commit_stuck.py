"""A hook worker that never comes back (a read that blocks for good) is reported:
`/api/health`'s status is no longer "ok", and `ingest.stuck_workers` counts it."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from ingestkit import make_ran

import tma1.ingest.commit
from tma1.config import Settings
from tma1.events import HookEvent
from tma1.live.service import build_service


def test_a_stuck_worker_makes_health_degraded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tma1.ingest.commit, "STUCK_AFTER_S", 0.2)
    (tmp_path / "data").mkdir()
    settings = Settings(data_dir=tmp_path / "data", watch_files=False)
    service = build_service(settings)
    release = threading.Event()

    def blocked(_ev: HookEvent) -> str:
        release.wait(30)  # what an open() of a FIFO with no writer did
        return ""

    async def hook() -> str:
        return await service.ingest.submit_async(make_ran("stuck-1"), blocked)

    t = threading.Thread(target=lambda: asyncio.run(hook()), daemon=True)
    service.start()
    try:
        assert service.health()["status"] == "ok"
        t.start()
        deadline = time.monotonic() + 10
        health = service.health()
        while health["ingest"]["stuck_workers"] == 0 and time.monotonic() < deadline:  # type: ignore[index]
            time.sleep(0.05)
            health = service.health()
        assert health["ingest"]["stuck_workers"] == 1  # type: ignore[index]
        assert health["ingest"]["database_available"] is True  # type: ignore[index]
        assert health["status"] == "degraded"
        release.set()
        t.join(10)
        assert service.health()["status"] == "ok"
    finally:
        release.set()
        service.stop()
        service.store.close()
