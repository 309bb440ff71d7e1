"""Recall quality on LoCoMo observations: BM25 alone, dense alone and Mnemo's hybrid, in one run.

Protocol (LoCoMo's own, see ../shared/data/README.md): for each question (categories 1-4) retrieve within its
own conversation only; recall@k = fraction of the question's evidence dia_ids covered by the top-k observations.
All three systems use the same store, the same keyword (BM25) index and the same MiniLM vectors; only ranking
differs.

    python bench/recall_quality.py --data ../shared/data/locomo --json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

from scratch import scratch_dir  # bench/ is on sys.path when run as a script

SWEEP = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3)


def recall_at(ranked_units: list[list[str]], evidence: list[str], k: int) -> float:
    covered = set()
    for dia_ids in ranked_units[:k]:
        covered.update(dia_ids)
    ev = set(evidence)
    return len(ev & covered) / len(ev) if ev else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared/data/locomo")
    ap.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    ap.add_argument("--embedder", default=None, help="onnx-int8 (default: MNEMO_EMBEDDER, else the setting) | onnx | torch")
    ap.add_argument("--min-confidence", type=float, default=None,
                    help="recall's minimum confidence (default: the shipped default, MIN_CONFIDENCE)")
    ap.add_argument("--sweep", action="store_true",
                    help="also print Mnemo's R@5/R@10 and the hidden hits for a range of minimum confidences")
    args = ap.parse_args()
    obs_path = args.data / "locomo_observations.jsonl"
    if not obs_path.exists():
        print(f"LoCoMo data not found at {args.data}", file=sys.stderr)
        return 2

    from mnemo.core.embedding.embedder import get_embedder
    from mnemo.core.engine import Engine
    from mnemo.core.indexes.dense import exact_scores
    from mnemo.core.memory.recall import recall
    from mnemo.core.memory.write import remember
    from mnemo.core.models import Context

    observations = [json.loads(line) for line in obs_path.open()]
    queries = [json.loads(line) for line in (args.data / "locomo_queries.jsonl").open()]
    queries = [q for q in queries if q["category"] in (1, 2, 3, 4) and q["evidence"]]
    embedder = get_embedder(args.embedder)
    t0 = time.time()
    home = scratch_dir("mnemo-bench-")
    engine = Engine(home, embedder=embedder)
    by_sample = defaultdict(list)
    for o in observations:
        by_sample[o["sample_id"]].append(o)
    unit_dias: dict[str, list[str]] = {}
    statuses: dict[str, int] = defaultdict(int)
    for sample, obs in by_sample.items():
        ctx = Context(project_id=f"locomo-{sample}", project_name=sample, branch="main", default_branch="main")
        vecs = embedder.embed([o["text"] for o in obs])
        for o, v in zip(obs, vecs, strict=True):
            r = remember(engine, ctx, o["text"], kind="fact", source="import", vec=v, on_conflict="keep_both")
            statuses[r["status"]] += 1
            prev = (r.get("same_as") or {}).get("id")  # a refinement replaces `prev`: its evidence carries over
            inherited = unit_dias.get(prev, []) if prev and prev != r["memory"]["id"] else []
            unit_dias.setdefault(r["memory"]["id"], []).extend(inherited + o["dia_ids"])
    engine.wait_indexed(300)
    load_s = time.time() - t0

    systems = ("bm25", "dense", "mnemo")
    sweep = {t: {5: [], 10: [], "hidden": []} for t in SWEEP}
    scores = {s: {5: [], 10: []} for s in systems}
    per_cat = {s: defaultdict(list) for s in systems}
    t1 = time.time()
    for q in queries:
        ctx = Context(project_id=f"locomo-{q['sample_id']}", project_name=q["sample_id"], branch="main",
                      default_branch="main")
        part = f"p-{ctx.project_id}"
        qvec = embedder.embed([q["question"]])[0]
        bm25 = [i for i, _ in engine.keywords.search([part], q["question"], 10)]
        dense = [i for i, _ in sorted(exact_scores(engine.store, [part], qvec), key=lambda kv: -kv[1])[:10]]
        res = recall(engine, ctx, q["question"], limit=10, include_docs=False, scope="project", qvec=qvec,
                            min_confidence=args.min_confidence)
        mnemo = [c["item_id"] for c in res["cards"]]
        if args.sweep:
            for t in SWEEP:
                cards = recall(engine, ctx, q["question"], limit=10, include_docs=False, scope="project", qvec=qvec,
                                      min_confidence=t)
                units = [unit_dias.get(c["item_id"], []) for c in cards["cards"]]
                for k in (5, 10):
                    sweep[t][k].append(recall_at(units, q["evidence"], k))
                sweep[t]["hidden"].append(cards["hidden_low_confidence"] if len(cards["cards"]) < 10 else 0)
        for name, ranked in (("bm25", bm25), ("dense", dense), ("mnemo", mnemo)):
            units = [unit_dias.get(i, []) for i in ranked]
            for k in (5, 10):
                scores[name][k].append(recall_at(units, q["evidence"], k))
            per_cat[name][q["category"]].append(recall_at(units, q["evidence"], 10))
    engine.close()
    out = {s: {"r5": round(sum(scores[s][5]) / len(queries), 4), "r10": round(sum(scores[s][10]) / len(queries), 4)}
           for s in systems}
    detail = {"questions": len(queries), "observations": len(observations), "model_id": embedder.model_id,
              "load_s": round(load_s, 1), "eval_s": round(time.time() - t1, 1), "write_statuses": dict(statuses),
              "min_confidence": args.min_confidence,
              "r10_by_category": {s: {str(c): round(sum(v) / len(v), 4) for c, v in sorted(per_cat[s].items())}
                                  for s in systems}}
    if args.sweep:
        detail["sweep"] = {str(t): {"r5": round(sum(v[5]) / len(v[5]), 4), "r10": round(sum(v[10]) / len(v[10]), 4),
                                    "questions_with_fewer_cards": sum(1 for h in v["hidden"] if h)}
                           for t, v in sweep.items()}
    print(json.dumps(detail), file=sys.stderr)
    if not args.json:
        for s in systems:
            print(f"{s:>6}: R@5 {out[s]['r5']:.3f}  R@10 {out[s]['r10']:.3f}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
