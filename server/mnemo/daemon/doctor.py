"""`mnemo doctor` around the owner process: the model, the store directory, the owner (running? it then runs the
store checks of core/recovery/doctor.py on its open store), the settings it applies, and `--repair` (stop the owner, hold
its lock, rebuild a damaged store: core/recovery/repair.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from mnemo.core.api_types.results import DoctorCheck
from mnemo.core.embedding.embedder import model_status
from mnemo.core.engine import OwnerLock
from mnemo.core.errors import MnemoError, StoreLocked
from mnemo.core.identity import detect_context
from mnemo.core.recovery import backup, repair
from mnemo.core.recovery.doctor import backup_check, check
from mnemo.core.store import repair_hint
from mnemo.core.store_settings import settings_check
from mnemo.daemon.client import DaemonService, owner_status
from mnemo.daemon.paths import socket_path
from mnemo.daemon.server import probe


def doctor_report(home: Path, project_root: Path | None = None, do_repair: bool = False) -> dict[str, Any]:
    """Every check, in order; with `do_repair`, a damaged store is repaired first."""
    checks = [_model_check(), *_home_checks(home)]
    repaired: dict[str, Any] | None = None
    if do_repair and home.exists():
        repaired = repair_store(home)
        checks.append(repaired["check"])
    checks.extend(_owner_checks(home, project_root))
    return {"ok": all(c["status"] != "fail" for c in checks), "home": str(home), "checks": checks,
            "repair": repaired}


def repair_store(home: Path) -> dict[str, Any]:
    """Stop the owner, hold its lock, check the store; when it is damaged, rebuild it from every readable row and
    the newest good backup (core/recovery/repair.py)."""
    lock = _stop_owner_and_lock(home)
    if isinstance(lock, dict):
        return lock
    try:
        state = backup.check_db(home / "mnemo.db")
        if state in ("ok", "missing"):
            return {"check": check("repair", "ok", f"the store is healthy ({state}); nothing changed")}
        t0 = time.monotonic()
        res = repair.repair_store_file(home)
        res["seconds"] = round(time.monotonic() - t0, 2)
        if not res["restored"]:
            return {"check": check("repair", "fail", f"the store is damaged ({state}) and {res['message']}",
                                   res["hint"]), "restore": res}
        return {"check": check("repair", "ok" if not res["maybe_lost_memories"] else "warn",
                               f"the store was damaged ({state}); {res['message']}; the damaged files are kept in "
                               f"{res['damaged_moved_to']}; the index is rebuilt from the new store"),
                "restore": res}
    finally:
        lock.release()


def _stop_owner_and_lock(home: Path):
    """The owner lock, held, once the owner (if any) has stopped; or a failed check after 30 s."""
    try:
        DaemonService.open(home, autostart=False).shutdown()
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
                return {"check": check("repair", "fail", "the owner did not stop within 30 s",
                                       "stop it with `mnemo daemon stop` and run `mnemo doctor --repair` again")}
            time.sleep(0.2)
    while probe(socket_path(home)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return lock


def _model_check() -> DoctorCheck:
    ms = model_status()
    ok = bool(ms.get("available", ms.get("ok", True)))
    return check("model", "ok" if ok else "fail", ", ".join(f"{k}={v}" for k, v in ms.items()),
                 None if ok else "run `python -m mnemo.core.embedding.embedder --prepare`")


def _home_checks(home: Path) -> list[DoctorCheck]:
    if not home.exists():
        return [check("store", "warn", f"{home} does not exist yet", "it is created on first use")]
    if not os.access(home, os.W_OK):
        return [check("store", "fail", f"{home} is not writable",
                      "fix its permissions or set MNEMO_HOME to a writable directory")]
    return []


def _owner_checks(home: Path, project_root: Path | None) -> list[DoctorCheck]:
    """One line for the owner, then the checks it runs on the open store. A damaged file is checked here without
    starting an owner; a damage the owner reports is a store failure, not an owner failure."""
    status = owner_status(home)
    owner = check("owner", "ok", f"running, pid {status.get('pid')}, version {status.get('version')}"
                  if status["running"] else "not running (starts on first use)")
    db = home / "mnemo.db"
    if not status["running"] and db.exists():
        state = backup.check_db(db)  # before an owner tries (and fails) to open a damaged store
        if state != "ok":
            return [owner, check("store", "fail", f"the store file is damaged: {state} ({db})", repair_hint(db)),
                    backup_check(home)]
    ctx = detect_context(project_root).to_dict()
    svc = None
    try:
        svc = DaemonService.open(home, client_name="doctor", on_warning=lambda _m: None)  # the settings check says it
        try:
            checks = [owner, *svc.doctor(ctx)["checks"]]
        finally:
            svc.close()
    except MnemoError as exc:  # report, do not crash the doctor
        if exc.code == "store_corrupt":
            return [owner, check("store", "fail", exc.message, exc.hint), backup_check(home)]
        checks = [check("owner", "fail", f"could not reach or start the owner: {exc.message}", exc.hint)]
    return [*checks, settings_check(home, svc.owner if svc is not None else None)]
