"""The compact exact scan of large partitions (core/indexes/compact.py) against the float32 exact scan and chroma's
HNSW index, at 100k real MiniLM vectors (bench/recall_latency.py's notes, cached under ~/.cache/mnemo/bench), and
on LoCoMo through recall() (--locomo).

    python bench/compact_scan.py [--chroma <a store's chroma dir holding those 100k vectors>] [--json]
    python bench/compact_scan.py --locomo /work/shared/data/locomo

Default: does the compact scan's top k equal the float32 exact scan's (200 of the bench's queries, k = 10, 50,
200; how many rows it re-scores), and the CPU time of one dense search (k = 50) by each method. --locomo: LoCoMo's
observations remembered into one store, every question recalled twice, the partitions served by the compact scan
(compact.MIN_ROWS lowered to 50) and by the float32 scan: identical answers? R@5 / R@10 of each.
The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from scratch import scratch_dir  # bench/ is on sys.path when run as a script

sys.path.insert(0, str(Path(__file__).resolve().parent))


def at_100k(chroma: str | None) -> dict:
    import numpy as np

    from mnemo.core.embedding.embedder import get_embedder
    from mnemo.core.indexes import compact
    from recall_latency import COMPONENTS, OBJECTS, cached_vectors, synth_notes

    emb = get_embedder()
    mat = np.ascontiguousarray(cached_vectors(synth_notes(100000), emb, "notes"), dtype=np.float32)
    rng = random.Random(1)
    queries = [f"what does the {rng.choice(COMPONENTS)} {rng.choice(['need', 'use', 'avoid'])} for "
               f"{rng.choice(OBJECTS)}?" for _ in range(200)]
    qv = np.asarray(emb.embed(queries), dtype=np.float32)
    t = time.process_time()
    scan = compact.build(lambda a, b: mat[a:b], 0, len(mat), mat.shape[1])
    out: dict = {"rows": len(mat), "queries": len(queries), "build_cpu_s": round(time.process_time() - t, 2)}
    with tempfile.NamedTemporaryFile(suffix=".f32") as f:
        mat.tofile(f.name)
        fd = os.open(f.name, os.O_RDONLY)
        try:
            sparse = compact.SparseRows(fd, 0, len(mat), mat.shape[1])
            def rescored(q, k):
                rows = scan.candidates(q, k)
                sims = np.einsum("ij,j->i", sparse.read(rows), q)
                return rows, rows[np.argsort(-sims, kind="stable")[:k]]

            for k in (10, 50, 200):
                same, cands = 0, []
                for q in qv:
                    rows, got = rescored(q, k)
                    cands.append(len(rows))
                    same += set(got.tolist()) == set(np.argsort(-(mat @ q), kind="stable")[:k].tolist())
                out[f"k{k}"] = {"topk_equal": same, "rescored_p50": int(statistics.median(cands)),
                                "rescored_max": max(cands)}

            def cpu(fn, reps=200):
                t = time.process_time()
                for i in range(reps):
                    fn(qv[i % len(qv)])
                return round((time.process_time() - t) * 1000 / reps, 2)

            out["cpu_ms_float32_einsum"] = cpu(lambda q: np.argpartition(-np.einsum("ij,j->i", mat, q), 49)[:50], 60)
            out["cpu_ms_float32_blas"] = cpu(lambda q: np.argpartition(-(mat @ q), 49)[:50], 60)
            out["cpu_ms_compact"] = cpu(lambda q: rescored(q, 50))
        finally:
            os.close(fd)
    if chroma:
        import chromadb

        col = chromadb.PersistentClient(path=chroma).get_collection("mnemo-p-bench-project", embedding_function=None)
        col.query(query_embeddings=[qv[0].tolist()], n_results=50, include=["distances"])
        out["cpu_ms_chroma_hnsw"] = cpu(lambda q: col.query(query_embeddings=[list(map(float, q))], n_results=50,
                                                           include=["distances"]))
    return out


def locomo(data: Path) -> dict:
    from mnemo.core.embedding.embedder import get_embedder
    from mnemo.core.engine import Engine
    from mnemo.core.indexes import compact
    from mnemo.core.memory.recall import recall
    from mnemo.core.memory.write import remember
    from mnemo.core.models import Context
    from recall_quality import recall_at

    compact.MIN_ROWS = 50
    observations = [json.loads(line) for line in (data / "locomo_observations.jsonl").open()]
    queries = [q for q in (json.loads(line) for line in (data / "locomo_queries.jsonl").open())
               if q["category"] in (1, 2, 3, 4) and q["evidence"]]
    emb = get_embedder()
    engine = Engine(scratch_dir("mnemo-compact-"), embedder=emb)
    by: dict[str, list] = defaultdict(list)
    for o in observations:
        by[o["sample_id"]].append(o)
    unit: dict[str, list] = {}
    for sample, obs in by.items():
        ctx = Context(project_id=f"locomo-{sample}", project_name=sample, branch="main", default_branch="main")
        for o, v in zip(obs, emb.embed([o["text"] for o in obs]), strict=True):
            r = remember(engine, ctx, o["text"], kind="fact", source="import", vec=v, on_conflict="keep_both")
            prev = (r.get("same_as") or {}).get("id")
            inherited = unit.get(prev, []) if prev and prev != r["memory"]["id"] else []
            unit.setdefault(r["memory"]["id"], []).extend(inherited + o["dia_ids"])
    engine.wait_indexed(300)
    engine.persist(force=True)
    m = engine.vector_file().matrix()
    assert m is not None and len(m.compact) == len(m.parts)
    scans = dict(m.compact)
    res: dict = {"compact": {5: [], 10: []}, "float32": {5: [], 10: []}}
    same = 0
    try:
        for q in queries:
            ctx = Context(project_id=f"locomo-{q['sample_id']}", project_name=q["sample_id"], branch="main",
                          default_branch="main")
            qvec = emb.embed([q["question"]])[0]
            answers = {}
            for mode in ("compact", "float32"):
                m.compact.clear()
                if mode == "compact":
                    m.compact.update(scans)
                cards = recall(engine, ctx, q["question"], limit=10, include_docs=False, scope="project",
                               qvec=qvec)["cards"]
                answers[mode] = [(c["item_id"], c.get("confidence")) for c in cards]
                units = [unit.get(c["item_id"], []) for c in cards]
                for k in (5, 10):
                    res[mode][k].append(recall_at(units, q["evidence"], k))
            same += answers["compact"] == answers["float32"]
    finally:
        engine.close()
    return {"questions": len(queries), "identical_answers": same,
            **{mode: {f"r{k}": round(sum(v) / len(v), 4) for k, v in r.items()} for mode, r in res.items()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chroma", help="a chroma directory holding the bench's 100k vectors (its HNSW is timed too)")
    ap.add_argument("--locomo", type=Path, help="LoCoMo's directory: compare recall() with and without the scan")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out = locomo(args.locomo) if args.locomo else at_100k(args.chroma)
    out["load_avg_1m"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
