"""The checks `mnemo doctor` runs inside the owner, on the open store: the SQLite file, the dense index, the
backups, the stored vectors' model. (The checks around the owner process: mnemo/daemon/doctor.py.)"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING

from mnemo.core.api_types.results import DoctorCheck, DoctorResult
from mnemo.core.errors import MnemoError
from mnemo.core.models import Context
from mnemo.core.recovery import backup
from mnemo.core.store import repair_hint

if TYPE_CHECKING:
    from mnemo.core.engine import Engine


def check(name: str, status: str, detail: str, fix: str | None = None) -> DoctorCheck:
    return {"name": name, "status": status, "detail": detail, "fix": fix}


def run_checks(engine: Engine, ctx: Context) -> DoctorResult:
    """Checks that need the open store (run inside the owner process). A damaged store is reported at once with
    the repair command; nothing else that would read it runs."""
    checks = [_store_check(engine)]
    if checks[0]["status"] == "fail":
        return {"checks": [*checks, backup_check(engine.home)]}
    for name, fn in (("index", _index_check), ("backups", lambda e: backup_check(e.home)),
                     ("vectors", _vectors_check), ("relation check", _native_check),
                     ("published files", lambda e: _published_check(e, ctx))):
        try:
            got = fn(engine)
            if got is not None:
                checks.append(got)
        except Exception as exc:  # noqa: BLE001 - one failing check must not hide the others
            checks.append(_failed_check(engine, name, exc))
            if checks[-1]["name"] == "store":
                break
    return {"checks": checks}


def _published_check(engine: Engine, ctx: Context) -> DoctorCheck | None:
    """The agent files `mnemo publish` wrote for this project: up to date, or which are not (None: never
    published here)."""
    from mnemo.core.sharing.publish import status

    st = status(engine, ctx)
    if not st["published"]:
        return None
    stale = [f for f in st["files"] if f["state"] != "up to date"]
    if not stale:
        return check("published files", "ok", f"{len(st['files'])} agent file(s) up to date")
    return check("published files", "warn", "; ".join(f"{f['path']}: {f['state']}" for f in stale),
                 "run `mnemo publish --dry-run` to see the diff, then `mnemo publish`")


def _store_check(engine: Engine) -> DoctorCheck:
    db = engine.home / "mnemo.db"
    result = engine.store.damage
    if result is None:
        try:
            result = engine.store.integrity_check()
        except Exception as exc:  # noqa: BLE001
            result = f"cannot read the store: {exc}"
    if result == "ok":
        return check("store", "ok", f"SQLite integrity_check: ok ({db})")
    engine.store.damage = engine.store.damage or result  # every request now says what to run
    return check("store", "fail", f"the store file is damaged: {result} ({db})", repair_hint(db))


def _failed_check(engine: Engine, name: str, exc: Exception) -> DoctorCheck:
    if isinstance(exc, sqlite3.DatabaseError):
        exc = engine.store.store_error(exc, f"run the {name} check")
    if isinstance(exc, MnemoError) and exc.code == "store_corrupt":
        return check("store", "fail", exc.message, exc.hint)
    return check(name, "fail", f"the check failed: {exc}", getattr(exc, "hint", None))


def _index_check(engine: Engine) -> DoctorCheck:
    synced = engine.wait_indexed(timeout=60)
    idx = engine.index
    if idx is None or not idx.ready:
        return check("index", "fail", f"dense index not ready ({idx.last_error if idx else 'not opened'})",
                      "it rebuilds automatically from the store; run doctor again in a minute")
    counts = idx.counts()
    want = {p: engine.store.count_vectors(p) for p in engine.store.parts()}
    bad = {p: (counts.get(p, 0), n) for p, n in want.items() if counts.get(p, 0) != n}
    if bad:
        engine.schedule_index_repair()
        return check("index", "warn", f"index counts differ from the store {bad}; rebuild scheduled")
    if idx.dormant:
        return check("index", "ok", f"{sum(want.values())} vectors in {len(want)} partitions, searched exactly in "
                     f"the mapped vector file (the ANN index opens once a partition holds more than "
                     f"{idx.min_rows:,})")
    return check("index", "ok", f"{sum(want.values())} vectors in {len(want)} partitions, in sync"
                  + ("" if synced else " (still catching up)") + f"; {idx.rebuilds} rebuild(s) since start")


def _vectors_check(engine: Engine) -> DoctorCheck:
    model_ids = engine.store.vector_models()
    foreign = [m for m in model_ids if m != engine.model_id]
    return check("vectors", "ok" if not foreign else "warn",
                  f"stored with {model_ids or ['(none yet)']}; current model {engine.model_id}",
                  "they are re-embedded automatically on the next owner start" if foreign else None)


def _native_check(engine: Engine) -> DoctorCheck:
    """Whether this process runs the relation check compiled (mnemo/native.py) or from its source, and why."""
    from mnemo import native
    from mnemo.core.relation import compare  # noqa: F401  (loaded by every write: the status is what runs)

    status = native.status()
    if all(s == "compiled" for s in status.values()):
        return check("relation check", "ok", "compiled with mypyc (" + ", ".join(status) + ")")
    if native.mode() == "0":
        return check("relation check", "ok", "runs from its Python source (MNEMO_NATIVE=0)")
    if native.stale(native.read_manifest()):
        return check("relation check", "warn", "runs from its Python source: its compiled build is older than the "
                     "source (the same decisions; the check takes ~0.4 ms more a write)",
                     "run `python scripts/build_native.py` in the checkout, then `mnemo daemon stop`")
    return check("relation check", "ok", "runs from its Python source (not compiled here: scripts/build_native.py "
                 "needs mypy and a C compiler)")


def backup_check(home: Path) -> DoctorCheck:
    backups = backup.list_backups(home)
    every = backup.interval()
    if every <= 0:
        return check("backups", "warn", "rolling backups are off (backup_interval = 0)",
                      "`mnemo config set backup_interval 86400` keeps a daily backup (and unset MNEMO_BACKUP_INTERVAL"
                      " if it is set)")
    if not backups:
        return check("backups", "warn", f"no backup yet in {backup.backup_dir(home)}",
                      "the owner takes one within a minute of starting, then daily")
    age_h = (time.time() - backups[0]["time"]) / 3600
    status = "ok" if age_h <= 2 * every / 3600 else "warn"
    daily = sum(b["kind"] == "daily" for b in backups)
    return check("backups", status, f"{len(backups)} kept ({daily} daily, {len(backups) - daily} after write "
                                     f"volume; newest {backups[0]['iso']}, {age_h:.1f} h ago, "
                                     f"{backups[0]['bytes']:,} bytes) in {backup.backup_dir(home)}",
                  None if status == "ok" else "is the owner running? it takes a backup once a day")
