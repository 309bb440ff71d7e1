"""The conflict decision on a labeled pair set: precision and recall of "conflict" (and of "same claim").

    python bench/conflict_decision.py            # the shipped thresholds on the tune and test splits
    python bench/conflict_decision.py --fit      # grid-search the thresholds on the tune split only
    python bench/conflict_decision.py --errors   # also list every wrong decision on the test split

Data: `bench/data/conflict_pairs.jsonl`, pairs of developer notes (old, new) labeled paraphrase, refinement,
contradiction or unrelated (similar wording, another fact), with a tune/test split balanced by label. A
contradiction must be decided `conflict`; a paraphrase or refinement `duplicate` (a confirmation); an unrelated
pair `distinct`. The decision is `mnemo.core.relation.decide` with the real MiniLM embedder (offline), the one
`remember` uses; thresholds live in core/relation.py and are fit with `--fit` on the tune split alone.
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
WANT = {"paraphrase": "duplicate", "refinement": "duplicate", "contradiction": "conflict", "unrelated": "distinct"}


def load(path: Path = DATA) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def prepare(rows: list[dict], embedder) -> list[dict]:
    """Cosines of the pairs and of their masked forms (threshold-free), once."""
    from mnemo.core import relation

    vocab = embedder.vocabulary() if hasattr(embedder, "vocabulary") else frozenset()
    vo = embedder.embed([r["old"] for r in rows])
    vn = embedder.embed([r["new"] for r in rows])
    out = []
    for r, a, b in zip(rows, vo, vn, strict=True):
        f = relation.features(r["old"], r["new"], float(a @ b), vocab)
        mc = None
        if f.signals:
            ma, mb = embedder.embed([relation.masked(r["old"], f.explained), relation.masked(r["new"], f.explained)])
            mc = float(ma @ mb)
        out.append({**r, "cos": float(a @ b), "signals": f.signals, "contain": f.contain, "masked": mc, "f": f})
    return out


def decide(p: dict, t) -> str:
    """core/relation.classify on the prepared features with thresholds `t` (a relation.Thresholds)."""
    from mnemo.core import relation

    return relation.classify(p["f"], p["cos"], p["masked"], t).relation


def scores(prepared: list[dict], t: dict, split: str) -> dict:
    rows = [p for p in prepared if p["split"] == split]
    out: dict = {"split": split, "pairs": len(rows)}
    for rel in ("conflict", "duplicate"):
        tp = sum(1 for p in rows if WANT[p["label"]] == rel and decide(p, t) == rel)
        fp = sum(1 for p in rows if WANT[p["label"]] != rel and decide(p, t) == rel)
        fn = sum(1 for p in rows if WANT[p["label"]] == rel and decide(p, t) != rel)
        out[rel] = {"precision": round(tp / (tp + fp), 3) if tp + fp else 0.0,
                    "recall": round(tp / (tp + fn), 3) if tp + fn else 0.0, "tp": tp, "fp": fp, "fn": fn}
    out["accuracy"] = round(sum(1 for p in rows if decide(p, t) == WANT[p["label"]]) / max(1, len(rows)), 3)
    out["confusion"] = {lab: {d: sum(1 for p in rows if p["label"] == lab and decide(p, t) == d)
                              for d in ("conflict", "duplicate", "distinct")} for lab in WANT}
    return out


def shipped():
    from mnemo.core import relation

    return relation.DEFAULT


def fit(prepared: list[dict]):
    """Grid search on the tune split: the conflict thresholds by F1 of the conflict decision, then the same-claim
    thresholds by F0.5 of the duplicate decision (precision counts double: a false confirmation drops a note).
    Ties go to the thresholds farthest from any tune pair (the middle of the plateau)."""
    tune = [p for p in prepared if p["split"] == "tune"]

    def f(rel: str, t, beta: float) -> float:
        s = scores(tune, t, "tune")[rel]
        p, r = s["precision"], s["recall"]
        return round((1 + beta ** 2) * p * r / (beta ** 2 * p + r), 4) if p + r else 0.0

    def margin(t, keys: dict[str, str], rows: list[dict]) -> float:
        return sum(min((abs(p[col] - getattr(t, key)) for p in rows if p[col] is not None), default=0.0)
                   for key, col in keys.items())

    signal = [p for p in tune if p["signals"]]
    plain = [p for p in tune if not p["signals"]]
    grid = [round(x * 0.01, 2) for x in range(20, 100)]
    # the cosine gate is searched in 0.30..0.60: below 0.3 two notes are not about one thing (a design floor)
    cand = [replace(shipped(), signal_min_cosine=a, mask_min=b) for a in grid[10:41:2] for b in grid[40:]]
    best = max(cand, key=lambda t: (f("conflict", t, 1.0),
                                    margin(t, {"signal_min_cosine": "cos", "mask_min": "masked"}, signal)))
    cand = [replace(best, dup_cosine=a, refine_cosine=b, refine_contain=c) for a, b, c in
            itertools.product(grid[50::2], grid[20:70:2], (0.6, 0.67, 0.7, 0.75, 0.8, 0.9, 1.0))]
    return max(cand, key=lambda t: (f("duplicate", t, 0.5),
                                    margin(t, {"dup_cosine": "cos", "refine_cosine": "cos",
                                               "refine_contain": "contain"}, plain)))


def run(errors: bool = False, do_fit: bool = False) -> dict:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.path.insert(0, str(REPO / "server"))
    from mnemo.core.embeddings import get_embedder

    emb = get_embedder()
    t0 = time.perf_counter()
    prepared = prepare(load(), emb)
    took = time.perf_counter() - t0
    thresholds = fit(prepared) if do_fit else shipped()
    out = {"model_id": emb.model_id, "pairs": len(prepared), "thresholds": asdict(thresholds), "fitted": do_fit,
           "tune": scores(prepared, thresholds, "tune"), "test": scores(prepared, thresholds, "test"),
           "seconds": round(took, 1)}
    if errors:
        out["errors"] = [{"id": p["id"], "label": p["label"], "decided": decide(p, thresholds), "cos": round(p["cos"], 3),
                          "masked": p["masked"] and round(p["masked"], 3), "signals": p["signals"],
                          "old": p["old"], "new": p["new"]}
                         for p in prepared if p["split"] == "test" and decide(p, thresholds) != WANT[p["label"]]]
    return out


def table(res: dict) -> str:
    lines = [f"Conflict decision on `bench/data/conflict_pairs.jsonl` ({res['pairs']} pairs, model "
             f"{res['model_id']}; thresholds {'fit now on tune' if res['fitted'] else 'as shipped, fit on tune'}: "
             + ", ".join(f"{k}={v}" for k, v in res["thresholds"].items()) + ").", "",
             "| split | pairs | conflict precision | conflict recall | same-claim precision | same-claim recall "
             "| accuracy (3-way) |", "|---|---|---|---|---|---|---|"]
    for split in ("tune", "test"):
        s = res[split]
        c, d = s["conflict"], s["duplicate"]
        lines.append(f"| {split} | {s['pairs']} | {c['precision']:.3f} ({c['tp']}/{c['tp'] + c['fp']}) | "
                     f"{c['recall']:.3f} ({c['tp']}/{c['tp'] + c['fn']}) | {d['precision']:.3f} | {d['recall']:.3f} "
                     f"| {s['accuracy']:.3f} |")
    lines += ["", "Test confusion (label -> decided conflict / duplicate / distinct): " + "; ".join(
        f"{lab} {v['conflict']}/{v['duplicate']}/{v['distinct']}" for lab, v in res["test"]["confusion"].items())]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fit", action="store_true", help="fit the thresholds on the tune split")
    ap.add_argument("--errors", action="store_true", help="list the wrong decisions on the test split")
    ap.add_argument("--json", type=Path, help="also write the result as JSON")
    args = ap.parse_args()
    res = run(errors=args.errors, do_fit=args.fit)
    print(table(res))
    for e in res.get("errors", []):
        print(f"\n{e['id']} {e['label']} -> {e['decided']} (cos {e['cos']}, masked {e['masked']}, {e['signals']})"
              f"\n  old: {e['old']}\n  new: {e['new']}")
    if args.json:
        args.json.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
