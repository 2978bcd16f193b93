"""`tma1 doctor`'s ingest line: the hook events lost since the server started, each cause
counted, or a stuck hook worker."""

from __future__ import annotations

from tma1.commands.doctor import FAIL, OK, WARN, check_ingest


def test_no_loss_is_one_ok_line() -> None:
    check = check_ingest({"ingest": {"dropped_disk_full": 0, "stuck_workers": 0}})
    assert check.status == OK and "no hook event lost" in check.line()


def test_losses_are_summed_and_named_with_the_fix() -> None:
    check = check_ingest(
        {"ingest": {"dropped_disk_full": 35, "rejected_by_db": 2, "journal_unreadable": 1}}
    )
    assert check.status == WARN
    line = check.line()
    assert "38 hook events lost" in line
    assert "35 the data dir's disk was full" in line and "2 refused by the database" in line
    assert "free space in the data dir" in line


def test_a_stuck_worker_fails() -> None:
    check = check_ingest({"ingest": {"stuck_workers": 2, "longest_busy_s": 95.0}})
    assert check.status == FAIL and "2 hook worker(s) stuck for 95.0 s" in check.line()
