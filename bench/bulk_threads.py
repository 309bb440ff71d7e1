"""Where an import's CPU goes, per thread, in process: one `remember_batch` on a store filled as
`bench/recall_latency.py` fills it (same synthetic notes, same cached vectors), with the CPU of every thread of the
process (`/proc/self/task/*/stat`: the caller's, the `mnemo-embed-ahead` thread's, the indexer's, and native
threads such as OpenBLAS's), the time the caller waited for the chunk embedded ahead, and the wall clock, next to
the embedding of the same texts alone (as the owner batches them). Run it in the owner's environment
(`OPENBLAS_THREAD_TIMEOUT=4`, what `mnemo.daemon.paths.quiet_blas_env` gives a spawned owner) or without it to see
OpenBLAS's threads spin.

    OPENBLAS_THREAD_TIMEOUT=4 python bench/bulk_threads.py --size 10000 --notes 1000
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import threading
import time
import uuid
from pathlib import Path

from scratch import scratch_dir  # bench/ is on sys.path when run as a script

sys.path.insert(0, str(Path(__file__).resolve().parent))

import recall_latency as rl  # noqa: E402


def thread_cpu() -> dict[str, float]:
    """CPU seconds of every thread of this process, by Python thread name where there is one, else by tid."""
    names = {str(t.native_id): t.name for t in threading.enumerate()}
    out: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[names.get(tid, f"native {tid}")] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=10000)
    ap.add_argument("--notes", type=int, default=1000, help="notes in the one remember_batch call (at most 1000)")
    args = ap.parse_args()

    from mnemo.core.embedding.embedder import get_embedder
    from mnemo.core.engine import Engine
    from mnemo.core.memory import write
    from mnemo.core.models import Context

    emb = get_embedder()
    ctx = Context(project_id="bench-project", project_name="bench", root=None, branch="main", default_branch="main")
    home = scratch_dir("mnemo-bulk-")
    rl.fill_store(home, args.size, emb, ctx)
    eng = Engine(home, emb)
    while not (eng.index is not None and eng.index.ready):
        time.sleep(0.1)
    time.sleep(1.0)
    waited = collections.Counter()
    ahead = getattr(write, "_Ahead", None)
    if ahead is not None:  # the time the caller waited for the chunk prepared on the second thread
        real_take = ahead.take

        def take(self, n, _real=real_take):
            nxt = self._next
            if nxt is not None and nxt[0] == n:  # timed where `take` waits for it (not before: the caller may
                future = nxt[2]  # queue the next chunk first)
                real_result = future.result

                def result(*a, **kw):
                    t = time.perf_counter()
                    try:
                        return real_result(*a, **kw)
                    finally:
                        waited["s"] += time.perf_counter() - t
                future.result = result
            return _real(self, n)
        ahead.take = take
    write.remember(eng, ctx, rl.WARM_WRITE, on_conflict="keep_both")  # imports the secret scanner, once
    texts = [f"bulk {i} {uuid.uuid4().hex[:6]}: {t}" for i, t in enumerate(rl.synth_notes(args.notes, seed=77))]
    time.sleep(rl.REPLAY_SETTLE)
    n = args.notes
    before, p0, t0 = thread_cpu(), time.process_time(), time.perf_counter()
    res = write.remember_batch(eng, ctx, [{"text": x} for x in texts], source="import", on_conflict="keep_both")
    wall = time.perf_counter() - t0
    time.sleep(rl.REPLAY_SETTLE)  # the indexer's replay and cache rewrites of these writes
    cpu, after = time.process_time() - p0, thread_cpu()
    t, c = time.perf_counter(), time.process_time()
    for start in range(0, n, 500):
        emb.embed(texts[start:start + 500])
    embed_wall, embed_cpu = time.perf_counter() - t, time.process_time() - c
    per = {k: round((v - before.get(k, 0.0)) * 1000 / n, 2) for k, v in after.items()
           if v - before.get(k, 0.0) > 0}
    # threads that ended before the second look: the `mnemo-embed-ahead` thread (it ends with the call)
    per["ended during the call"] = round(cpu * 1000 / n - sum(per.values()), 2)
    print(json.dumps({
        "size": args.size, "notes": n, "counts": res["counts"], "load_avg_1m": round(os.getloadavg()[0], 2),
        "openblas_thread_timeout": os.environ.get("OPENBLAS_THREAD_TIMEOUT"),
        "wall_ms_per_note": round(wall * 1000 / n, 2), "process_cpu_ms_per_note": round(cpu * 1000 / n, 2),
        "thread_cpu_ms_per_note": per, "caller_waited_ms_per_note": round(waited["s"] * 1000 / n, 2),
        "embed_alone_wall_ms_per_note": round(embed_wall * 1000 / n, 2),
        "embed_alone_cpu_ms_per_note": round(embed_cpu * 1000 / n, 2),
        "wall_ratio": round(embed_wall / wall, 2)}, indent=1))
    eng.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
