"""Where a store's owner listens: `<home>/mnemo.sock`, or a short path in /tmp when that is too long for AF_UNIX."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from mnemo.core.store_settings import default_home as config_default_home

_MAX_SUN_PATH = 100


def quiet_blas_env(env) -> None:
    """The owner's environment: numpy's BLAS (OpenBLAS) on one thread, and a BLAS thread that waits sleeps at once.
    The owner's products run while its other core is busy: an import lands one chunk on the caller's thread while
    the next is embedded on the other, so a product spread over BLAS's threads (a chunk's notes against the vector
    file) waited for the core the model used and slowed that embedding. Through the owner at 100k, 1,500 notes in
    calls of 500, alternating: bulk 0.89-0.90 of the embedding's rate on one thread against 0.77-0.82 on two
    (issue 22, twelfth pass; docs/benchmarks.md). The scans a query or a write makes do not use BLAS (the int8
    product is onnxruntime's, the exact cosines numpy's own loop: `dense.cosines`). With OpenBLAS's default wait
    its threads also spun on the second core through the Python work after every product (issue 22, fifth pass).
    A value the user set is kept. The thread count is set here, before the owner loads numpy: OpenBLAS's own
    setter, called later from another thread than the one that set it first, does not take (0.3.31)."""
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
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
