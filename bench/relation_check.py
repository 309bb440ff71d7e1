"""What a write's relation check costs, in process, compiled or from source (mnemo/native.py; run it once as is and
once with `MNEMO_NATIVE=0`, alternating).

- `relation_ms_per_write`: for `--writes` new notes (`bench write ...`, as `bench/recall_latency.py` writes them),
  their neighbours among the store's synthetic notes (the ten nearest at cosine >= 0.34, exact, from the same cached
  vectors `recall_latency` fills a store with), then per write what the write path does with them: the neighbours'
  stored parses primed (decoded) and `decide_many` over the pairs; min and median of `--reps` passes, every parse
  cache emptied before each.
- with `--remember`: `remember_ms` / `embed_one_ms` / `remember_ratio`: sequential `remember`s of the same notes
  through `LocalService` on a store of `--size` notes filled as `recall_latency` fills it, against the embedding of
  the same texts one at a time.

    python bench/relation_check.py --size 100000 --remember
    MNEMO_NATIVE=0 python bench/relation_check.py --size 100000 --remember
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

from scratch import scratch_dir  # bench/ is on sys.path when run as a script

sys.path.insert(0, str(Path(__file__).resolve().parent))

import recall_latency as rl  # noqa: E402


def pairs_of(size: int, writes: int, embedder) -> list[list[tuple[str, str, float]]]:
    import numpy as np

    notes = rl.synth_notes(size)
    vecs = np.asarray(rl.cached_vectors(notes, embedder, "notes"), dtype=np.float32)
    texts = [f"bench write {uuid.uuid4().hex[:8]}: {t}" for t in rl.synth_notes(writes, seed=99)]
    q = np.asarray(embedder.embed(texts), dtype=np.float32)
    out = []
    for i, text in enumerate(texts):
        sims = vecs @ q[i]
        top = np.argsort(-sims, kind="stable")[:10]
        out.append([(notes[j], text, float(sims[j])) for j in top.tolist() if sims[j] >= 0.34])
    return out


def relation_ms(groups, vocab, reps: int) -> dict:
    from mnemo.core.relation import compare

    blobs = {old: compare.encoded(old) for g in groups for old, _, _ in g}
    times = []
    for _ in range(reps):
        compare._PRIMED.clear()
        compare._parsed.cache_clear()
        compare.clause_tokens.cache_clear()
        t = time.perf_counter()
        for g in groups:
            for old, _, _ in g:
                if not compare.known(old):
                    compare.prime(old, blobs[old])
            compare.decide_many(g, None, vocab, scores=False)
        times.append((time.perf_counter() - t) * 1000 / len(groups))
    return {"relation_ms_per_write_min": round(min(times), 3),
            "relation_ms_per_write_median": round(statistics.median(times), 3),
            "pairs_per_write": round(sum(map(len, groups)) / len(groups), 2)}


def remember_ms(size: int, writes: int, embedder) -> dict:
    from mnemo.core.engine import Engine
    from mnemo.core.models import Context
    from mnemo.service import LocalService

    home = scratch_dir("relation-check-")
    ctx = Context(project_id="bench-project", project_name="bench", root=None, branch="main", default_branch="main")
    rl.fill_store(home, size, embedder, ctx)
    eng = Engine(home, embedder=embedder)
    try:
        svc = LocalService(eng)
        svc.recall(ctx.to_dict(), "warm", limit=5)
        while True:  # the index replayed, as the owner's would be
            st = svc.stats(ctx.to_dict())["index"]
            if st["ready"] and st["indexed_seq"] >= st["store_seq"]:
                break
            time.sleep(0.5)
        time.sleep(3)
        svc.remember(ctx.to_dict(), rl.WARM_WRITE, on_conflict="keep_both")
        texts = [f"bench write {uuid.uuid4().hex[:8]}: {t}" for t in rl.synth_notes(writes, seed=99)]
        t = time.perf_counter()
        for text in texts:
            svc.remember(ctx.to_dict(), text, on_conflict="keep_both")
        w = (time.perf_counter() - t) * 1000 / len(texts)
        t = time.perf_counter()
        for text in texts:
            embedder.embed([text])
        e = (time.perf_counter() - t) * 1000 / len(texts)
    finally:
        eng.close()
    return {"remember_ms": round(w, 2), "embed_one_ms": round(e, 2), "remember_ratio": round(e / w, 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=10000, help="synthetic notes in the store (the neighbours' pool)")
    ap.add_argument("--writes", type=int, default=200)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--remember", action="store_true", help="also time sequential remembers on a filled store")
    args = ap.parse_args()
    os.environ.setdefault("MNEMO_HOME", str(scratch_dir("relation-check-home-")))
    from mnemo import native
    from mnemo.core.embedding.embedder import get_embedder
    from mnemo.core.relation import compare

    embedder = get_embedder()
    out: dict = {"size": args.size, "writes": args.writes, "native": native.status()}
    if args.remember:  # first: nothing parsed or primed yet, as in a fresh owner
        out.update(remember_ms(args.size, args.writes, embedder))
    out.update(relation_ms(pairs_of(args.size, args.writes, embedder), compare.vocabulary_of(embedder), args.reps))
    out["native"] = native.status()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
