"""Remember N notes while the file system fails under us (for test_io_errors.py); prints what the caller saw.

    python _io_child.py HOME N TAG [--indexer] [--big]

Lines: `ACK <id> <index>` after remember returned, `ERR <index> <ErrorType> <message>` for a MnemoError,
`UNCLEAN <index> <ExceptionType> <message>` for anything else, `OPEN_ERR ...` when the store cannot even be opened,
`DONE <acked> <errors>` at the end. The fault itself comes from outside: the LD_PRELOAD shim (faultfs.c), a full
tmpfs, or RLIMIT_FSIZE (`--fsize BYTES` over the current size).
"""

import os
import resource
import signal
import sys
from pathlib import Path

from mnemo.core.embedding.embedder import HashEmbedder
from mnemo.core.engine import Engine
from mnemo.core.errors import MnemoError
from mnemo.core.memory.write import remember
from mnemo.core.models import Context

CTX = Context(project_id="git-io", project_name="io", root=None, branch="main", default_branch="main")


def main() -> None:
    home, n, tag = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    indexer = "--indexer" in sys.argv
    big = "--big" in sys.argv
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # RLIMIT_FSIZE: EFBIG instead of a signal
    try:
        engine = Engine(home, embedder=HashEmbedder(), start_indexer=indexer)
    except MnemoError as exc:
        print(f"OPEN_ERR {type(exc).__name__} {exc.message[:200]}", flush=True)
        os._exit(3)
    if "--fsize" in sys.argv:
        extra = int(sys.argv[sys.argv.index("--fsize") + 1])
        db = home / "mnemo.db"
        size = max(db.stat().st_size, (home / "mnemo.db-wal").stat().st_size if (home / "mnemo.db-wal").exists()
                   else 0)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + extra, resource.RLIM_INFINITY))
    acked = errors = 0
    pad = (" lorem" * 700) if big else ""
    for i in range(n):
        text = f"{tag} note {i} {os.urandom(8).hex()} {os.urandom(8).hex()}{pad}"
        try:
            r = remember(engine, CTX, text)
            print(f"ACK {r['memory']['id']} {i}", flush=True)
            acked += 1
        except MnemoError as exc:
            errors += 1
            print(f"ERR {i} {type(exc).__name__} {exc.message[:160]}", flush=True)
        except Exception as exc:  # noqa: BLE001 - reported, but not as a clean Mnemo error
            errors += 1
            print(f"UNCLEAN {i} {type(exc).__name__} {str(exc)[:160]}", flush=True)
    try:
        engine.close()
    except Exception as exc:  # noqa: BLE001
        print(f"CLOSE_ERR {type(exc).__name__} {exc}", flush=True)
    print(f"DONE {acked} {errors}", flush=True)
    sys.stdout.flush()
    sys.exit(0)


if __name__ == "__main__":
    main()
