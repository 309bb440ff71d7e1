"""Shared pieces of the fault suite: figures, owners, store checks.

Every test reports its figures with `figure(...)`: a `FIGURE name = value` line on stdout (see it with `-s`) and,
when MNEMO_FIGURES names a file, one JSON line appended there (bench/reliability.py collects them into
docs/reliability.md).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

FULL = os.environ.get("MNEMO_FULL") == "1"
HASH_ENV = {"MNEMO_EMBEDDER": "hash"}


def figure(test: str, name: str, value: Any, unit: str = "", **extra: Any) -> None:
    line = f"FIGURE {test} :: {name} = {value}{(' ' + unit) if unit else ''}"
    if extra:
        line += "  " + " ".join(f"{k}={v}" for k, v in extra.items())
    print(line, flush=True)
    out = os.environ.get("MNEMO_FIGURES")
    if out:
        with open(out, "a") as f:
            f.write(json.dumps({"test": test, "name": name, "value": value, "unit": unit, "full": FULL,
                                **extra}) + "\n")


def owner_pid(home: Path) -> int | None:
    from mnemo.daemon.paths import info_path

    try:
        return int(json.loads(info_path(home).read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None


def stop_owner(home: Path) -> None:
    from mnemo.daemon.client import DaemonService
    from mnemo.daemon.paths import socket_path

    try:
        DaemonService(home, autostart=False).shutdown()
    except Exception:  # noqa: BLE001 - already gone
        pass
    from mnemo.daemon.client import owner_lock_free

    # The owner removes its socket first, then closes the store and releases the lock: wait for the lock.
    for _ in range(600):
        if not socket_path(home).exists() and owner_lock_free(home):
            return
        time.sleep(0.05)
    pid = owner_pid(home)
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def integrity(db: Path) -> str:
    conn = sqlite3.connect(db, timeout=30)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def reap_children() -> None:
    """Owners we SIGKILLed are our children (spawned by the client): collect them so no zombies pile up."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
