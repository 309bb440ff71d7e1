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
                             None if result == "ok" else "restore a backup: `mnemo doctor` lists them"))
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
    model_ids = [r[0] for r in engine.store.conn().execute("SELECT DISTINCT model_id FROM vectors")]
    foreign = [m for m in model_ids if m != engine.model_id]
    checks.append(_check("vectors", "ok" if not foreign else "warn",
                         f"stored with {model_ids or ['(none yet)']}; current model {engine.model_id}",
                         "they are re-embedded automatically on the next owner start" if foreign else None))
    return {"checks": checks}


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
    status = owner_status(home)
    checks.append(_check("owner", "ok", f"running, pid {status.get('pid')}, version {status.get('version')}"
                         if status["running"] else "not running (starts on first use)"))
    ctx = detect_context(getattr(args, "project_root", None)).to_dict()
    try:
        svc = DaemonService(home, client_name="doctor")
        try:
            res = svc.doctor(ctx)
        finally:
            svc.close()
        checks.extend(res["checks"])
    except Exception as exc:  # noqa: BLE001 - report, do not crash the doctor
        hint = getattr(exc, "hint", None)
        checks.append(_check("owner", "fail", f"could not reach or start the owner: {exc}", hint))
    return {"ok": all(c["status"] != "fail" for c in checks), "home": str(home), "checks": checks}
