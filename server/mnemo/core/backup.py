"""Rolling backups of the store and restore (SPEC §7 "Recovery").

The owner copies `mnemo.db` with SQLite's online backup API (a consistent copy while it keeps writing) into
`<home>/backups/mnemo-<UTC time>.db` once a day (`MNEMO_BACKUP_INTERVAL` seconds, default 86400; 0 turns it off)
and keeps the newest 7 (`MNEMO_BACKUP_KEEP`). A copy is written to a temporary name, checked, fsynced and renamed,
so a crash never leaves a half backup under a real name.

`mnemo doctor --repair` (with the owner stopped and its lock held) checks the store; when SQLite's
`integrity_check` fails, the damaged files are moved to `<home>/damaged-<time>/`, the newest backup that passes the
check is copied in, the dense index is moved aside (it is rebuilt from the restored store), and the report says
what was lost: every change after the backup's time, with a count of the memories the damaged file still showed
as changed after it when it can be read at all.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mnemo.core.env import env_float

log = logging.getLogger("mnemo.backup")

DIR = "backups"
PREFIX = "mnemo-"
STAMP = "%Y%m%dT%H%M%SZ"


def interval() -> float:
    """Seconds between backups (0: no backups): `mnemo config set backup_interval`, MNEMO_BACKUP_INTERVAL."""
    from mnemo.core import config

    return float(config.value("backup_interval"))


def keep() -> int:
    from mnemo.core import config

    return int(config.value("backup_keep"))


def backup_dir(home: Path) -> Path:
    return Path(home) / DIR


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _parse(name: str) -> float | None:
    if not (name.startswith(PREFIX) and name.endswith(".db")):
        return None
    try:
        return datetime.strptime(name[len(PREFIX):-3], STAMP).replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def list_backups(home: Path) -> list[dict[str, Any]]:
    """Backups, newest first: name, path, time (epoch seconds), iso, bytes."""
    out = []
    d = backup_dir(home)
    if not d.is_dir():
        return out
    for p in d.iterdir():
        ts = _parse(p.name)
        if ts is None or not p.is_file():
            continue
        out.append({"name": p.name, "path": str(p), "time": ts, "iso": _iso(ts), "bytes": p.stat().st_size})
    return sorted(out, key=lambda b: -b["time"])


def check_db(path: Path) -> str:
    """`ok`, or what SQLite says is wrong (never raises)."""
    if not Path(path).exists():
        return "missing"
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
            if conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE name='memories'").fetchone()[0] != 1:
                return "not a Mnemo store (no memories table)"
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return f"cannot read: {exc}"
    msgs = [str(r[0]) for r in rows]
    return "ok" if msgs == ["ok"] else "; ".join(msgs[:5])


def _fsync_dir(d: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def take_backup(home: Path, now: float | None = None) -> dict[str, Any]:
    """Copy the store now (online: the owner keeps writing). Returns the backup's description."""
    home = Path(home)
    src_path = home / "mnemo.db"
    d = backup_dir(home)
    d.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        os.chmod(d, 0o700)
    now = time.time() if now is None else now
    name = f"{PREFIX}{datetime.fromtimestamp(now, UTC).strftime(STAMP)}.db"
    final = d / name
    tmp = d / f".{name}.tmp"
    t0 = time.perf_counter()
    src = sqlite3.connect(src_path, timeout=30)
    try:
        dst = sqlite3.connect(tmp)
        try:
            src.backup(dst)  # one step: a consistent copy of the last committed state
            dst.execute("PRAGMA journal_mode=DELETE")
            ok = dst.execute("PRAGMA quick_check").fetchone()[0]
        finally:
            dst.close()
    finally:
        src.close()
    if ok != "ok":
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"the backup copy failed its check: {ok}")
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.chmod(tmp, 0o600)
    os.replace(tmp, final)
    _fsync_dir(d)
    pruned = prune(home)
    info = {"name": name, "path": str(final), "time": now, "iso": _iso(now), "bytes": final.stat().st_size,
            "seconds": round(time.perf_counter() - t0, 3), "pruned": pruned}
    log.info("backup %s (%d bytes, %.2f s); pruned %s", name, info["bytes"], info["seconds"], pruned or "nothing")
    return info


def prune(home: Path) -> list[str]:
    """Keep the newest `keep()` backups; drop temporary files older than an hour (a crash mid-backup)."""
    removed = []
    for b in list_backups(home)[keep():]:
        with contextlib.suppress(OSError):
            os.unlink(b["path"])
            removed.append(b["name"])
    d = backup_dir(home)
    for p in d.glob(".*.tmp") if d.is_dir() else []:
        with contextlib.suppress(OSError):
            if time.time() - p.stat().st_mtime > 3600:
                p.unlink()
    return removed


def backup_due(home: Path, now: float | None = None) -> bool:
    every = interval()
    if every <= 0 or not (Path(home) / "mnemo.db").exists():
        return False
    now = time.time() if now is None else now
    newest = list_backups(home)
    return not newest or now - newest[0]["time"] >= every


def backup_loop(home: Path, stopping: threading.Event) -> None:
    """The owner's backup thread: a first backup shortly after start when one is due, then every interval (re-read
    each round: `mnemo config set backup_interval` applies to a running owner within a minute)."""
    if stopping.wait(max(0.0, env_float("MNEMO_BACKUP_DELAY", 60.0))):
        return
    while True:
        try:
            if backup_due(home):
                take_backup(home)
        except Exception as exc:  # noqa: BLE001 - a failed backup is retried next round; the owner keeps serving
            log.warning("backup failed: %s", exc)
        if stopping.wait(min(interval() or 60.0, 60.0)):
            return


def _changed_after(db: Path, ts: float) -> int | None:
    """Memories the damaged file still shows as changed after `ts` (None: unreadable)."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return int(conn.execute("SELECT COUNT(*) FROM memories WHERE updated_at > ?", (ts,)).fetchone()[0])
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return None


def restore_newest_good(home: Path) -> dict[str, Any]:
    """Replace a damaged store with the newest backup that passes the check. The caller holds the owner lock."""
    home = Path(home)
    db = home / "mnemo.db"
    good = None
    skipped = []
    for b in list_backups(home):
        state = check_db(Path(b["path"]))
        if state == "ok":
            good = b
            break
        skipped.append({"name": b["name"], "problem": state})
    stamp = datetime.now(UTC).strftime(STAMP)
    if good is None:
        return {"restored": False, "skipped_backups": skipped,
                "message": "no good backup to restore" + (" (all failed their check)" if skipped else ""),
                "hint": f"the store is unchanged; try `sqlite3 {db} .recover | sqlite3 {home}/recovered.db`, "
                        "or move mnemo.db away to start empty"}
    maybe_lost = _changed_after(db, good["time"]) if db.exists() else None
    aside = home / f"damaged-{stamp}"
    aside.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        p = home / f"mnemo.db{suffix}"
        if p.exists():
            os.replace(p, aside / p.name)
    chroma = home / "chroma"
    if chroma.exists():  # derived from the store: rebuilt from the restored one at the next start
        os.replace(chroma, aside / "chroma")
    tmp = home / ".mnemo.db.restore"
    shutil.copyfile(good["path"], tmp)
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.chmod(tmp, 0o600)
    os.replace(tmp, db)
    _fsync_dir(home)
    lost = f"every change after {good['iso']} (the backup's time)"
    if maybe_lost:
        lost += f"; the damaged store still showed {maybe_lost} memories changed after it"
    return {"restored": True, "restored_from": good["name"], "backup_time": good["iso"], "lost": lost,
            "maybe_lost_memories": maybe_lost, "damaged_moved_to": str(aside), "skipped_backups": skipped,
            "message": f"restored the backup of {good['iso']}; lost: {lost}"}


__all__ = ["backup_loop", "backup_due", "check_db", "interval", "keep", "list_backups", "prune",
           "restore_newest_good", "take_backup"]
