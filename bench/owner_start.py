"""Owner cold start on an indexed store, one or several source trees alternating (old vs new in one sitting):
spawn -> first recall answer (wall), the owner's CPU time (user+sys, every thread) at that answer and 3 s later
(what its start costs in all), and its RSS then (now and at its peak). On a loaded machine the CPU figures compare where the wall clock
cannot.

    python bench/owner_start.py --sizes 1000,10000 --reps 3 --trees new=server,old=/tmp/old/server

Stores are filled once per size under --dir (bench/recall_latency.py's synthetic notes, the bench process's
embedder: set MNEMO_EMBEDDER so every tree runs the same model) and indexed by a first owner start.
The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

QUERY = "how does the owner process handle retries with exponential backoff"


def cpu_ms(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """The process's resident memory now (VmRSS) or at its peak (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--trees", default="current=" + str(Path(__file__).resolve().parents[1] / "server"),
                    help="name=path-to-server,... (each spawn runs with PYTHONPATH=path)")
    ap.add_argument("--dir", default="/tmp/mnemo-owner-start", help="where the stores are kept between runs")
    args = ap.parse_args()
    from mnemo.core.embedding.embedder import get_embedder
    from mnemo.core.models import Context
    from mnemo.daemon.client import DaemonService, owner_lock_free
    from mnemo.daemon.paths import info_path
    from recall_latency import _wait_indexed, fill_store

    trees = dict(t.split("=", 1) for t in args.trees.split(","))
    ctx = Context(project_id="bench-project", project_name="bench", root=None, branch="main", default_branch="main")
    homes = {}
    for n in (int(s) for s in args.sizes.split(",")):
        home = Path(args.dir) / str(n)
        if not (home / "mnemo.db").exists():
            home.mkdir(parents=True, exist_ok=True)
            fill_store(home, n, get_embedder(), ctx)
        os.environ["PYTHONPATH"] = next(iter(trees.values()))
        svc = DaemonService(home, client_name="bench")
        svc.connect()
        _wait_indexed(svc, ctx)
        svc.shutdown()
        homes[n] = home
    runs: dict[str, list] = {}
    for _ in range(args.reps):
        for n, home in homes.items():
            for name, path in trees.items():
                os.environ["PYTHONPATH"] = path
                while not owner_lock_free(home):
                    time.sleep(0.05)
                t0 = time.perf_counter()
                svc = DaemonService(home, client_name="bench")
                svc.connect()
                cards = svc.recall(ctx.to_dict(), QUERY, limit=5)["cards"]
                wall = (time.perf_counter() - t0) * 1000
                pid = json.loads(info_path(home).read_text())["pid"]
                at_answer = cpu_ms(pid)
                time.sleep(3)
                row = {"wall_ms": round(wall), "cpu_at_answer_ms": round(at_answer), "cpu_3s_ms": round(cpu_ms(pid)),
                       "rss_mb": round(rss_mb(pid), 1), "peak_rss_mb": round(rss_mb(pid, "VmHWM"), 1),
                       "cards": len(cards),
                       "load_1m": float(Path("/proc/loadavg").read_text().split()[0])}
                svc.shutdown()
                runs.setdefault(f"{name} {n}", []).append(row)
                print(name, n, row, file=sys.stderr, flush=True)
    out = {k: {f: statistics.median(r[f] for r in rows) for f in rows[0]} for k, rows in runs.items()}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
