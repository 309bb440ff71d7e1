"""Where a write's CPU goes, in process: per-segment CPU time of the request thread (`time.thread_time`, so the
indexer thread's replay and cache rewrites are left out) for sequential `remember`s and one `remember_batch`, on a
store filled as `bench/recall_latency.py` fills it (same synthetic notes, same cached vectors), next to the
embedding of the same texts (one at a time, and as the owner batches them).

Segments (each timed around the function, nested ones inside their parents): `draft` (validation, secret scan),
`embed (all)` (the note's embedding and the relation check's masked texts and slots), `neighbours` (the dense
search, the visibility of the candidates, the kept memories loaded; `nb: ...` its parts), `features` (the
relation check's text comparison, per pair), `masked/slot embeds` (the embeddings the decision needs),
`find_duplicate`, `stored parses read` (the neighbours' parses read from the store and decoded, since issue 22's
fifth pass), `txn body` (everything inside the write transactions, the commit excluded). `*_process_ms`: the
whole process's CPU over the same writes and 2.5 s after them (the indexer thread's replay and cache rewrites
included), as the owner's CPU is counted by `bench/recall_latency.py`.
Where the relation check is compiled (mnemo/native.py), its functions call each other directly: the sections
inside it (`features`, ...) are not seen; run with `MNEMO_NATIVE=0` to time them (from source).

    python bench/write_segments.py --size 10000 --writes 100 --bulk 500
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import sys
import time
import uuid
from pathlib import Path

from scratch import scratch_dir  # bench/ is on sys.path when run as a script

sys.path.insert(0, str(Path(__file__).resolve().parent))

import recall_latency as rl  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=10000)
    ap.add_argument("--writes", type=int, default=100)
    ap.add_argument("--bulk", type=int, default=500)
    args = ap.parse_args()

    import mnemo.core.search as search
    from mnemo.core.embedding.embedder import get_embedder
    from mnemo.core.engine import Engine
    from mnemo.core.indexes import vector_file
    from mnemo.core.memory import neighbours, write
    from mnemo.core.models import Context
    from mnemo.core.relation import compare

    emb = get_embedder()
    ctx = Context(project_id="bench-project", project_name="bench", root=None, branch="main", default_branch="main")
    home = scratch_dir("mnemo-seg-")
    rl.fill_store(home, args.size, emb, ctx)
    eng = Engine(home, emb)
    while not (eng.index is not None and eng.index.ready):
        time.sleep(0.1)
    time.sleep(1.0)
    acc: collections.Counter = collections.Counter()

    def wrap(owner, name: str, label: str) -> None:
        real = getattr(owner, name)

        def timed(*a, **kw):
            t = time.thread_time()
            try:
                return real(*a, **kw)
            finally:
                acc[label] += time.thread_time() - t
        setattr(owner, name, timed)

    wrap(neighbours, "neighbours", "neighbours")
    wrap(search, "exact_scores", "nb: exact scores of the changed items")
    if hasattr(vector_file.VectorFile, "tail_scores"):  # since issue 22's fourth pass (the same segment)
        wrap(vector_file.VectorFile, "tail_scores", "nb: exact scores of the changed items")
    wrap(vector_file.VectorFile, "search", "nb: vector file scan")
    wrap(type(eng.store), "visibility_rows", "nb: visibility rows")
    wrap(type(eng.store), "get_memories", "nb: kept memories loaded")
    wrap(compare, "features", "features")
    if hasattr(neighbours, "stored_parses"):  # since issue 22's fifth pass: the neighbours' stored parses read
        wrap(neighbours, "stored_parses", "stored parses read")
    wrap(compare, "embedded_cosines", "masked/slot embeds")
    wrap(write, "draft", "draft")
    wrap(write, "find_duplicate", "find_duplicate")
    wrap(Engine, "embed", "embed (all)")
    real_write = type(eng.store).write

    @contextlib.contextmanager
    def txn(self, *a, **kw):
        with real_write(self, *a, **kw) as c:
            t = time.thread_time()
            yield c
            acc["txn body"] += time.thread_time() - t
    type(eng.store).write = txn

    write.remember(eng, ctx, rl.WARM_WRITE, on_conflict="keep_both")  # imports the secret scanner, once
    out: dict = {"size": args.size, "embedder": emb.model_id}
    texts = [f"bench write {uuid.uuid4().hex[:8]}: {t}" for t in rl.synth_notes(args.writes, seed=99)]
    acc.clear()
    t0, p0 = time.thread_time(), time.process_time()
    for text in texts:
        write.remember(eng, ctx, text, on_conflict="keep_both")
    out["remember_ms"] = round((time.thread_time() - t0) * 1000 / args.writes, 2)
    time.sleep(rl.REPLAY_SETTLE)  # the indexer's replay and cache rewrites of these writes (its thread)
    out["remember_process_ms"] = round((time.process_time() - p0) * 1000 / args.writes, 2)
    out["remember_segments_ms"] = {k: round(v * 1000 / args.writes, 2) for k, v in sorted(acc.items())}
    t0 = time.thread_time()
    for text in texts:
        emb.embed([text])
    out["embed_one_ms"] = round((time.thread_time() - t0) * 1000 / args.writes, 2)
    if args.bulk:
        bulk = [f"bulk {i} {uuid.uuid4().hex[:6]}: {t}" for i, t in enumerate(rl.synth_notes(args.bulk, seed=77))]
        acc.clear()
        t0, p0 = time.thread_time(), time.process_time()
        write.remember_batch(eng, ctx, [{"text": x} for x in bulk], source="import", on_conflict="keep_both")
        out["bulk_ms_per_note"] = round((time.thread_time() - t0) * 1000 / args.bulk, 2)
        time.sleep(rl.REPLAY_SETTLE)
        out["bulk_process_ms_per_note"] = round((time.process_time() - p0) * 1000 / args.bulk, 2)
        out["bulk_segments_ms"] = {k: round(v * 1000 / args.bulk, 2) for k, v in sorted(acc.items())}
        t0 = time.thread_time()
        emb.embed(bulk)
        out["embed_batched_ms"] = round((time.thread_time() - t0) * 1000 / args.bulk, 2)
    eng.close()
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
