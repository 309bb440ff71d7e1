"""Where the caller's thread of an import spends its CPU, per section, in process: one `remember_batch` on a store
filled as `bench/recall_latency.py` fills it (same synthetic notes, same cached vectors), each section timed with
`time.thread_time` on the caller's thread only (the thread embedding ahead and the indexer left out; nested
sections inside their parents: `land (all)` holds `relate (all)`, which holds `decide_many`, ...), next to the
wall clock and the embedding alone of the same texts. `bench/bulk_threads.py` gives the CPU per thread.
Where the relation check is compiled (mnemo/native.py), its functions call each other directly: the sections
inside it (`features`, ...) are not seen; run with `MNEMO_NATIVE=0` to time them (from source).

    OPENBLAS_THREAD_TIMEOUT=4 python bench/bulk_caller.py --size 10000 --notes 1000
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=10000)
    ap.add_argument("--notes", type=int, default=1000, help="notes in the one remember_batch call (at most 1000)")
    args = ap.parse_args()
    size, notes = args.size, args.notes

    from mnemo.core.embedding.embedder import get_embedder
    from mnemo.core.engine import Engine
    from mnemo.core.memory import neighbours, write
    from mnemo.core.models import Context, Memory
    from mnemo.core.relation import compare

    emb = get_embedder()
    ctx = Context(project_id="bench-project", project_name="bench", root=None, branch="main", default_branch="main")
    home = scratch_dir("mnemo-caller-")
    rl.fill_store(home, size, emb, ctx)
    eng = Engine(home, emb)
    while not (eng.index is not None and eng.index.ready):
        time.sleep(0.1)
    time.sleep(1.0)
    acc: collections.Counter = collections.Counter()
    calls: collections.Counter = collections.Counter()
    caller = threading.current_thread()

    def wrap(owner, name: str, label: str) -> None:
        if not hasattr(owner, name):  # a function an older tree lacks
            return
        real = getattr(owner, name)

        def timed(*a, **kw):
            if threading.current_thread() is not caller:
                return real(*a, **kw)
            t = time.thread_time()
            try:
                return real(*a, **kw)
            finally:
                acc[label] += time.thread_time() - t
                calls[label] += 1
        static = isinstance(owner, type) and any(isinstance(c.__dict__.get(name), staticmethod) for c in owner.__mro__)
        setattr(owner, name, staticmethod(timed) if static else timed)

    store = type(eng.store)
    wrap(write, "_drafts", "drafts (the next chunk)")
    wrap(write, "find_duplicate", "find_duplicate")
    wrap(store, "held_hashes", "held_hashes (a chunk's duplicate lookup)")
    wrap(write, "_land_chunk", "land a chunk (all)")
    wrap(write, "land", "land (all)")
    wrap(write, "relate", "relate (all)")
    wrap(compare, "decide_many", "decide_many (the pairs' text comparison)")
    wrap(neighbours, "nearest_from_scores", "nearest_from_scores")
    wrap(store, "visibility_rows", "  visibility_rows")
    wrap(store, "get_memories", "  get_memories (the kept neighbours loaded)")
    wrap(neighbours, "stored_parses", "stored_parses (read and decoded)")
    wrap(neighbours.ChunkSearch, "scores", "ChunkSearch.scores")
    wrap(neighbours.ChunkSearch, "__init__", "ChunkSearch init (top lists made here included)")
    wrap(neighbours, "team_neighbours", "team_neighbours")
    wrap(store, "insert_memory", "insert_memory")
    wrap(store, "put_note_parses", "put_note_parses")
    wrap(compare, "encoded", "encoded (the new note's parse)")
    wrap(write, "write_new", "write_new (all)")
    wrap(Memory, "to_dict", "Memory.to_dict")
    write.remember(eng, ctx, rl.WARM_WRITE, on_conflict="keep_both")  # imports the secret scanner, once
    texts = [f"bulk {i} {uuid.uuid4().hex[:6]}: {t}" for i, t in enumerate(rl.synth_notes(notes, seed=77))]
    time.sleep(rl.REPLAY_SETTLE)
    acc.clear()
    calls.clear()
    t0, c0 = time.perf_counter(), time.thread_time()
    res = write.remember_batch(eng, ctx, [{"text": x} for x in texts], source="import", on_conflict="keep_both")
    wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
    t = time.perf_counter()
    for start in range(0, notes, 500):
        emb.embed(texts[start:start + 500])
    alone = time.perf_counter() - t
    print(json.dumps({
        "size": size, "notes": notes, "counts": res["counts"], "load_avg_1m": round(os.getloadavg()[0], 2),
        "wall_ms_per_note": round(wall * 1000 / notes, 3), "caller_cpu_ms_per_note": round(cpu * 1000 / notes, 3),
        "embed_alone_wall_ms_per_note": round(alone * 1000 / notes, 3),
        "caller_cpu_ms_per_note_by_section": {k: round(v * 1000 / notes, 3)
                                              for k, v in sorted(acc.items(), key=lambda kv: -kv[1])}}, indent=1))
    eng.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
