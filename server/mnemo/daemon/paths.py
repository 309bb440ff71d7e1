"""Where a store's owner listens: `<home>/mnemo.sock`, or a short path in /tmp when that is too long for AF_UNIX."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from mnemo.core.store_settings import default_home as config_default_home

_MAX_SUN_PATH = 100


def quiet_blas_env(env) -> None:
    """The owner's environment: numpy's BLAS threads (OpenBLAS starts one per core) sleep as soon as a product is
    done instead of spinning for it. With OpenBLAS's default wait the second core spun through the Python work
    after every product (recall's scan, an import's chunk of notes against the store): ~3 ms of CPU per recall and
    ~1 ms per imported note at 10k, on the core an import embeds its next notes on (issue 22, fifth pass). The
    products still use both cores. A value the user set is kept."""
    env.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")


def socket_path(home: Path) -> Path:
    p = Path(home) / "mnemo.sock"
    if len(str(p)) < _MAX_SUN_PATH:
        return p
    digest = hashlib.sha256(str(Path(home).resolve()).encode()).hexdigest()[:16]
    return Path(os.environ.get("XDG_RUNTIME_DIR") or "/tmp") / f"mnemo-{os.getuid()}-{digest}.sock"


def info_path(home: Path) -> Path:
    return Path(home) / "daemon.json"


def log_path(home: Path) -> Path:
    return Path(home) / "logs" / "daemon.log"


def failure_path(home: Path) -> Path:
    """Why the last owner could not start (written by it, read by the client that spawned it)."""
    return Path(home) / "owner-failed.json"


def default_home() -> Path:
    """The store directory when none is given: $MNEMO_HOME, else ~/.mnemo (the rule is core/store_settings.py's, which
    core code uses when a home is not passed to it)."""
    return config_default_home()
