"""`mnemo doctor`: check the model, the store, the index and the lock, and say what to fix."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mnemo.core.models import Context


def _check(name: str, status: str, detail: str, fix: str | None = None) -> dict[str, Any]:
    return {"name": name, "status": status, "detail": detail, "fix": fix}


def run_checks(engine, ctx: Context) -> dict[str, Any]:
    """Checks that need the open store (run inside the owner process). A damaged store is reported at once with
    the repair command; nothing else that would read it runs."""
    checks = [_store_check(engine)]
    if checks[0]["status"] == "fail":
        return {"checks": [*checks, backup_check(engine.home)]}
    for name, fn in (("index", _index_check), ("backups", lambda e: backup_check(e.home)),
                     ("vectors", _vectors_check)):
        try:
            checks.append(fn(engine))
        except Exception as exc:  # noqa: BLE001 - one failing check must not hide the others
            checks.append(_failed_check(engine, name, exc))
            if checks[-1]["name"] == "store":
                break
    return {"checks": checks}


def _store_check(engine) -> dict[str, Any]:
    from mnemo.core.store import repair_hint

    db = engine.home / "mnemo.db"
    result = engine.store.damage
    if result is None:
        try:
            result = engine.store.integrity_check()
        except Exception as exc:  # noqa: BLE001
            result = f"cannot read the store: {exc}"
    if result == "ok":
        return _check("store", "ok", f"SQLite integrity_check: ok ({db})")
    engine.store.damage = engine.store.damage or result  # every request now says what to run
    return _check("store", "fail", f"the store file is damaged: {result} ({db})", repair_hint(db))


def _failed_check(engine, name: str, exc: Exception) -> dict[str, Any]:
    import sqlite3

    if isinstance(exc, sqlite3.DatabaseError):
        exc = engine.store.store_error(exc, f"run the {name} check")
    if getattr(exc, "code", "") == "store_corrupt":
        return _check("store", "fail", exc.message, exc.hint)
    return _check(name, "fail", f"the check failed: {exc}", getattr(exc, "hint", None))


def _index_check(engine) -> dict[str, Any]:
    synced = engine.wait_indexed(timeout=60)
    idx = engine.index
    if idx is None or not idx.ready:
        return _check("index", "fail", f"dense index not ready ({idx.last_error if idx else 'not opened'})",
                      "it rebuilds automatically from the store; run doctor again in a minute")
    counts = idx.counts()
    want = {p: engine.store.count_vectors(p) for p in engine.store.parts()}
    bad = {p: (counts.get(p, 0), n) for p, n in want.items() if counts.get(p, 0) != n}
    if bad:
        engine.schedule_index_repair()
        return _check("index", "warn", f"index counts differ from the store {bad}; rebuild scheduled")
    return _check("index", "ok", f"{sum(want.values())} vectors in {len(want)} partitions, in sync"
                  + ("" if synced else " (still catching up)") + f"; {idx.rebuilds} rebuild(s) since start")


def _vectors_check(engine) -> dict[str, Any]:
    model_ids = [r[0] for r in engine.store.conn().execute("SELECT DISTINCT model_id FROM vectors")]
    foreign = [m for m in model_ids if m != engine.model_id]
    return _check("vectors", "ok" if not foreign else "warn",
                  f"stored with {model_ids or ['(none yet)']}; current model {engine.model_id}",
                  "they are re-embedded automatically on the next owner start" if foreign else None)


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
    daily = sum(b["kind"] == "daily" for b in backups)
    return _check("backups", status, f"{len(backups)} kept ({daily} daily, {len(backups) - daily} after write "
                                     f"volume; newest {backups[0]['iso']}, {age_h:.1f} h ago, "
                                     f"{backups[0]['bytes']:,} bytes) in {backup.backup_dir(home)}",
                  None if status == "ok" else "is the owner running? it takes a backup once a day")


def repair_store(home: Path) -> dict[str, Any]:
    """Stop the owner, hold its lock, check the store; when it is damaged, rebuild it from every readable row and
    the newest good backup (core/repair.py)."""
    import time

    from mnemo.core import backup, repair

    lock = _stop_owner_and_lock(home)
    if isinstance(lock, dict):
        return lock
    try:
        state = backup.check_db(home / "mnemo.db")
        if state in ("ok", "missing"):
            return {"check": _check("repair", "ok", f"the store is healthy ({state}); nothing changed")}
        t0 = time.monotonic()
        res = repair.repair_store_file(home)
        res["seconds"] = round(time.monotonic() - t0, 2)
        if not res["restored"]:
            return {"check": _check("repair", "fail", f"the store is damaged ({state}) and {res['message']}",
                                    res["hint"]), "restore": res}
        return {"check": _check("repair", "ok" if not res["maybe_lost_memories"] else "warn",
                                f"the store was damaged ({state}); {res['message']}; the damaged files are kept in "
                                f"{res['damaged_moved_to']}; the index is rebuilt from the new store"),
                "restore": res}
    finally:
        lock.release()


def _stop_owner_and_lock(home: Path):
    """The owner lock, held, once the owner (if any) has stopped; or a failed check after 30 s."""
    import time

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
    while probe(socket_path(home)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return lock


def doctor_report(args) -> dict[str, Any]:
    from mnemo.core.engine import default_home

    home = Path(args.home) if getattr(args, "home", None) else default_home()
    checks = [_model_check(), *_home_checks(home)]
    repaired: dict[str, Any] | None = None
    if getattr(args, "repair", False) and home.exists():
        repaired = repair_store(home)
        checks.append(repaired["check"])
    checks.extend(_owner_checks(home, args))
    return {"ok": all(c["status"] != "fail" for c in checks), "home": str(home), "checks": checks,
            "repair": repaired}


def _model_check() -> dict[str, Any]:
    from mnemo.core.embeddings import model_status

    ms = model_status()
    ok = bool(ms.get("available", ms.get("ok", True)))
    return _check("model", "ok" if ok else "fail", ", ".join(f"{k}={v}" for k, v in ms.items()),
                  None if ok else "run `python -m mnemo.core.embeddings --prepare`")


def _home_checks(home: Path) -> list[dict[str, Any]]:
    if not home.exists():
        return [_check("store", "warn", f"{home} does not exist yet", "it is created on first use")]
    if not os.access(home, os.W_OK):
        return [_check("store", "fail", f"{home} is not writable",
                       "fix its permissions or set MNEMO_HOME to a writable directory")]
    return []


def _owner_checks(home: Path, args) -> list[dict[str, Any]]:
    """One line for the owner, then the checks it runs on the open store. A damaged file is checked here without
    starting an owner; a damage the owner reports is a store failure, not an owner failure."""
    from mnemo.core.errors import MnemoError
    from mnemo.core.identity import detect_context
    from mnemo.core.store import repair_hint
    from mnemo.daemon.client import DaemonService, owner_status

    status = owner_status(home)
    owner = _check("owner", "ok", f"running, pid {status.get('pid')}, version {status.get('version')}"
                   if status["running"] else "not running (starts on first use)")
    db = home / "mnemo.db"
    if not status["running"] and db.exists():
        from mnemo.core.backup import check_db

        state = check_db(db)  # before an owner tries (and fails) to open a damaged store
        if state != "ok":
            return [owner, _check("store", "fail", f"the store file is damaged: {state} ({db})", repair_hint(db)),
                    backup_check(home)]
    ctx = detect_context(getattr(args, "project_root", None)).to_dict()
    from mnemo.core.config import settings_check

    svc = None
    try:
        svc = DaemonService(home, client_name="doctor", on_warning=lambda _m: None)  # the settings check says it
        try:
            checks = [owner, *svc.doctor(ctx)["checks"]]
        finally:
            svc.close()
    except MnemoError as exc:  # report, do not crash the doctor
        if exc.code == "store_corrupt":
            return [owner, _check("store", "fail", exc.message, exc.hint), backup_check(home)]
        checks = [_check("owner", "fail", f"could not reach or start the owner: {exc.message}", exc.hint)]
    return [*checks, settings_check(home, svc.owner if svc is not None else None)]
