"""A snapshot merge killed by SIGKILL at a chosen point (for test_merge_sigkill.py).

    python _merge_child.py HOME SNAPSHOT CTX_JSON STRATEGY MODE ARG

MODE: `after_n` (killed after ARG records were written inside the transaction), `before_commit` (the whole
transaction written, COMMIT not yet run), `after_commit` (killed right after COMMIT returned), `timer` (killed by a
thread after ARG seconds, wherever the merge is), `none` (runs to the end).
"""

import contextlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from mnemo.core import sharing
from mnemo.core.embedding.embedder import HashEmbedder
from mnemo.core.engine import Engine
from mnemo.core.models import Context


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(10)


def main() -> None:
    home, snap, ctx_json, strategy, mode, arg = sys.argv[1:7]
    ctx = Context.from_dict(json.loads(ctx_json))
    engine = Engine(Path(home), embedder=HashEmbedder(), start_indexer=False)
    store = engine.store
    if mode == "after_n":
        limit, count = int(arg), [0]
        orig_insert = store.insert_memory

        def insert(conn, mem, vec, model_id):
            if count[0] >= limit:
                die()
            count[0] += 1
            return orig_insert(conn, mem, vec, model_id)

        store.insert_memory = insert
    elif mode in ("before_commit", "after_commit"):
        orig_write = store.write

        @contextlib.contextmanager
        def write():
            with orig_write() as c:
                yield c
                if mode == "before_commit":
                    die()
            if mode == "after_commit":
                die()

        store.write = write
    elif mode == "timer":
        threading.Timer(float(arg), die).start()
    print("START", flush=True)
    res = sharing.merge_snapshot(engine, ctx, snap, strategy)
    print("DONE " + json.dumps({k: res[k] for k in ("imported", "replaced", "conflicts")}), flush=True)
    engine.close()
    os._exit(0)


if __name__ == "__main__":
    main()
