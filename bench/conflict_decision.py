"""The conflict decision on a labeled pair set: precision and recall of "conflict" (and of "same claim").

    python bench/conflict_decision.py            # the shipped model on tune (+ each round held out in turn)
    python bench/conflict_decision.py --fit      # fit the model and thresholds on the tune split only, print them
    python bench/conflict_decision.py --test     # also score the held-out test split (once, at the end)
    python bench/conflict_decision.py --test --errors   # ... and list every wrong decision on it
    python bench/conflict_decision.py --latency  # what the decision adds to a remember (10 neighbours)

Data: `bench/data/conflict_pairs.jsonl`, pairs of developer notes (old, new) labeled paraphrase, refinement,
contradiction or unrelated (similar wording, another fact), each with a split (tune/test) and the round it was
written in. A contradiction must be decided `conflict`; a paraphrase or refinement `duplicate` (a confirmation);
an unrelated pair `distinct`. The decision is `mnemo.core.relation.compare.decide_many` with the real MiniLM embedder
(offline), the one `remember` uses. The conflict model (a logistic regression over the pair's features, see
core/relation/compare.py) and the same-claim thresholds are fit with `--fit` on the tune split alone (the regularization
and the decision threshold by leave-one-round-out cross-validation); the test split is scored only with `--test`.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "bench" / "data" / "conflict_pairs.jsonl"
OWN_FIGURES = ("subject_swap", "generalisation")
WANT = {"paraphrase": "duplicate", "refinement": "duplicate", "contradiction": "conflict", "unrelated": "distinct"}


def load(path: Path = DATA) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def prepare(rows: list[dict], embedder) -> list[dict]:
    """Each pair's cosine, features, masked and slot cosines (threshold-free: computed for every pair), once."""
    from mnemo.core.relation import compare as relation

    vocab = relation.vocabulary_of(embedder)
    vo = embedder.embed([r["old"] for r in rows])
    vn = embedder.embed([r["new"] for r in rows])
    pairs = [(r["old"], r["new"], float(a @ b)) for r, a, b in zip(rows, vo, vn, strict=True)]
    feats = [relation.features(o, n, c, vocab) for o, n, c in pairs]
    masked, slot = relation.embedded_cosines(pairs, feats, embedder.embed, relation.Thresholds(signal_min_cosine=-1))
    return [{**r, "cos": c, "f": f, "masked": masked.get(i), "slot_cos": slot.get(i),
             "x": relation.vector(f)}
            for i, (r, (_, _, c), f) in enumerate(zip(rows, pairs, feats, strict=True))]


def decide(p: dict, t, model) -> str:
    """core/relation.classify on the prepared features with thresholds `t` and conflict model `model`."""
    from mnemo.core.relation import compare as relation

    return relation.classify(p["f"], p["cos"], p["masked"], t, model).relation


def _prf(decided: list[str], wanted: list[str], rel: str) -> dict:
    tp = sum(1 for d, w in zip(decided, wanted, strict=True) if d == rel and w == rel)
    fp = sum(1 for d, w in zip(decided, wanted, strict=True) if d == rel and w != rel)
    fn = sum(1 for d, w in zip(decided, wanted, strict=True) if d != rel and w == rel)
    return {"precision": round(tp / (tp + fp), 3) if tp + fp else 0.0,
            "recall": round(tp / (tp + fn), 3) if tp + fn else 0.0, "tp": tp, "fp": fp, "fn": fn}


def scores(rows: list[dict], decided: list[str], split: str) -> dict:
    wanted = [WANT[p["label"]] for p in rows]
    out: dict = {"split": split, "pairs": len(rows)}
    for rel in ("conflict", "duplicate"):
        out[rel] = _prf(decided, wanted, rel)
    out["accuracy"] = round(sum(d == w for d, w in zip(decided, wanted, strict=True)) / max(1, len(rows)), 3)
    out["kinds"] = {}
    for kind in OWN_FIGURES:  # reported on their own: pairs whose right answer is not in the words' overlap
        mine = [(p, d) for p, d in zip(rows, decided, strict=True) if p.get("kind") == kind]
        if mine:
            out["kinds"][kind] = {"pairs": len(mine), "right": sum(d == WANT[p["label"]] for p, d in mine),
                                  "wrong": [{"id": p["id"], "label": p["label"], "decided": d} for p, d in mine
                                            if d != WANT[p["label"]]]}
    out["confusion"] = {lab: {d: sum(1 for p, x in zip(rows, decided, strict=True) if p["label"] == lab and x == d)
                              for d in ("conflict", "duplicate", "distinct")} for lab in WANT}
    return out


def shipped():
    from mnemo.core.relation import compare as relation

    return relation.DEFAULT, relation.MODEL


# -- fitting (tune split only) ---------------------------------------------------------------------------------
def logistic(xs: list[list[float]], ys: list[int], l2: float):
    """L2-regularized logistic regression by Newton's method on standardized features; returns (weights, bias) on
    the raw features (the standardization folded in)."""
    import numpy as np

    X, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    mu, sd = X.mean(0), X.std(0)
    sd[sd == 0] = 1.0
    Z = np.hstack([np.ones((len(X), 1)), (X - mu) / sd])
    w = np.zeros(Z.shape[1])
    reg = np.full(Z.shape[1], l2)
    reg[0] = 0.0
    for _ in range(100):
        p = 1 / (1 + np.exp(-np.clip(Z @ w, -60, 60)))
        g = Z.T @ (p - y) + reg * w
        h = Z.T @ (Z * (p * (1 - p))[:, None]) + np.diag(reg) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(h, g)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    weights = w[1:] / sd
    return [round(float(v), 4) for v in weights], round(float(w[0] - (w[1:] * mu / sd).sum()), 4)


def folds(rows: list[dict]) -> list[int]:
    """The fold of each pair: the round it was written in. Pairs of one round share their notes (one old note with
    a paraphrase, a refinement, a contradiction and an unrelated new note), so random folds would score a pair
    with its siblings in the training folds; holding out a whole round measures what a fresh set will see."""
    return [int(r.get("round", 0)) for r in rows]


def _fit_model(rows: list[dict], t, l2: float, threshold: float):
    from mnemo.core.relation import compare as relation

    # below the cosine gate, or without any cue, nothing is a conflict: the model is fit on the rest
    use = [p for p in rows if p["cos"] >= t.signal_min_cosine and relation.has_cue(p["f"])]
    w, b = logistic([p["x"] for p in use], [int(p["label"] == "contradiction") for p in use], l2)
    return relation.Model(tuple(w), b, threshold)


def cross_validated(rows: list[dict], t, l2: float, threshold: float) -> list[float]:
    """P(conflict) of each tune pair from a model fit on the other rounds."""
    from mnemo.core.relation import compare as relation

    fold = folds(rows)
    probs = [0.0] * len(rows)
    for k in sorted(set(fold)):
        model = _fit_model([p for p, f in zip(rows, fold, strict=True) if f != k], t, l2, threshold)
        for i, p in enumerate(rows):
            if fold[i] == k:
                asked = p["cos"] >= t.signal_min_cosine and relation.has_cue(p["f"])
                probs[i] = relation.conflict_probability(p["x"], model) if asked else 0.0
    return probs


def _balanced(probs: list[float], rows: list[dict], thr: float) -> tuple[float, float]:
    """(the lower of precision and recall, F1) of the conflict decision at `thr`: the target is both >= 0.90."""
    s = _prf(["conflict" if q >= thr else "-" for q in probs], [WANT[p["label"]] for p in rows], "conflict")
    p, r = s["precision"], s["recall"]
    return (min(p, r), round(2 * p * r / (p + r), 4) if s["tp"] else 0.0)


def fit(prepared: list[dict]):
    """On the tune split: the L2 strength and the decision threshold of the conflict model by the lower of the
    precision and recall of its leave-one-round-out predictions (then F1; ties to the threshold nearest 0.5),
    the model refit on all of tune, then
    the same-claim thresholds by F0.5 of the duplicate decision (precision counts double: a false confirmation
    drops a note), ties to the middle of the plateau."""
    tune = [p for p in prepared if p["split"] == "tune"]
    t, _ = shipped()
    grid = [round(0.2 + 0.025 * i, 3) for i in range(25)]
    best = max(((l2, thr, _balanced(probs, tune, thr)) for l2 in (0.3, 1.0, 3.0, 10.0, 30.0)
                for probs in [cross_validated(tune, t, l2, 0.5)] for thr in grid),
               key=lambda c: (c[2], -abs(c[1] - 0.5)))
    model = _fit_model(tune, t, best[0], best[1])

    def f05(tt) -> float:
        s = _prf([decide(p, tt, model) for p in tune], [WANT[p["label"]] for p in tune], "duplicate")
        return round(1.25 * s["precision"] * s["recall"] / (0.25 * s["precision"] + s["recall"]), 4) if s["tp"] else 0

    plain = [p for p in tune if decide(p, t, model) != "conflict"]
    cgrid = [round(x * 0.01, 2) for x in range(20, 100)]

    def margin(tt) -> float:
        return sum(min((abs(p[col] - getattr(tt, key)) for p in plain), default=0.0)
                   for key, col in (("dup_cosine", "cos"), ("refine_cosine", "cos")))

    cand = [replace(t, dup_cosine=a, refine_cosine=b, refine_contain=c) for a, b, c in
            itertools.product(cgrid[50::2], cgrid[20:70:2], (0.6, 0.67, 0.7, 0.75, 0.8, 0.9, 1.0))]
    chosen = max(cand, key=lambda tt: (f05(tt), margin(tt)))
    # then the cosine from which two replaced everyday spans are a rewording: F0.5 again, ties to the middle of the
    # gap between the two-slot pairs on either side
    two = [p["cos"] for p in plain if p["f"].two_slots and p["f"].slots_plain]

    def gap(tt) -> float:
        return min((abs(c - tt.two_slot_cosine) for c in two), default=0.0)

    chosen = max((replace(chosen, two_slot_cosine=c) for c in cgrid[40:]), key=lambda tt: (f05(tt), gap(tt)))
    return chosen, model, {"l2": best[0], "cv_min_pr": best[2][0], "cv_f1": best[2][1]}


def run(errors: bool = False, do_fit: bool = False, test: bool = False) -> dict:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.path.insert(0, str(REPO / "server"))
    from mnemo.core.embedding.embedder import get_embedder

    emb = get_embedder()
    rows = [r for r in load() if test or r["split"] == "tune"]  # the test split is not even embedded without --test
    t0 = time.perf_counter()
    prepared = prepare(rows, emb)
    took = time.perf_counter() - t0
    fitted = {}
    t, model = shipped()
    if do_fit:
        t, model, fitted = fit(prepared)
    tune = [p for p in prepared if p["split"] == "tune"]
    cv = cross_validated(tune, t, fitted.get("l2", model_l2()), model.threshold)
    out = {"model_id": emb.model_id, "pairs": len(prepared), "thresholds": asdict(t), "model": asdict(model),
           "fitted": fitted or None, "tune": scores(tune, [decide(p, t, model) for p in tune], "tune"),
           "tune_cv": scores(tune, [cv_decision(p, q, t, model) for p, q in zip(tune, cv, strict=True)], "tune (round held out)"),
           "seconds": round(took, 1)}
    if test:
        held = [p for p in prepared if p["split"] == "test"]
        out["test"] = scores(held, [decide(p, t, model) for p in held], "test")
        out["test_rounds"] = sorted({p.get("round") for p in held})
        if errors:
            out["errors"] = [{"id": p["id"], "label": p["label"], "decided": d, "cos": round(p["cos"], 3),
                              "masked": p["masked"] and round(p["masked"], 3), "signals": p["f"].signals,
                              "old": p["old"], "new": p["new"]}
                             for p in held for d in [decide(p, t, model)] if d != WANT[p["label"]]]
    return out


def latency(rows: list[dict], embedder, batch: int = 10, repeat: int = 3) -> dict:
    """What the decision adds to a `remember`: `relation.decide_many` on batches of `batch` (old, new, cosine)
    pairs (a remember compares the new note with up to 10 neighbours), as the write path calls it (`scores=False`:
    nothing embedded); the pair cosines are given, as the write path has them. Best of `repeat` runs."""
    from mnemo.core.relation import compare as relation

    vocab = relation.vocabulary_of(embedder)
    vo = embedder.embed([r["old"] for r in rows])
    vn = embedder.embed([r["new"] for r in rows])
    pairs = [(r["old"], r["new"], float(a @ b)) for r, a, b in zip(rows, vo, vn, strict=True)]
    chunks = [pairs[i:i + batch] for i in range(0, len(pairs), batch)]
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for chunk in chunks:
            relation.decide_many(chunk, embedder.embed, vocab, scores=False)
        best = min(best, time.perf_counter() - t0)
    t0 = time.perf_counter()
    for old, new, cos in pairs:
        relation.features(old, new, cos, vocab)
    feats = time.perf_counter() - t0
    return {"pairs": len(pairs), "batch": batch, "ms_per_batch": round(1000 * best / len(chunks), 2),
            "ms_per_pair": round(1000 * best / len(pairs), 2), "features_ms_per_pair": round(1000 * feats / len(pairs), 3),
            "load_average": os.getloadavg()[0]}


def model_l2() -> float:
    """The L2 strength the shipped model was fit with (relation.MODEL_L2), for the CV figure."""
    from mnemo.core.relation import compare as relation

    return relation.MODEL_L2


def cv_decision(p: dict, q: float, t, model) -> str:
    """The decision with the cross-validated P(conflict) `q` in place of the shipped model's."""
    from mnemo.core.relation import compare as relation

    if p["cos"] >= t.signal_min_cosine and q >= model.threshold:
        return "conflict"
    sure_not = relation.Model(model.weights, -1e9, model.threshold)
    return relation.classify(p["f"], p["cos"], p["masked"], t, sure_not).relation


def table(res: dict) -> str:
    m = res["model"]
    lines = [f"Conflict decision on `bench/data/conflict_pairs.jsonl` ({res['pairs']} pairs, model "
             f"{res['model_id']}; conflict model {'fit now on tune' if res['fitted'] else 'as shipped, fit on tune'}"
             f": logistic regression over {len(m['weights'])} features, threshold {m['threshold']}; same-claim "
             "thresholds " + ", ".join(f"{k}={v}" for k, v in res["thresholds"].items()) + ").", "",
             "| split | pairs | conflict precision | conflict recall | same-claim precision | same-claim recall "
             "| accuracy (3-way) |", "|---|---|---|---|---|---|---|"]
    for key in ("tune", "tune_cv", "test"):
        if key not in res:
            continue
        s = res[key]
        c, d = s["conflict"], s["duplicate"]
        lines.append(f"| {s['split']} | {s['pairs']} | {c['precision']:.3f} ({c['tp']}/{c['tp'] + c['fp']}) | "
                     f"{c['recall']:.3f} ({c['tp']}/{c['tp'] + c['fn']}) | {d['precision']:.3f} | {d['recall']:.3f} "
                     f"| {s['accuracy']:.3f} |")
    for key in ("tune", "test"):
        for kind, k in (res.get(key) or {}).get("kinds", {}).items():
            wrong = ", ".join(f"{w['id']} ({w['label']} -> {w['decided']})" for w in k["wrong"]) or "none wrong"
            lines.append(f"\n{res[key]['split']}: {kind.replace('_', '-')} pairs {k['right']}/{k['pairs']} right ({wrong})")
    last = "test" if "test" in res else "tune_cv"
    lines += ["", f"{res[last]['split']} confusion (label -> decided conflict / duplicate / distinct): " + "; ".join(
        f"{lab} {v['conflict']}/{v['duplicate']}/{v['distinct']}" for lab, v in res[last]["confusion"].items())]
    return "\n".join(lines)


def model_code(res: dict) -> str:
    """The fitted model and thresholds as the Python to put in core/relation/compare.py."""
    m, f = res["model"], res["fitted"]
    return (f"MODEL_L2 = {f['l2']}\nMODEL = Model(weights={tuple(m['weights'])},\n              bias={m['bias']}, "
            f"threshold={m['threshold']})\n# thresholds: {res['thresholds']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fit", action="store_true", help="fit the model and thresholds on the tune split")
    ap.add_argument("--test", action="store_true", help="also score the held-out test split")
    ap.add_argument("--errors", action="store_true", help="with --test: list the wrong decisions on the test split")
    ap.add_argument("--json", type=Path, help="also write the result as JSON")
    ap.add_argument("--latency", action="store_true",
                    help="time the decision per remember (batches of 10 tune pairs) instead of scoring")
    args = ap.parse_args()
    if args.latency:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        sys.path.insert(0, str(REPO / "server"))
        from mnemo.core.embedding.embedder import get_embedder

        print(json.dumps(latency([r for r in load() if r["split"] == "tune"], get_embedder())))
        return 0
    res = run(errors=args.errors, do_fit=args.fit, test=args.test)
    print(table(res))
    if args.fit:
        print("\n" + model_code(res))
    for e in res.get("errors", []):
        print(f"\n{e['id']} {e['label']} -> {e['decided']} (cos {e['cos']}, masked {e['masked']}, {e['signals']})"
              f"\n  old: {e['old']}\n  new: {e['new']}")
    if args.json:
        args.json.write_text(json.dumps(res, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
