"""Open-set skill activation: does a skill fire when it applies and stay quiet when none does? TEST splits.

    python bench/skill_openset.py --data ../shared/data --json      # ~5 min; last line: one JSON object

- MetaTool awareness (../shared/data/metatool/awareness.jsonl, protocol in ../shared/data/README.md): the 199
  tools as the skills of a project, `SkillEngine.activate(None, query)` with every filter on (the threshold,
  max_skills; no file); a positive is a hit when its tool is among the first 3 activated skills, a negative is
  quiet when nothing activates. Fitted on `tune` (bench/fit_activation.py), reported on `test`.
- The dev set bench/data/activation_dev.jsonl: requests written from the bodies of real rules, each run in a
  temporary git repository holding the WHOLE corpus where its tool keeps it plus the starter skills (see
  skill_data.py); hit@3 needs every expected skill (one of each group's acceptable ones) among the first 3
  activated; always-apply rules are left out of both lists (they are in every answer by definition).
- Chatter (bench/data/activation_chatter.jsonl, test half): short messages no skill serves ("continue",
  "thanks!", "fix the bug"), each in every repository above with no file: the share that activates nothing.
- Baselines over the same skills and requests, each with a threshold fitted on the same tune requests: plain
  cosine (Mnemo's skill vectors) and BM25 (same tokens), activating every skill at or above it (at most 5).
- In the same run: MetaTool forced choice top-1/top-3 (bench/skill_activation.py's protocol: 3,000 queries, the
  product's ranking with no threshold) and activation latency with 1,000 skills (its protocol, int8 model).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import skill_activation as sa  # noqa: E402
from skill_data import (  # noqa: E402
    Case,
    activated_by_product,
    build_universes,
    by_slice,
    chatter_cases,
    dev_cases,
    load_dev,
    metatool_cases,
    metatool_universe,
    rates,
)


def baseline_scores(universes: dict, cases: list[Case]) -> dict[str, dict[str, np.ndarray]]:
    """Per case: cosine and BM25 of every skill (always-apply and held skills set to -inf: never counted)."""
    out: dict[str, dict[str, np.ndarray]] = {"cosine": {}, "bm25": {}}
    for c in cases:
        eng = universes[c.universe].engine
        idx, ev = eng.evidence(c.file, c.message)
        mask = idx.always | np.asarray([eng.held(s) for s in idx.skills], dtype=bool)
        out["cosine"][c.id] = np.where(mask, -np.inf, ev.cos)
        out["bm25"][c.id] = np.where(mask, -np.inf, ev.bm25)
    return out


def threshold_activation(scores: dict[str, np.ndarray], t: float, limit: int = 5) -> dict[str, list[int]]:
    out = {}
    for cid, s in scores.items():
        cand = np.flatnonzero(s >= t)
        out[cid] = [int(i) for i in cand[np.argsort(-s[cand], kind="stable")][:limit]]
    return out


def summary(r: dict) -> float:
    return (r["pos_hit3"] + r["neg_quiet"]) / 2


def fit_baseline(scores: dict[str, np.ndarray], tune: list[Case]) -> float:
    """The threshold maximizing the tune objective of bench/fit_activation.py (mean of the two summaries)."""
    vals = np.concatenate([s[np.isfinite(s) & (s > 0)] for cid, s in scores.items()])
    grid = np.unique(np.quantile(vals, np.linspace(0.5, 0.9999, 400)))
    aw = [c for c in tune if c.source == "metatool"]
    dev = [c for c in tune if c.source == "dev"]
    best = (-1.0, float(grid[0]))
    for t in grid:
        act = threshold_activation({c.id: scores[c.id] for c in tune}, float(t))
        obj = (summary(rates(aw, act)) + summary(rates(dev, act))) / 2
        if obj > best[0]:
            best = (obj, float(t))
    return best[1]


def dev_report(cases: list[Case], act: dict[str, list[int]]) -> dict:
    r = rates(cases, act)
    pos = [c for c in cases if c.groups]
    return {
        "dev_hit3": r["pos_hit3"], "dev_neg_quiet": r["neg_quiet"], "dev_n": len(cases),
        "dev_by_kind": {**by_slice(cases, act, lambda c: c.kind),
                        **by_slice(pos, act, lambda c: "with_file" if c.file else "no_file")},
        "dev_by_format": by_slice(pos, act, lambda c: c.fmt),
        "dev_by_evidence": by_slice(pos, act, lambda c: c.evidence_kind),
        "dev_by_corpus": by_slice(cases, act, lambda c: c.corpus),
        # meaning is all these skills have: no glob at all, or only a catch-all one
        "dev_desc_only_hit3": rates([c for c in pos if c.evidence_kind != "specific_glob"], act)["pos_hit3"],
    }


def run_openset(data: Path, tmp: Path, emb, vector_cache: str | None) -> tuple[dict, object]:
    universes = build_universes(data, tmp, emb, vector_cache)
    mt, rows = metatool_universe(data, tmp, emb, vector_cache)
    universes["metatool"] = mt
    cases = metatool_cases(rows, mt) + dev_cases(load_dev(), universes)
    test = [c for c in cases if c.split == "test"]
    tune = [c for c in cases if c.split == "tune"]
    t0 = time.perf_counter()
    act = activated_by_product(universes, test)
    secs = time.perf_counter() - t0
    aw = rates([c for c in test if c.source == "metatool"], act)
    out = {"awareness_pos_hit3": aw["pos_hit3"], "awareness_neg_quiet": aw["neg_quiet"],
           "awareness_mean": round(summary(aw), 4), "awareness_n": aw["n_pos"] + aw["n_neg"],
           **dev_report([c for c in test if c.source == "dev"], act)}
    chat = [c for c in chatter_cases(universes) if c.split == "test"]
    out["chatter_quiet"] = rates(chat, activated_by_product(universes, chat))["neg_quiet"]
    out["chatter_n"] = len(chat)
    tune_act = activated_by_product(universes, tune)
    out["tune"] = {"awareness": rates([c for c in tune if c.source == "metatool"], tune_act),
                   "dev": rates([c for c in tune if c.source == "dev"], tune_act)}
    scores = baseline_scores(universes, cases)
    out["baselines"] = {}
    for name, sc in scores.items():
        t = fit_baseline(sc, tune)
        bact = threshold_activation({c.id: sc[c.id] for c in test}, t)
        a = rates([c for c in test if c.source == "metatool"], bact)
        d = rates([c for c in test if c.source == "dev"], bact)
        out["baselines"][name] = {"threshold": round(t, 4), "awareness_pos_hit3": a["pos_hit3"],
                                  "awareness_neg_quiet": a["neg_quiet"], "dev_hit3": d["pos_hit3"],
                                  "dev_neg_quiet": d["neg_quiet"]}
    eng = universes["copilot_instructions"].engine
    out["threshold"] = eng.config.threshold
    out["universe"] = {k: len(u.engine._ensure_index().skills) for k, u in universes.items()}
    out["held"] = {k: sum(1 for s in u.engine._ensure_index().skills if s.flags) for k, u in universes.items()}
    out["openset_seconds"] = round(secs, 1)
    return out, mt


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    ap.add_argument("--json", action="store_true", help="print only the final JSON object")
    ap.add_argument("--vector-cache", default=str(Path(tempfile.gettempdir()) / "mnemo-bench-skill-vectors.sqlite"))
    ap.add_argument("--calls", type=int, default=300, help="timed activations for the latency figure")
    ap.add_argument("--no-forced", action="store_true", help="skip MetaTool forced choice (~70 s)")
    ap.add_argument("--no-latency", action="store_true")
    args = ap.parse_args(argv)
    from mnemo.core.embedding.embedder import get_embedder

    data, emb = Path(args.data), get_embedder("onnx-int8")
    with tempfile.TemporaryDirectory(prefix="mnemo-openset-") as td:
        out, mt = run_openset(data, Path(td), emb, args.vector_cache)
        tools, qrows = sa.load_metatool(data)
        test, _tune = sa.splits(len(qrows))
        if not args.no_forced:
            acc = sa.evaluate(mt.engine, qrows, test, {s.name: s.id for s in mt.engine.skills()})
            out["metatool_top1"], out["metatool_top3"] = acc["mnemo"]["top1"], acc["mnemo"]["top3"]
        if not args.no_latency:
            lat = sa.latency(data, tools, qrows, test, Path(td), {"onnx-int8": emb}, args.calls,
                             args.vector_cache)["onnx-int8"]
            out["p95_ms_1000_skills"], out["p50_ms_1000_skills"] = lat["p95_ms"], lat["p50_ms"]
            out["cpu_p95_ms_1000_skills"] = lat["cpu_p95_ms"]
            out["latency"] = lat
    out["machine"] = f"{platform.machine()} {os.cpu_count()} cpu, Python {platform.python_version()}"
    out["load_avg_1m"] = round(os.getloadavg()[0], 2)
    if not args.json:
        print(f"awareness (test): positives hit@3 {out['awareness_pos_hit3']}, negatives quiet "
              f"{out['awareness_neg_quiet']}; dev (test): hit@3 {out['dev_hit3']}, negatives quiet "
              f"{out['dev_neg_quiet']}; by kind {out['dev_by_kind']}")
        for name, b in out["baselines"].items():
            print(f"baseline {name}: {b}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
