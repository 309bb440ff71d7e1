"""Run one multi-record operation on a store and SIGKILL itself at a chosen point (for test_crash_ops.py).

    python _ops_child.py HOME OP MODE ARG [SNAPSHOT]

OP: merge | decay | promote | branch_delete | branch_merge. MODE: `stmt` (killed just before the ARG-th SQL
statement of the operation's write transactions runs: a statement counter on the connection, SQLite's trace
hook), `timer` (killed by a thread after ARG seconds), `after` (killed right after the operation returned),
`none` (runs to the end and prints how many statements the write transactions ran).
"""

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from mnemo.core import lifecycle, sharing
from mnemo.core.embedding.embedder import HashEmbedder
from mnemo.core.engine import Engine
from mnemo.core.memory.manage import promote
from mnemo.core.models import Context

MAIN = Context(project_id="git-ops", project_name="ops", root=None, branch="main", default_branch="main")
DECAY_NOW = 1_900_000_000.0  # far in the future: most memories decay, many go cold


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(10)


def main() -> None:
    home, op, mode, arg = sys.argv[1:5]
    snapshot = sys.argv[5] if len(sys.argv) > 5 else None
    engine = Engine(Path(home), embedder=HashEmbedder(), start_indexer=False)
    store = engine.store
    conn = store.conn()
    state = {"in_tx": False, "n": 0, "tx": 0}
    limit = int(arg) if mode == "stmt" else -1

    def trace(sql: str) -> None:
        s = sql.strip().upper()
        if s.startswith("BEGIN"):
            state["in_tx"] = True
            state["tx"] += 1
            return
        if state["in_tx"]:
            state["n"] += 1
            if state["n"] == limit:
                die()
            if s.startswith(("COMMIT", "ROLLBACK")):
                state["in_tx"] = False

    conn.set_trace_callback(trace)
    if mode == "timer":
        threading.Timer(float(arg), die).start()
    target = json.loads((Path(home) / "target.json").read_text())
    if op == "merge":
        sharing.merge_snapshot(engine, MAIN, snapshot, "remote_wins")
    elif op == "decay":
        lifecycle.decay(engine, MAIN, DECAY_NOW)
    elif op == "promote":
        promote(engine, MAIN, target["promote"], "global")
    elif op == "branch_delete":
        sharing.branch_delete(engine, MAIN, "feature/x")
    elif op == "branch_merge":
        sharing.branch_merge(engine, MAIN, "feature/x")
    else:
        raise SystemExit(f"unknown op {op}")
    if mode == "after":
        die()
    print("DONE " + json.dumps({"statements": state["n"], "transactions": state["tx"]}), flush=True)
    conn.set_trace_callback(None)
    engine.close()
    os._exit(0)


if __name__ == "__main__":
    main()
