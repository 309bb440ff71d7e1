"""Recovery: the owner's rolling backups, and `mnemo doctor --repair` restoring the newest good one.

An owner started with a short backup delay takes a backup (SQLite online backup API) while a client keeps writing;
more notes follow; the store file is then damaged on disk. `mnemo doctor` reports the damage and what to run;
`mnemo doctor --repair` stops nothing that is not there, salvages what the damaged file still holds, merges the newest
backup that passes integrity_check, names the memories it could not recover, and the store works again with its
index rebuilt. Rotation keeps the newest 7; a backup taken during writes is consistent; the owner also takes backups
on write volume (MNEMO_BACKUP_WRITES), kept apart.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time

from _helpers import figure, stop_owner

from mnemo.core.identity import detect_context
from mnemo.core.memory.write import remember
from mnemo.core.recovery import backup
from mnemo.daemon.client import DaemonService


def cli(home, repo, *args, env=None):
    e = dict(os.environ, MNEMO_HOME=str(home), MNEMO_EMBEDDER="hash", **(env or {}))
    return subprocess.run([sys.executable, "-m", "mnemo", *args], cwd=repo, env=e, capture_output=True, text=True,
                          timeout=180)


def damage(db):
    """Overwrite the middle of the file (b-tree pages of the tables) with garbage, as a bad disk would."""
    size = db.stat().st_size
    with open(db, "r+b") as f:
        for off in range(4096 * 2, size - 4096, 4096 * 3):
            f.seek(off)
            f.write(os.urandom(1024))


def test_backup_then_damage_then_doctor_repair(tmp_path, git_repo, monkeypatch):
    home = tmp_path / "store"
    monkeypatch.setenv("MNEMO_HOME", str(home))
    monkeypatch.setenv("MNEMO_EMBEDDER", "hash")
    monkeypatch.setenv("MNEMO_BACKUP_DELAY", "1")
    ctx = detect_context(git_repo).to_dict()
    svc = DaemonService(home, client_name="recovery-test")
    before, after = [], []
    try:
        for i in range(60):
            before.append(svc.remember(ctx, " ".join(os.urandom(5).hex() for _ in range(6)) + f" before {i}")["memory"]["id"])
        deadline = time.time() + 60
        while not backup.list_backups(home) and time.time() < deadline:
            time.sleep(0.2)
        backups = backup.list_backups(home)
        assert backups, "the owner took no backup"
        c = sqlite3.connect(backups[0]["path"])
        in_backup = {r[0] for r in c.execute("SELECT id FROM memories")}
        c.close()
        time.sleep(1.1)  # later than the backup's second
        for i in range(15):
            after.append(svc.remember(ctx, " ".join(os.urandom(5).hex() for _ in range(6)) + f" after {i}")["memory"]["id"])
        doc = svc.doctor(ctx)
        assert {c["name"]: c["status"] for c in doc["checks"]}["backups"] == "ok"
    finally:
        svc.close()
        stop_owner(home)
    db = home / "mnemo.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    damage(db)
    assert backup.check_db(db) != "ok"
    r = cli(home, git_repo, "doctor", "--json")
    report = json.loads(r.stdout)
    store = [c for c in report["checks"] if c["name"] == "store"]
    assert r.returncode == 1 and store and store[0]["status"] == "fail" and "--repair" in store[0]["fix"]
    t0 = time.monotonic()
    r = cli(home, git_repo, "doctor", "--repair", "--json")
    took = time.monotonic() - t0
    rep = json.loads(r.stdout)
    repair = rep["repair"]["restore"]
    assert repair["restored"] and repair["restored_from"] == backups[0]["name"]
    assert backup.check_db(db) == "ok"
    # the store works again: everything before the backup is there, the index was rebuilt from it
    svc = DaemonService(home, client_name="recovery-check")
    try:
        svc.list_memories(ctx, limit=1000)
        doc = {c["name"]: c for c in svc.doctor(ctx)["checks"]}
        res = svc.recall(ctx, "before 7", include_docs=False)
    finally:
        svc.close()
        stop_owner(home)
    c = sqlite3.connect(db)
    have = {r[0] for r in c.execute("SELECT id FROM memories")}
    c.close()
    acked = before + after
    assert in_backup and in_backup <= set(acked)
    assert all(i in in_backup for i in before[:len(in_backup)])  # the backup: a consistent prefix of the writes
    kept = len(in_backup & have)
    lost = [i for i in acked if i not in have]
    assert in_backup <= have <= set(acked), "everything in the backup, nothing that was never written"
    assert sorted(repair["maybe_lost_memories"]) == sorted(lost), "what could not be recovered is named"
    assert doc["store"]["status"] == "ok" and doc["index"]["status"] == "ok"
    assert res["cards"]
    name = "test_recovery"
    figure(name, "backup taken by the owner while serving", backups[0]["name"], bytes=backups[0]["bytes"])
    figure(name, "damaged store detected by `mnemo doctor`", "yes", detail=store[0]["detail"][:80])
    figure(name, "`mnemo doctor --repair`", f"{took:.1f}", unit="s", exit_code=r.returncode)
    figure(name, "memories in the backup restored", f"{kept}/{len(in_backup)}")
    figure(name, "acknowledged after the backup: recovered from the damaged file",
           f"{sum(i in have for i in after)}/{len(after)}")
    figure(name, "acknowledged: lost, and named in the report", f"{len(lost)}/{len(acked)}",
           report=repair["lost"][:120])
    figure(name, "index after repair", doc["index"]["detail"][:60])


def test_online_backup_during_writes_is_consistent_and_rotation_keeps_seven(tmp_path, monkeypatch):
    from mnemo.core.embedding.embedder import HashEmbedder
    from mnemo.core.engine import Engine
    from mnemo.core.models import Context

    ctx = Context(project_id="git-bk", project_name="bk", branch="main", default_branch="main")
    home = tmp_path / "h"
    e = Engine(home, embedder=HashEmbedder(), start_indexer=False)
    stop = threading.Event()
    n = [0]

    def writer():
        while not stop.is_set():
            remember(e, ctx, f"busy note {n[0]} {os.urandom(6).hex()}")
            n[0] += 1

    t = threading.Thread(target=writer)
    t.start()
    taken = []
    try:
        for k in range(9):
            time.sleep(0.15)
            taken.append(backup.take_backup(home, now=1_700_000_000 + k * 86400))
    finally:
        stop.set()
        t.join()
        e.close()
    kept = backup.list_backups(home)
    assert len(kept) == 7 and kept[0]["name"] == taken[-1]["name"]
    counts = []
    for b in kept:
        assert backup.check_db(b["path"]) == "ok"
        c = sqlite3.connect(b["path"])
        mem, fts, vec = (c.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("memories", "fts", "vectors"))
        c.close()
        assert mem == fts == vec  # one transaction's rows are all there or none
        counts.append(mem)
    figure("test_recovery[online backup]", "backups taken during writes, consistent",
           f"{len(kept)}/{len(kept)}", rotation=f"kept 7 of {len(taken)}",
           seconds=max(b["seconds"] for b in taken))


def test_owner_takes_backups_on_write_volume(tmp_path, git_repo, monkeypatch):
    """After every MNEMO_BACKUP_WRITES writes the owner takes a backup of its own kind, bounded by
    MNEMO_BACKUP_KEEP_RECENT (before issue 13: one backup a day, whatever was written)."""
    home = tmp_path / "store"
    for k, v in {"MNEMO_HOME": str(home), "MNEMO_EMBEDDER": "hash", "MNEMO_BACKUP_DELAY": "0.2",
                 "MNEMO_BACKUP_POLL": "0.2", "MNEMO_BACKUP_WRITES": "40", "MNEMO_BACKUP_MIN_GAP": "0",
                 "MNEMO_BACKUP_KEEP_RECENT": "2"}.items():
        monkeypatch.setenv(k, v)
    ctx = detect_context(git_repo).to_dict()
    svc = DaemonService(home, client_name="volume-backup-test")
    seen: set[str] = set()
    try:
        for i in range(200):
            svc.remember(ctx, f"write volume note {i} {os.urandom(4).hex()}")
            seen |= {b["name"] for b in backup.list_backups(home, "writes")}
            if i % 20 == 0:
                time.sleep(1.1)  # backup names have a one-second resolution
        deadline = time.time() + 20
        while len(seen) < 3 and time.time() < deadline:
            time.sleep(0.2)
            seen |= {b["name"] for b in backup.list_backups(home, "writes")}
    finally:
        svc.close()
        stop_owner(home)
    kept = backup.list_backups(home, "writes")
    assert len(seen) >= 3, f"write-volume backups taken: {sorted(seen)}"
    assert len(kept) <= 2 and all(backup.check_db(b["path"]) == "ok" for b in kept)
    assert backup.list_backups(home, "daily"), "the daily backup is taken as before"
    figure("test_recovery[write volume]", "backups after every 40 writes (200 remembers)", len(seen),
           kept=len(kept))
