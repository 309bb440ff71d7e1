"""Rolling backups of the store (SPEC §7 "Recovery").

The owner copies `mnemo.db` with SQLite's online backup API (a consistent copy while it keeps writing) into
`<home>/backups/`, at two rhythms:
Every number below is a store-wide setting (`mnemo config set backup_...`, or its environment variable):
- **daily** (`mnemo-<UTC time>.db`): every `MNEMO_BACKUP_INTERVAL` seconds (default 86400; 0 turns all backups
  off), the newest `MNEMO_BACKUP_KEEP` kept (default 7);
- **on write volume** (`mnemo-<UTC time>-w.db`): after `MNEMO_BACKUP_WRITES` writes (change-log entries: a
  remember, an edit, a forget, an indexed Markdown block; default 500; 0 off) since the newest backup, or after
  `MNEMO_BACKUP_WRITE_INTERVAL` seconds (default 3600; 0 off) when anything was written since it; never more
  often than every `MNEMO_BACKUP_MIN_GAP` seconds (default 300, which bounds the cost under heavy writing); the
  newest `MNEMO_BACKUP_KEEP_RECENT` kept (default 4). So at most 7 + 4 copies of the store are on disk.
The owner looks every `MNEMO_BACKUP_POLL` seconds (default 60). A copy is written to a temporary name, checked,
fsynced and renamed, so a crash never leaves a half backup under a real name, and a damaged store (whose copy
fails the check) never replaces a good backup.

`mnemo doctor --repair` (core/recovery/repair.py) salvages the damaged store and merges the newest backup that passes
`integrity_check` (`newest first` across both kinds).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mnemo.core import store_settings as config
from mnemo.core.environment import env_float
from mnemo.core.store.files import check_db, copy_db, last_change

log = logging.getLogger("mnemo.backup")

DIR = "backups"
PREFIX = "mnemo-"
STAMP = "%Y%m%dT%H%M%SZ"
WRITES_SUFFIX = "-w"


def interval() -> float:
    """Seconds between daily backups (0: no backups at all): `mnemo config set backup_interval`,
    MNEMO_BACKUP_INTERVAL."""
    return max(0.0, float(config.value("backup_interval")))


def keep(kind: str = "daily") -> int:
    return max(1, int(config.value("backup_keep_recent" if kind == "writes" else "backup_keep")))


def write_trigger() -> tuple[int, float, float]:
    """(writes, seconds, minimum gap) of the write-volume backups (0 turns a trigger off)."""
    return (max(0, int(config.value("backup_writes"))), max(0.0, float(config.value("backup_write_interval"))),
            max(0.0, float(config.value("backup_min_gap"))))


def backup_dir(home: Path) -> Path:
    return Path(home) / DIR


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _parse(name: str) -> tuple[float, str] | None:
    """(time, kind) of a backup file name, None for anything else."""
    if not (name.startswith(PREFIX) and name.endswith(".db")):
        return None
    stem = name[len(PREFIX):-3]
    kind = "writes" if stem.endswith(WRITES_SUFFIX) else "daily"
    try:
        return datetime.strptime(stem.removesuffix(WRITES_SUFFIX), STAMP).replace(tzinfo=UTC).timestamp(), kind
    except ValueError:
        return None


def list_backups(home: Path, kind: str | None = None) -> list[dict[str, Any]]:
    """Backups, newest first: name, path, time (epoch seconds), iso, bytes, kind (daily | writes)."""
    out: list[dict[str, Any]] = []
    d = backup_dir(home)
    if not d.is_dir():
        return out
    for p in d.iterdir():
        parsed = _parse(p.name)
        if parsed is None or not p.is_file() or (kind is not None and parsed[1] != kind):
            continue
        ts = parsed[0]
        out.append({"name": p.name, "path": str(p), "time": ts, "iso": _iso(ts), "bytes": p.stat().st_size,
                    "kind": parsed[1]})
    return sorted(out, key=lambda b: -b["time"])


def fsync_dir(d: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def take_backup(home: Path, now: float | None = None, kind: str = "daily") -> dict[str, Any]:
    """Copy the store now (online: the owner keeps writing). Returns the backup's description."""
    home = Path(home)
    src_path = home / "mnemo.db"
    d = backup_dir(home)
    d.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        os.chmod(d, 0o700)
    now = time.time() if now is None else now
    suffix = WRITES_SUFFIX if kind == "writes" else ""
    name = f"{PREFIX}{datetime.fromtimestamp(now, UTC).strftime(STAMP)}{suffix}.db"
    final = d / name
    tmp = d / f".{name}.tmp"
    t0 = time.perf_counter()
    ok = copy_db(src_path, tmp)  # online: a consistent copy of the last committed state
    if ok != "ok":
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"the backup copy failed its check: {ok}")
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.chmod(tmp, 0o600)
    os.replace(tmp, final)
    fsync_dir(d)
    pruned = prune(home)
    info = {"name": name, "path": str(final), "time": now, "iso": _iso(now), "bytes": final.stat().st_size,
            "kind": kind, "seconds": round(time.perf_counter() - t0, 3), "pruned": pruned}
    log.info("backup %s (%d bytes, %.2f s); pruned %s", name, info["bytes"], info["seconds"], pruned or "nothing")
    return info


def prune(home: Path) -> list[str]:
    """Keep the newest `keep(kind)` backups of each kind; drop temporary files older than an hour (a crash
    mid-backup)."""
    removed = []
    for kind in ("daily", "writes"):
        for b in list_backups(home, kind)[keep(kind):]:
            with contextlib.suppress(OSError):
                os.unlink(b["path"])
                removed.append(b["name"])
    d = backup_dir(home)
    for p in d.glob(".*.tmp") if d.is_dir() else []:
        with contextlib.suppress(OSError):
            if time.time() - p.stat().st_mtime > 3600:
                p.unlink()
    return removed


def backup_due(home: Path, now: float | None = None) -> str | None:
    """Which backup is due now: "daily", "writes" (enough written since the newest backup), or None."""
    every = interval()
    db = Path(home) / "mnemo.db"
    if every <= 0 or not db.exists():
        return None
    now = time.time() if now is None else now
    daily = list_backups(home, "daily")
    if not daily or now - daily[0]["time"] >= every:
        return "daily"
    n_writes, write_every, gap = write_trigger()
    newest = list_backups(home)[0]
    age = now - newest["time"]
    if age < gap or not (n_writes or write_every):
        return None
    written = (last_change(db) or 0) - (last_change(Path(newest["path"])) or 0)
    if (n_writes and written >= n_writes) or (write_every and written > 0 and age >= write_every):
        return "writes"
    return None


def backup_loop(home: Path, stopping: threading.Event) -> None:
    """The owner's backup thread: a first backup shortly after start when one is due, then whenever one is due
    (looked at every MNEMO_BACKUP_POLL seconds; the settings are re-read each round, so `mnemo config set
    backup_interval` applies to a running owner)."""
    if stopping.wait(max(0.0, env_float("MNEMO_BACKUP_DELAY"))):
        return
    while True:
        try:
            kind = backup_due(home)
            if kind:
                take_backup(home, kind=kind)
        except Exception as exc:  # noqa: BLE001 - a failed backup is retried next round; the owner keeps serving
            log.warning("backup failed: %s", exc)
        if stopping.wait(max(0.05, min(interval() or 60.0, env_float("MNEMO_BACKUP_POLL")))):
            return


__all__ = ["backup_loop", "backup_due", "check_db", "fsync_dir", "interval", "keep", "list_backups", "prune",
           "take_backup", "write_trigger"]
