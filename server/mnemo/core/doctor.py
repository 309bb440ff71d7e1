"""`mnemo doctor`: check the model, the store, the index and the lock, and say what to fix."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mnemo.core.models import Context


def _check(name: str, status: str, detail: str, fix: str | None = None) -> dict[str, Any]:
    return {"name": name, "status": status, "detail": detail, "fix": fix}


def run_checks(engine, ctx: Context) -> dict[str, Any]:
    """Checks that need the open store (run inside the owner process)."""
    checks = []
    try:
        result = engine.store.integrity_check()
        checks.append(_check("store", "ok" if result == "ok" else "fail",
                             f"SQLite integrity_check: {result} ({engine.home / 'mnemo.db'})",
                             None if result == "ok" else "run `mnemo doctor --repair` to restore the newest good "
                                                         "backup"))
    except Exception as exc:  # noqa: BLE001
        checks.append(_check("store", "fail", f"cannot read the store: {exc}", "restore a backup"))
    synced = engine.wait_indexed(timeout=60)
    idx = engine.index
    if idx is None or not idx.ready:
        checks.append(_check("index", "fail", f"dense index not ready ({idx.last_error if idx else 'not opened'})",
                             "it rebuilds automatically from the store; run doctor again in a minute"))
    else:
        counts = idx.counts()
        want = {p: engine.store.count_vectors(p) for p in engine.store.parts()}
        bad = {p: (counts.get(p, 0), n) for p, n in want.items() if counts.get(p, 0) != n}
        if bad:
            engine.schedule_index_repair()
            checks.append(_check("index", "warn", f"index counts differ from the store {bad}; rebuild scheduled"))
        else:
            checks.append(_check("index", "ok", f"{sum(want.values())} vectors in {len(want)} partitions, in sync"
                                 + ("" if synced else " (still catching up)")
                                 + f"; {idx.rebuilds} rebuild(s) since start"))
    checks.append(backup_check(engine.home))
    model_ids = [r[0] for r in engine.store.conn().execute("SELECT DISTINCT model_id FROM vectors")]
    foreign = [m for m in model_ids if m != engine.model_id]
    checks.append(_check("vectors", "ok" if not foreign else "warn",
                         f"stored with {model_ids or ['(none yet)']}; current model {engine.model_id}",
                         "they are re-embedded automatically on the next owner start" if foreign else None))
    return {"checks": checks}


def backup_check(home: Path) -> dict[str, Any]:
    import time

    from mnemo.core import backup

    backups = backup.list_backups(home)
    every = backup.interval()
    if every <= 0:
        return _check("backups", "warn", "rolling backups are off (backup_interval = 0)",
                      "`mnemo config set backup_interval 86400` keeps a daily backup (and unset MNEMO_BACKUP_INTERVAL"
                      " if it is set)")
    if not backups:
        return _check("backups", "warn", f"no backup yet in {backup.backup_dir(home)}",
                      "the owner takes one within a minute of starting, then daily")
    age_h = (time.time() - backups[0]["time"]) / 3600
    status = "ok" if age_h <= 2 * every / 3600 else "warn"
    return _check("backups", status, f"{len(backups)} kept (newest {backups[0]['iso']}, {age_h:.1f} h ago, "
                                     f"{backups[0]['bytes']:,} bytes) in {backup.backup_dir(home)}",
                  None if status == "ok" else "is the owner running? it takes a backup once a day")


def repair_store(home: Path) -> dict[str, Any]:
    """Stop the owner, hold its lock, check the store, restore the newest good backup when it is damaged."""
    import time

    from mnemo.core import backup
    from mnemo.core.engine import OwnerLock
    from mnemo.core.errors import StoreLocked
    from mnemo.daemon.client import DaemonService
    from mnemo.daemon.paths import socket_path
    from mnemo.daemon.server import probe

    try:
        DaemonService(home, autostart=False).shutdown()
    except Exception:  # noqa: BLE001 - not running, or dying anyway
        pass
    lock = OwnerLock(home)
    deadline = time.monotonic() + 30
    while True:
        try:
            lock.acquire()
            break
        except StoreLocked:
            if time.monotonic() > deadline:
                return {"check": _check("repair", "fail", "the owner did not stop within 30 s",
                                        "stop it with `mnemo daemon stop` and run `mnemo doctor --repair` again")}
            time.sleep(0.2)
    try:
        while probe(socket_path(home)) and time.monotonic() < deadline:
            time.sleep(0.1)
        state = backup.check_db(home / "mnemo.db")
        if state in ("ok", "missing"):
            return {"check": _check("repair", "ok", f"the store is healthy ({state}); nothing restored")}
        res = backup.restore_newest_good(home)
        if not res["restored"]:
            return {"check": _check("repair", "fail", f"the store is damaged ({state}) and {res['message']}",
                                    res["hint"]), "restore": res}
        return {"check": _check("repair", "ok", f"the store was damaged ({state}); {res['message']}; the damaged "
                                f"files are in {res['damaged_moved_to']}; the index is rebuilt from the restored "
                                "store"), "restore": res}
    finally:
        lock.release()


def doctor_report(args) -> dict[str, Any]:
    from mnemo.core.embeddings import model_status
    from mnemo.core.engine import default_home
    from mnemo.core.identity import detect_context
    from mnemo.daemon.client import DaemonService, owner_status

    home = Path(args.home) if getattr(args, "home", None) else default_home()
    checks: list[dict[str, Any]] = []
    ms = model_status()
    ok_model = bool(ms.get("available", ms.get("ok", True)))
    checks.append(_check("model", "ok" if ok_model else "fail", ", ".join(f"{k}={v}" for k, v in ms.items()),
                         None if ok_model else "run `python -m mnemo.core.embeddings --prepare`"))
    if not home.exists():
        checks.append(_check("store", "warn", f"{home} does not exist yet", "it is created on first use"))
    elif not os.access(home, os.W_OK):
        checks.append(_check("store", "fail", f"{home} is not writable",
                             "fix its permissions or set MNEMO_HOME to a writable directory"))
    repaired: dict[str, Any] | None = None
    if getattr(args, "repair", False) and home.exists():
        repaired = repair_store(home)
        checks.append(repaired["check"])
    status = owner_status(home)
    checks.append(_check("owner", "ok", f"running, pid {status.get('pid')}, version {status.get('version')}"
                         if status["running"] else "not running (starts on first use)"))
    if not status["running"] and (home / "mnemo.db").exists():
        from mnemo.core.backup import check_db

        state = check_db(home / "mnemo.db")  # before an owner tries (and fails) to open a damaged store
        if state != "ok":
            checks.append(_check("store", "fail", f"SQLite integrity_check: {state} ({home / 'mnemo.db'})",
                                 "run `mnemo doctor --repair` to restore the newest good backup"))
            checks.append(backup_check(home))
            return {"ok": False, "home": str(home), "checks": checks, "repair": repaired}
    ctx = detect_context(getattr(args, "project_root", None)).to_dict()
    svc = None
    try:
        svc = DaemonService(home, client_name="doctor", on_warning=lambda _m: None)  # the settings check says it
        try:
            res = svc.doctor(ctx)
        finally:
            svc.close()
        checks.extend(res["checks"])
    except Exception as exc:  # noqa: BLE001 - report, do not crash the doctor
        hint = getattr(exc, "hint", None)
        checks.append(_check("owner", "fail", f"could not reach or start the owner: {exc}", hint))
    from mnemo.core.config import settings_check

    checks.append(settings_check(home, svc.owner if svc is not None else None))
    return {"ok": all(c["status"] != "fail" for c in checks), "home": str(home), "checks": checks,
            "repair": repaired}
