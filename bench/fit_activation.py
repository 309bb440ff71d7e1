"""Fit the skill activation model (a logistic regression over decision.FEATURES) and its threshold on TUNE data only.

    python bench/fit_activation.py --data ../shared/data            # fit and print the coefficients
    python bench/fit_activation.py --data ../shared/data --write    # ... and write them into activation.py

Tune data: MetaTool awareness records with `split == "tune"` (199 tools as skills, no file) and the `tune` split of
bench/data/activation_dev.jsonl (five real rule corpora + the starter skills, each in its own repository). Each
dev request that has an active file also gives a file-only example (no message) whose positives are the skills
whose specific glob matches the file: what every tool does with a rule's globs.

Training rows: per request, every skill with some evidence (a keyword hit, a glob match, or in the top 30 of the
dense, BM25 or fused ranking) plus the expected ones; label 1 for an expected skill. Every request weighs the same
within its source and the two sources weigh the same. The threshold is then chosen on the same tune requests,
with the product's own rule (every skill at or above it, at most max_skills, always-apply rules aside), to
maximize the mean of the two benchmarks' summaries (each the mean of its positives hit@3 and its negatives
quiet). The test splits are never read.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from mnemo.core.skills.activation import ActivationConfig  # noqa: E402
from mnemo.core.skills.decision import FEATURES  # noqa: E402
from skill_data import (  # noqa: E402
    Case,
    build_universes,
    dev_cases,
    hit_at,
    load_dev,
    metatool_cases,
    metatool_universe,
)

ACTIVATION_PY = Path(__file__).resolve().parents[1] / "server" / "mnemo" / "core" / "skills" / "activation.py"
CANDIDATE_DEPTH = 30
# Evidence that can only speak for a skill: a negative weight here would be noise of the tune data (it happened
# to glob_lit: a more literal pattern scored lower), so such a feature is fixed at 0 and the model refitted.
NON_NEGATIVE = ("cos", "part_cos", "bm25_log", "keyword", "glob", "glob_lit")


@dataclass
class Sample:
    case: Case
    X: np.ndarray  # (n skills, features)
    free: np.ndarray  # bool: may activate by probability (not forced, not held, not a manual rule left unnamed)
    labels: np.ndarray  # 0/1 per skill
    rows: np.ndarray  # indices used for training
    weight: float  # per request


def collect(universes: dict, cases: list[Case], cfg: ActivationConfig) -> list[Sample]:
    out = []
    for c in cases:
        eng = universes[c.universe].engine
        idx, ev, X, _p = eng.probabilities(c.file, c.message, cfg)
        held = np.asarray([eng.held(s) for s in idx.skills], dtype=bool)
        forced = (idx.always & cfg.include_always) | ev.mentioned
        free = ~forced & ~held & ~(idx.manual & ~ev.mentioned)
        labels = np.zeros(ev.n, dtype=np.float64)
        for g in c.groups:
            labels[g] = 1.0
        if c.message is None:  # a file-only example: the tool attaches every rule whose specific glob matches
            labels = ev.glob.astype(np.float64)
        some = (ev.kw > 0) | (ev.glob > 0) | (ev.glob_catch > 0)
        for r in (ev.dense_rank, ev.bm25_rank, ev.fused_rank):
            some |= (r > 0) & (r <= CANDIDATE_DEPTH)
        rows = np.flatnonzero((some | (labels > 0)) & free)
        out.append(Sample(c, X, free, labels, rows, 1.0))
    return out


def file_only(cases: list[Case]) -> list[Case]:
    return [Case(c.id + "#file", "dev-file", c.split, c.universe, c.file, None, [], "file_only", c.corpus)
            for c in cases if c.file]


def weigh(samples: list[Sample]) -> None:
    """Each source weighs 1 in total, split evenly over its requests (file-only examples count half)."""
    by_source: dict[str, list[Sample]] = {}
    for s in samples:
        by_source.setdefault("dev" if s.case.source.startswith("dev") else s.case.source, []).append(s)
    for group in by_source.values():
        units = sum(0.5 if s.case.source == "dev-file" else 1.0 for s in group)
        for s in group:
            s.weight = (0.5 if s.case.source == "dev-file" else 1.0) / units


def fit(samples: list[Sample], l2: float) -> tuple[np.ndarray, float]:
    """The model, with the NON_NEGATIVE features that came out negative fixed at 0."""
    fixed: set[int] = set()
    while True:
        w, b = _fit(samples, l2, fixed)
        neg = {FEATURES.index(f) for f in NON_NEGATIVE if w[FEATURES.index(f)] < 0} - fixed
        if not neg:
            return w, b
        fixed |= neg


def _fit(samples: list[Sample], l2: float, fixed: set[int]) -> tuple[np.ndarray, float]:
    """L2-regularized logistic regression (Newton steps on standardized features, intercept not penalized);
    the features in ``fixed`` weigh 0."""
    X = np.vstack([s.X[s.rows] for s in samples]).astype(np.float64)
    X[:, sorted(fixed)] = 0.0
    y = np.concatenate([s.labels[s.rows] for s in samples])
    sw = np.concatenate([np.full(len(s.rows), s.weight / max(1, len(s.rows))) for s in samples])
    sw *= len(samples) / sw.sum()
    mu, sd = X.mean(0), X.std(0)
    sd[sd < 1e-9] = 1.0
    Z = np.hstack([(X - mu) / sd, np.ones((len(X), 1))])
    beta = np.zeros(Z.shape[1])
    pen = np.r_[np.full(Z.shape[1] - 1, l2), 0.0]
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-np.clip(Z @ beta, -40, 40)))
        grad = Z.T @ (sw * (p - y)) + pen * beta
        H = (Z * (sw * p * (1 - p))[:, None]).T @ Z + np.diag(pen + 1e-9)
        step = np.linalg.solve(H, grad)
        beta -= step
        if np.abs(step).max() < 1e-9:
            break
    w = beta[:-1] / sd
    return w, float(beta[-1] - (mu / sd) @ beta[:-1])


def activated(s: Sample, w: np.ndarray, b: float, threshold: float, limit: int) -> list[int]:
    """The product's rule (activation._select), always-apply rules left out: free skills at or above the
    threshold, most likely first, at most ``limit``."""
    p = 1.0 / (1.0 + np.exp(-np.clip(s.X.astype(np.float64) @ w + b, -40, 40)))
    cand = np.flatnonzero(s.free & (p >= threshold))
    return [int(i) for i in cand[np.argsort(-p[cand], kind="stable")][:limit]]


def scores(samples: list[Sample], w: np.ndarray, b: float, threshold: float, limit: int) -> dict[str, float]:
    out: dict[str, list[float]] = {"aw_pos": [], "aw_quiet": [], "dev_hit": [], "dev_quiet": []}
    for s in samples:
        if s.case.source == "dev-file":
            continue
        act = activated(s, w, b, threshold, limit)
        src = "aw" if s.case.source == "metatool" else "dev"
        if s.case.groups:
            out[f"{src}_pos" if src == "aw" else "dev_hit"].append(hit_at(s.case.groups, act))
        else:
            out[f"{src}_quiet"].append(not act)
    return {k: float(np.mean(v)) if v else float("nan") for k, v in out.items()}


def objective(sc: dict[str, float]) -> float:
    """The mean of each benchmark's own summary (MetaTool's protocol: the mean of positives hit and negatives
    quiet; the dev set's the same), so each data set weighs the same whatever its size."""
    return ((sc["aw_pos"] + sc["aw_quiet"]) / 2 + (sc["dev_hit"] + sc["dev_quiet"]) / 2) / 2


def choose_threshold(samples: list[Sample], w: np.ndarray, b: float, limit: int) -> tuple[float, dict]:
    best = None
    for t in np.round(np.arange(0.05, 0.951, 0.01), 2):
        sc = scores(samples, w, b, float(t), limit)
        if best is None or objective(sc) > best[0]:
            best = (objective(sc), float(t), sc)
    return best[1], best[2]


def cross_validate(samples: list[Sample], l2s: list[float], limit: int, folds: int = 5) -> None:
    """k-fold cross-validation over tune requests (by request id), to choose the regularization."""
    rng = np.random.default_rng(0)
    ids = sorted({s.case.id.split("#")[0] for s in samples})
    fold_of = dict(zip(ids, rng.permutation(len(ids)) % folds, strict=True))
    for l2 in l2s:
        res = []
        for f in range(folds):
            train = [s for s in samples if fold_of[s.case.id.split("#")[0]] != f]
            held = [s for s in samples if fold_of[s.case.id.split("#")[0]] == f]
            weigh(train)
            w, b = fit(train, l2)
            t, _ = choose_threshold(train, w, b, limit)
            res.append(scores(held, w, b, t, limit))
        mean = {k: round(float(np.nanmean([r[k] for r in res])), 3) for k in res[0]}
        print(f"  cv l2={l2:<6} {mean}  objective {objective(mean):.3f}", file=sys.stderr)


def write_back(w: np.ndarray, b: float, threshold: float) -> None:
    coef = {"intercept": round(b, 4), **{f: round(float(v), 4) for f, v in zip(FEATURES, w, strict=True)}}
    items = [f'"{k}": {v}' for k, v in coef.items()]
    lines, line = [], "   "
    for it in items:
        if len(line) + len(it) + 2 > 112:
            lines.append(line.rstrip())
            line = "   "
        line += f" {it},"
    lines.append(line.rstrip())
    block = "FITTED_MODEL: dict[str, float] = {\n" + "\n".join(lines) + "\n}\n" + f"FITTED_THRESHOLD = {threshold}\n"
    src = ACTIVATION_PY.read_text(encoding="utf-8")
    new = re.sub(r"FITTED_MODEL: dict\[str, float\] = \{.*?\}\nFITTED_THRESHOLD = [0-9.]+\n", block, src,
                 flags=re.DOTALL)
    if new == src and block not in src:
        raise SystemExit("could not find the fitted block in activation.py")
    ACTIVATION_PY.write_text(new, encoding="utf-8")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    ap.add_argument("--vector-cache", default=str(Path(tempfile.gettempdir()) / "mnemo-bench-skill-vectors.sqlite"))
    ap.add_argument("--embedder", default="onnx-int8")
    ap.add_argument("--l2", type=float, default=0.3)
    ap.add_argument("--cv", default="", help="comma-separated l2 values to cross-validate on tune first")
    ap.add_argument("--write", action="store_true", help="write the coefficients into activation.py")
    args = ap.parse_args(argv)
    from mnemo.core.embeddings import get_embedder

    data, emb, cfg = Path(args.data), get_embedder(args.embedder), ActivationConfig()
    with tempfile.TemporaryDirectory(prefix="mnemo-fit-") as td:
        universes = build_universes(data, Path(td), emb, args.vector_cache)
        mt, rows = metatool_universe(data, Path(td), emb, args.vector_cache)
        universes["metatool"] = mt
        dev = [c for c in dev_cases(load_dev(), universes) if c.split == "tune"]
        aw = [c for c in metatool_cases(rows, mt) if c.split == "tune"]
        samples = collect(universes, aw + dev + file_only(dev), cfg)
    if args.cv:
        cross_validate(samples, [float(x) for x in args.cv.split(",")], cfg.max_skills)
    weigh(samples)
    w, b = fit(samples, args.l2)
    t, sc = choose_threshold(samples, w, b, cfg.max_skills)
    coef = {"intercept": round(b, 4), **{f: round(float(v), 4) for f, v in zip(FEATURES, w, strict=True)}}
    print(json.dumps({"threshold": t, "tune": {k: round(v, 4) for k, v in sc.items()}, "model": coef,
                      "requests": {"metatool": len(aw), "dev": len(dev)}, "l2": args.l2}))
    if args.write:
        write_back(w, b, t)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
