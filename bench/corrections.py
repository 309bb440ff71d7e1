"""Learning from corrections: precision and recall of the detector on a labeled set of prompts.

    python bench/corrections.py                  # fit on tune, report tune and test (nothing written)
    python bench/corrections.py --write          # ... and write the model and the examples into core/
    python bench/corrections.py --current        # report what core/agent/corrections.py ships, unchanged

`bench/data/corrections.jsonl`: prompts written the way people write to coding agents, each labeled 1 (a lasting
correction or stated preference that should become a memory) or 0 (an ordinary request, a question, or a hard
negative: a one-off steer such as "don't worry about the tests for now", "no, I meant the other file"), with the
memory type a positive should get (user | project) and a split: `tune` (fits the model), `test` (held out, written
with tune and split at random), `fresh` (written after the detector was frozen; never used to change it).

Everything is fit on tune only. The model: L2 logistic regression over the sentence features of
`core/agent/corrections.py` (patterns, plus `knn`: the mean cosine of the sentence's MiniLM embedding to its 5 nearest
tune examples of lasting rules minus that to its 5 nearest other tune sentences; inside tune each sentence's `knn`
leaves its own prompt out). The threshold: the best out-of-fold tune precision (5 folds, each scored by a model fit
on the other four) among thresholds that keep out-of-fold tune recall >= --min-recall. A prompt is detected when
any of its sentences reaches the threshold.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fitted_block import write_fitted_block  # noqa: E402
from mnemo.core.agent import corrections as cr  # noqa: E402

DATA = ROOT / "bench" / "data" / "corrections.jsonl"
MODULE = ROOT / "server" / "mnemo" / "core" / "agent" / "corrections.py"


def load(path: Path = DATA) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class Candidates:
    """Every candidate sentence of every prompt: its prompt, pattern features, embedding and label."""

    def __init__(self, rows: list[dict], embedder):
        self.rows = rows
        self.prompt, self.text, self.feats = [], [], []
        for i, r in enumerate(rows):
            for s in cr.sentences(r["prompt"]):
                f = cr.pattern_features(s)
                if cr.candidate(f):
                    self.prompt.append(i)
                    self.text.append(s)
                    self.feats.append(f)
        self.prompt = np.array(self.prompt)
        self.label = np.array([rows[i]["label"] for i in self.prompt])
        t0 = time.perf_counter()
        self.vec = np.asarray(embedder.embed(self.text), dtype=np.float32)
        self.embed_ms = (time.perf_counter() - t0) * 1000 / max(1, len(self.text))

    def of(self, prompts: set[int]) -> np.ndarray:
        return np.array([j for j, p in enumerate(self.prompt) if p in prompts], dtype=int)

    def knn(self, query: np.ndarray, ref: np.ndarray) -> np.ndarray:
        """`knn` of the query sentences against the reference sentences, never counting a sentence's own prompt."""
        out = np.zeros(len(query))
        for n, j in enumerate(query):
            r = ref[self.prompt[ref] != self.prompt[j]]
            out[n] = cr.knn_feature(self.vec[j:j + 1], self.vec[r], self.label[r])[0] if len(r) else 0.0
        return out

    def matrix(self, idx: np.ndarray, knn: np.ndarray) -> np.ndarray:
        X = np.array([[self.feats[j].get(k, 0.0) for k in cr.FEATURES] for j in idx], dtype=np.float64)
        if len(idx):
            X[:, cr.FEATURES.index("knn")] = knn
        return X.reshape(len(idx), len(cr.FEATURES))


def fit(X: np.ndarray, y: np.ndarray, l2: float) -> tuple[np.ndarray, float]:
    """L2-regularized logistic regression, Newton steps on standardized features (intercept not penalized)."""
    mu, sd = X.mean(0), X.std(0)
    sd[sd < 1e-9] = 1.0
    Z = np.hstack([(X - mu) / sd, np.ones((len(X), 1))])
    beta = np.zeros(Z.shape[1])
    pen = np.r_[np.full(Z.shape[1] - 1, l2), 0.0]
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-np.clip(Z @ beta, -40, 40)))
        grad = Z.T @ (p - y) + pen * beta
        H = (Z * (p * (1 - p))[:, None]).T @ Z + np.diag(pen + 1e-9)
        step = np.linalg.solve(H, grad)
        beta -= step
        if np.abs(step).max() < 1e-9:
            break
    w = beta[:-1] / sd
    return w, float(beta[-1] - (mu / sd) @ beta[:-1])


def model_dict(w: np.ndarray, b: float) -> dict[str, float]:
    return {"intercept": round(b, 4), **{f: round(float(v), 4) for f, v in zip(cr.FEATURES, w, strict=True)}}


def train(c: Candidates, prompts: set[int], l2: float) -> tuple[dict[str, float], np.ndarray]:
    """The model fit on the candidate sentences of ``prompts``; returns it with the reference sentence indices."""
    ref = c.of(prompts)
    X = c.matrix(ref, c.knn(ref, ref))
    w, b = fit(X, c.label[ref].astype(np.float64), l2)
    return model_dict(w, b), ref


def score(c: Candidates, prompts: list[int], model: dict[str, float], ref: np.ndarray,
          best: dict[int, str] | None = None) -> np.ndarray:
    """Prompt-level scores: the best sentence probability (0 for a prompt without a candidate sentence); with
    ``best``, each prompt's best sentence is put there (the one a detection would learn)."""
    idx = c.of(set(prompts))
    X = c.matrix(idx, c.knn(idx, ref))
    probs: dict[int, float] = {}
    for j, x in zip(idx, X, strict=True):
        p = cr.probability(dict(zip(cr.FEATURES, x, strict=True)), model)
        i = int(c.prompt[j])
        if p > probs.get(i, -1.0):
            probs[i] = p
            if best is not None:
                best[i] = c.text[j]
    return np.array([probs.get(i, 0.0) for i in prompts])


def meaning_kept(rows: list[dict], idx: list[int], scores: np.ndarray, best: dict[int, str],
                 threshold: float) -> dict:
    """Of the prompts with a hand-written `note` (negations: "no need to ...", "no X", "don't", "never", "stop"),
    the share whose learned note (`memory_text` of the sentence a detection would learn) says what the note says
    (the same words, case and punctuation aside): the person's words minus a lead-in, never the sense flipped.
    Counted over every such prompt (detected or not), and over the detected ones."""
    kept, kept_detected, detected, wrong = 0, 0, 0, []
    noted = [(i, s) for i, s in zip(idx, scores, strict=True) if rows[i].get("note")]
    for i, s in noted:
        sent = best.get(i) or (cr.sentences(rows[i]["prompt"]) or [rows[i]["prompt"]])[0]
        learned = cr.memory_text(sent)
        ok = cr._canonical(learned) == cr._canonical(rows[i]["note"])
        kept += ok
        if s >= threshold:
            detected += 1
            kept_detected += ok
        if not ok:
            wrong.append({"prompt": rows[i]["prompt"], "learned": learned, "expected": rows[i]["note"]})
    if not noted:
        return {}
    return {"corrections_meaning_kept": round(kept / len(noted), 3), "negation_notes": len(noted),
            "negation_detected": detected,
            "meaning_kept_detected": round(kept_detected / detected, 3) if detected else None, "_wrong": wrong}


def oof_scores(c: Candidates, tune: list[int], l2: float, folds: int = 5) -> np.ndarray:
    """Out-of-fold prompt scores on tune: each fold scored by a model (and examples) of the other folds."""
    out = np.zeros(len(tune))
    for k in range(folds):
        held = tune[k::folds]
        model, ref = train(c, set(tune) - set(held), l2)
        sc = score(c, held, model, ref)
        for i, s in zip(held, sc, strict=True):
            out[tune.index(i)] = s
    return out


def pr(scores: np.ndarray, labels: np.ndarray, t: float) -> dict[str, float]:
    pred = scores >= t
    tp = int((pred & (labels == 1)).sum())
    fp = int((pred & (labels == 0)).sum())
    fn = int((~pred & (labels == 1)).sum())
    return {"precision": tp / (tp + fp) if tp + fp else 1.0, "recall": tp / (tp + fn) if tp + fn else 1.0,
            "tp": tp, "fp": fp, "fn": fn}


def choose_threshold(scores: np.ndarray, labels: np.ndarray, min_recall: float) -> float:
    """The threshold with the best precision among those that keep recall >= ``min_recall`` (precision first: a
    wrong memory costs more than a missed one); ties: the lower threshold (more recall)."""
    best_t, best = 0.5, (-1.0, -1.0)
    for t in sorted({round(float(s), 4) for s in scores if s > 0}):
        m = pr(scores, labels, t)
        if m["recall"] >= min_recall and (m["precision"], m["recall"]) > best:
            best_t, best = t, (m["precision"], m["recall"])
    return best_t


def report(c: Candidates, model, ref, threshold, split) -> dict:
    rows = c.rows
    idx = [i for i, r in enumerate(rows) if r["split"] == split]
    if not idx:
        return {"split": split, "prompts": 0}
    labels = np.array([rows[i]["label"] for i in idx])
    best: dict[int, str] = {}
    scores = score(c, idx, model, ref, best)
    m = pr(scores, labels, threshold)
    by_cat: dict[str, list[int]] = {}
    for i, s in zip(idx, scores, strict=True):
        by_cat.setdefault(rows[i]["category"], []).append(int(s >= threshold))
    typed = [cr.memory_type(rows[i]["prompt"]) == rows[i]["type"]
             for i, s in zip(idx, scores, strict=True) if rows[i]["label"] == 1 and s >= threshold]
    return {"split": split, "prompts": len(idx), "positives": int(labels.sum()),
            **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in m.items()},
            "detected_by_category": {k: f"{sum(v)}/{len(v)}" for k, v in sorted(by_cat.items())},
            "type_accuracy": round(float(np.mean(typed)), 3) if typed else None,
            **meaning_kept(rows, idx, scores, best, threshold), "_scores": scores, "_idx": idx}


def write_back(model: dict[str, float], threshold: float, c: Candidates, ref: np.ndarray) -> None:
    write_fitted_block(MODULE, model, threshold)
    examples = ",\n".join(json.dumps({"text": c.text[j], "label": int(c.label[j])}, ensure_ascii=False) for j in ref)
    about = json.dumps("tune-split candidate sentences of bench/data/corrections.jsonl: the knn feature's examples "
                       "(written by bench/corrections.py --write)")
    cr.EXAMPLES_FILE.write_text(f'{{"about": {about},\n"examples": [\n{examples}\n]}}\n', encoding="utf-8")


def current_model(c: Candidates) -> tuple[dict[str, float], np.ndarray, float]:
    """The shipped model, with the shipped examples as the knn reference (matched to the candidate sentences)."""
    shipped = json.loads(cr.EXAMPLES_FILE.read_text(encoding="utf-8"))["examples"]
    texts = {(e["text"], e["label"]) for e in shipped}
    ref = np.array([j for j in range(len(c.text)) if (c.text[j], int(c.label[j])) in texts
                    and c.rows[c.prompt[j]]["split"] == "tune"], dtype=int)
    return dict(cr.FITTED_MODEL), ref, cr.FITTED_THRESHOLD


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--embedder", default=None, help="the memory embedder the owner uses (default: the configured "
                    "one, MNEMO_EMBEDDER or onnx-int8)")
    ap.add_argument("--l2", type=float, default=10.0)
    ap.add_argument("--min-recall", type=float, default=0.75,
                    help="out-of-fold tune recall the threshold must keep (above the 0.60 goal, a margin); "
                         "among those thresholds the one with the best precision is chosen")
    ap.add_argument("--cv", default="", help="comma-separated l2 values: out-of-fold tune results for each")
    ap.add_argument("--current", action="store_true", help="report the shipped model, unchanged")
    ap.add_argument("--write", action="store_true", help="write the model and the examples into core/")
    ap.add_argument("--errors", default="", choices=["", "tune", "test", "fresh"],
                    help="list the prompts of this split that the detector gets wrong")
    args = ap.parse_args(argv)
    from mnemo.core.embedding.embedder import get_embedder

    rows = load(Path(args.data))
    emb = get_embedder(args.embedder)
    c = Candidates(rows, emb)
    tune = [i for i, r in enumerate(rows) if r["split"] == "tune"]
    tl = np.array([rows[i]["label"] for i in tune])
    for l2 in [float(x) for x in args.cv.split(",") if x]:
        oof = oof_scores(c, tune, l2)
        t = choose_threshold(oof, tl, args.min_recall)
        print(f"  cv l2={l2:<6} threshold {t} out-of-fold {pr(oof, tl, t)}", file=sys.stderr)
    if args.current:
        model, ref, threshold = current_model(c)
    else:
        model, ref = train(c, set(tune), args.l2)
        threshold = choose_threshold(oof_scores(c, tune, args.l2), tl, args.min_recall)
    reports = {s: report(c, model, ref, threshold, s) for s in ("tune", "test", "fresh")}
    out = {"data": str(Path(args.data)), "embedder": getattr(emb, "model_id", args.embedder), "threshold": threshold,
           "l2": args.l2, "model": model, "candidate_sentences": len(c.text),
           "embed_ms_per_sentence": round(c.embed_ms, 2),
           "corrections_meaning_kept": reports["test"].get("corrections_meaning_kept"),  # the key: test
           **{s: {k: v for k, v in r.items() if not k.startswith("_")} for s, r in reports.items()}}
    print(json.dumps(out, indent=1))
    if args.errors:
        r = reports[args.errors]
        for i, s in zip(r.get("_idx", []), r.get("_scores", []), strict=True):
            if (s >= threshold) != bool(rows[i]["label"]):
                print(f"  {'FP' if s >= threshold else 'FN'} {s:.2f} [{rows[i]['category']}] {rows[i]['prompt']}",
                      file=sys.stderr)
        for w in r.get("_wrong", []):
            print(f"  MEANING learned {w['learned']!r} for {w['prompt']!r} (expected {w['expected']!r})",
                  file=sys.stderr)
    if args.write and not args.current:
        write_back(model, threshold, c, ref)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
