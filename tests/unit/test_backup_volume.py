"""Backups on write volume (core/recovery/backup.py): after MNEMO_BACKUP_WRITES writes or MNEMO_BACKUP_WRITE_INTERVAL seconds
of writing, never more often than MNEMO_BACKUP_MIN_GAP, kept apart from the daily ones (bounded, rolling)."""

from __future__ import annotations

import time

from mnemo.core.embedding.embedder import HashEmbedder
from mnemo.core.engine import Engine
from mnemo.core.memory.write import remember
from mnemo.core.models import Context
from mnemo.core.recovery import backup

CTX = Context(project_id="git-bv", project_name="bv", branch="main", default_branch="main")


def write(home, n: int, start: int = 0) -> None:
    e = Engine(home, embedder=HashEmbedder(), start_indexer=False)
    try:
        for i in range(start, start + n):
            remember(e, CTX, f"volume note {i} about the billing worker retries")
    finally:
        e.close()


def test_a_backup_is_due_after_enough_writes_not_before(tmp_path, monkeypatch):
    monkeypatch.setenv("MNEMO_BACKUP_WRITES", "50")
    monkeypatch.setenv("MNEMO_BACKUP_MIN_GAP", "0")
    home = tmp_path / "h"
    write(home, 5)
    assert backup.backup_due(home) == "daily"
    backup.take_backup(home)
    write(home, 49, 5)
    assert backup.backup_due(home) is None  # 49 writes since the newest backup
    write(home, 1, 54)
    assert backup.backup_due(home) == "writes"
    taken = backup.take_backup(home, now=time.time() + 1, kind="writes")
    assert taken["name"].endswith("-w.db") and backup.list_backups(home)[0]["kind"] == "writes"
    assert backup.backup_due(home, now=time.time() + 2) is None  # counted from the newest backup of any kind


def test_the_minimum_gap_and_the_hourly_trigger(tmp_path, monkeypatch):
    monkeypatch.setenv("MNEMO_BACKUP_WRITES", "10")
    monkeypatch.setenv("MNEMO_BACKUP_MIN_GAP", "300")
    monkeypatch.setenv("MNEMO_BACKUP_WRITE_INTERVAL", "3600")
    home = tmp_path / "h"
    write(home, 1)
    now = time.time()
    backup.take_backup(home, now=now)
    write(home, 20, 1)
    assert backup.backup_due(home, now=now + 60) is None  # enough writes, but within the gap
    assert backup.backup_due(home, now=now + 301) == "writes"
    monkeypatch.setenv("MNEMO_BACKUP_WRITES", "0")  # volume trigger off: the hourly one still sees the writes
    assert backup.backup_due(home, now=now + 1800) is None
    assert backup.backup_due(home, now=now + 3601) == "writes"


def test_daily_and_write_backups_rotate_separately(tmp_path, monkeypatch):
    monkeypatch.setenv("MNEMO_BACKUP_KEEP", "3")
    monkeypatch.setenv("MNEMO_BACKUP_KEEP_RECENT", "2")
    home = tmp_path / "h"
    write(home, 1)
    t0 = 1_700_000_000
    for k in range(5):
        backup.take_backup(home, now=t0 + k * 86400)
        backup.take_backup(home, now=t0 + k * 86400 + 3600, kind="writes")
    kinds = [b["kind"] for b in backup.list_backups(home)]
    assert kinds.count("daily") == 3 and kinds.count("writes") == 2
    assert backup.list_backups(home, "daily")[-1]["time"] == t0 + 2 * 86400  # the oldest daily kept
