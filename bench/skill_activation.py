"""Skill activation benchmark: MetaTool tool selection (accuracy) and activation latency at 1,000 skills.

Protocol
- MetaTool's 199 tools (``plugin_des.json``) are written as Mnemo skills (name + description, nothing else) into a
  temporary folder and loaded through the normal registry; a fixed random sample of 3,000 single-tool queries
  (``all_clean_data.csv``, ``random.Random(0).sample``) is activated with no file; a query is a top-k hit when its
  gold tool is among the first k skills. The engine's own order (probability) is used with no threshold
  (so top-3 always has 3 candidates when 3 skills score above 0).
- Baselines in the same run, over the same skills and texts: BM25 alone (same tokens), dense alone (the same
  multi-view MiniLM vectors the engine uses, cosine), and plain dense (one embedding of name + description).
- The skill embedder is the one the product uses for skills: the int8 export of MiniLM (``--embedder``); the
  float model is timed in the same run, call by call (``--compare``), so the two latencies compare.
- Latency: 1,000 skills loaded (all 938 real rule files of ../shared/data/skills + the first 62 MetaTool tools);
  each timed call is a full ``SkillEngine.activate(file, message)`` (query embedding, glob matching of every
  rule against a real file path, keywords, BM25, fusion, filters), with a different real path and query per call.

Prints a human summary and, last, one JSON object. ``--tune`` evaluates on a disjoint query split (never the
test sample) and is how the default weights were chosen.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from mnemo.core.skills import ActivationConfig, SkillEngine, SkillRegistry  # noqa: E402
from mnemo.core.skills.evidence import dense_text  # noqa: E402
from mnemo.core.skills.model import FORMAT_CLAUDE_SKILL, FORMAT_CONTINUE, FORMAT_COPILOT, FORMAT_CURSOR  # noqa: E402
from mnemo.core.text import tokenize  # noqa: E402

CORPORA = {
    "continue_rules": FORMAT_CONTINUE,
    "copilot_instructions": FORMAT_COPILOT,
    "cursor_mdc_sanjeed5": FORMAT_CURSOR,
    "cursorrules_current": FORMAT_CURSOR,
    "wshobson_skills": FORMAT_CLAUDE_SKILL,
}


def load_metatool(data: Path) -> tuple[dict[str, str], list[tuple[str, str]]]:
    tools = json.loads((data / "metatool" / "plugin_des.json").read_text())
    with open(data / "metatool" / "all_clean_data.csv", newline="") as f:
        rows = [(r["Query"], r["Tool"]) for r in csv.DictReader(f)]
    return tools, rows


def write_tools(tools: dict[str, str], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, desc in tools.items():
        head = yaml.safe_dump({"name": name, "description": desc}, sort_keys=False, allow_unicode=True)
        (folder / f"{name}.md").write_text(f"---\n{head}---\n", encoding="utf-8")


def splits(n_rows: int, n_test: int = 3000, n_tune: int = 2000) -> tuple[list[int], list[int]]:
    test = random.Random(0).sample(range(n_rows), n_test)
    rest = sorted(set(range(n_rows)) - set(test))
    tune = random.Random(1).sample(rest, n_tune)
    return test, tune


def evaluate(engine: SkillEngine, rows, sample, tool_to_id) -> dict:
    idx = engine._ensure_index()
    id_pos = {s.id: i for i, s in enumerate(idx.skills)}
    gold_pos = {t: id_pos[i] for t, i in tool_to_id.items()}
    hits = {"mnemo": [0, 0], "bm25": [0, 0], "dense": [0, 0], "dense_plain": [0, 0]}
    emb = engine.embedder
    plain = emb.embed([dense_text(s) for s in idx.skills])  # one embedding of name + description per skill
    queries = [rows[i][0] for i in sample]
    qv = emb.embed(queries)
    for qi, i in enumerate(sample):
        q, tool = rows[i]
        g = gold_pos[tool]
        top = [id_pos[s.id] for s in engine.rank(q, k=3)]
        bm = [d for d, _ in idx.bm25.top(tokenize(q), 3)]
        dn = list(np.argsort(-(idx.vectors @ qv[qi]), kind="stable")[:3])
        dp = list(np.argsort(-(plain @ qv[qi]), kind="stable")[:3])
        for name, ranking in (("mnemo", top), ("bm25", bm), ("dense", dn), ("dense_plain", dp)):
            if ranking[:1] == [g]:
                hits[name][0] += 1
            if g in ranking[:3]:
                hits[name][1] += 1
    n = max(1, len(sample))
    return {k: {"top1": round(v[0] / n, 4), "top3": round(v[1] / n, 4)} for k, v in hits.items()}


def latency(data: Path, tools: dict[str, str], rows, sample, tmp: Path, embedders: dict, n_calls: int,
            vector_cache: str | None = None) -> dict:
    """Latency per embedder, interleaved call by call (the same path and query for each embedder in turn, so a
    burst of load on this shared machine hits them alike). Returns {name: figures}."""
    extra = [(str(data / "skills" / c), f) for c, f in CORPORA.items()]
    n_corpus = sum(1 for c, f in CORPORA.items() for _ in (data / "skills" / c).rglob("*") if _.is_file()
                   and _.name != "LICENSE")
    few = dict(list(tools.items())[: max(0, 1000 - n_corpus)])
    write_tools(few, tmp / "metatool_few")
    cases = [json.loads(line) for line in open(data / "glob" / "glob_cases.jsonl")]
    paths = [c["path"] for c in cases]
    runs = {}
    for name, embedder in embedders.items():
        reg = SkillRegistry(None, use_user_dir=False, extra_dirs=[*extra, (str(tmp / "metatool_few"), "mnemo")])
        rep = reg.load()
        eng = SkillEngine(reg, embedder, auto_refresh=False, vector_cache=vector_cache)
        eng.warm()
        for j in range(5):  # warm-up
            eng.activate(paths[j], rows[sample[j]][0])
        runs[name] = {"eng": eng, "emb": embedder, "idx": eng._ensure_index(), "skills": len(rep.skills),
                      "times": [], "no_embed": [], "embed_only": [], "cpu": []}
    for j in range(n_calls):
        q = rows[sample[(j + 5) % len(sample)]][0]
        p = paths[j % len(paths)]
        for r in runs.values():
            eng, idx = r["eng"], r["idx"]
            idx.glob_cache.clear()  # every call matches every glob (no per-path cache) ...
            idx.query_cache.clear()  # ... and embeds its query
            t, c = time.perf_counter(), time.thread_time()
            eng.activate(p, q)
            r["times"].append((time.perf_counter() - t) * 1000)
            r["cpu"].append((time.thread_time() - c) * 1000)  # CPU time of this thread: the cost without waiting
            idx.glob_cache.clear()  # the same call again with the query vector cached: everything but the model
            t = time.perf_counter()
            eng.activate(p, q)
            r["no_embed"].append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            r["emb"].embed([q])
            r["embed_only"].append((time.perf_counter() - t) * 1000)

    def pct(a, q):
        return round(float(np.percentile(np.array(a), q)), 2)

    load = round(os.getloadavg()[0], 2)
    return {name: {"skills_loaded": r["skills"], "calls": n_calls, "p50_ms": pct(r["times"], 50),
                   "p95_ms": pct(r["times"], 95), "max_ms": round(float(max(r["times"])), 2),
                   "p95_ms_without_embedding": pct(r["no_embed"], 95),
                   "p50_ms_without_embedding": pct(r["no_embed"], 50),
                   "p95_ms_embedding_only": pct(r["embed_only"], 95),
                   "p50_ms_embedding_only": pct(r["embed_only"], 50), "cpu_p50_ms": pct(r["cpu"], 50),
                   "cpu_p95_ms": pct(r["cpu"], 95), "load_avg_1m": load, "model_id": r["emb"].model_id}
            for name, r in runs.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    ap.add_argument("--json", action="store_true", help="print only the final JSON object")
    ap.add_argument("--n", type=int, default=3000, help="test queries (default 3000)")
    ap.add_argument("--calls", type=int, default=500, help="timed activations for the latency figure")
    ap.add_argument("--tune", action="store_true", help="evaluate on the disjoint tuning split instead")
    ap.add_argument("--config", default="{}", help="JSON ActivationConfig overrides (tuning)")
    ap.add_argument("--no-latency", action="store_true")
    ap.add_argument("--no-accuracy", action="store_true")
    ap.add_argument("--vector-cache", default=None, help="SQLite file caching skill vectors between runs")
    ap.add_argument("--embedder", default="onnx-int8",
                    help="the skill embedder measured (default onnx-int8, what skill activation uses)")
    ap.add_argument("--compare", default="onnx",
                    help="a second embedder timed in the same run, call by call ('' for none; default onnx)")
    args = ap.parse_args(argv)
    data = Path(args.data)
    from mnemo.core.embedding.embedder import get_embedder

    emb = get_embedder(args.embedder)
    embedders = {args.embedder: emb}
    if args.compare and args.compare != args.embedder:
        embedders[args.compare] = get_embedder(args.compare)
    tools, rows = load_metatool(data)
    test, tune = splits(len(rows), args.n)
    sample = tune if args.tune else test
    cfg = ActivationConfig.from_dict(json.loads(args.config))
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-") as td:
        tmp = Path(td)
        write_tools(tools, tmp / "metatool")
        reg = SkillRegistry(None, use_user_dir=False, extra_dirs=[(str(tmp / "metatool"), "mnemo")])
        rep = reg.load()
        assert len(rep.skills) == len(tools), (len(rep.skills), rep.problems[:3])
        engine = SkillEngine(reg, emb, config=cfg, auto_refresh=False)
        by_name = {s.name: s.id for s in rep.skills}
        t0 = time.perf_counter()
        acc = evaluate(engine, rows, sample[:0] if args.no_accuracy else sample, by_name)
        acc_s = time.perf_counter() - t0
        lats = None if args.no_latency else latency(data, tools, rows, test, tmp, embedders, args.calls,
                                                     args.vector_cache)
    lat = lats[args.embedder] if lats else None
    if args.no_accuracy:
        acc = {k: {"top1": None, "top3": None} for k in acc}
    out = {
        "metatool_top1": acc["mnemo"]["top1"], "metatool_top3": acc["mnemo"]["top3"],
        "bm25_top1": acc["bm25"]["top1"], "bm25_top3": acc["bm25"]["top3"],
        "dense_top1": acc["dense"]["top1"], "dense_top3": acc["dense"]["top3"],
        "dense_plain_top1": acc["dense_plain"]["top1"], "dense_plain_top3": acc["dense_plain"]["top3"],
        "p95_ms_1000_skills": lat["p95_ms"] if lat else None,
        "p50_ms_1000_skills": lat["p50_ms"] if lat else None,
        "p95_ms_without_embedding": lat["p95_ms_without_embedding"] if lat else None,
        "p95_ms_embedding_only": lat["p95_ms_embedding_only"] if lat else None,
        "cpu_p95_ms_1000_skills": lat["cpu_p95_ms"] if lat else None,
        "load_avg_1m": lat["load_avg_1m"] if lat else None,
        "queries": len(sample), "split": "tune" if args.tune else "test", "tools": len(tools),
        "embedder": getattr(emb, "model_id", "?"), "backend": getattr(emb, "backend", type(emb).__name__),
        "latency_by_embedder": lats,
        "machine": f"{platform.machine()} {os.cpu_count()} cpu, Python {platform.python_version()}",
    }
    if not args.json:
        print(f"MetaTool ({len(sample)} queries, {len(tools)} tools as skills, {out['split']} split, {acc_s:.1f} s)")
        for k, v in acc.items():
            if v["top1"] is not None:
                print(f"  {k:6s} top-1 {v['top1']:.3f}  top-3 {v['top3']:.3f}")
        for name, la in (lats or {}).items():
            print(f"Latency [{name}]: {la['skills_loaded']} skills, {la['calls']} calls: p50 {la['p50_ms']} ms, "
                  f"p95 {la['p95_ms']} ms, max {la['max_ms']} ms; without the query embedding p50 "
                  f"{la['p50_ms_without_embedding']} / p95 {la['p95_ms_without_embedding']} ms; the embedding "
                  f"alone p50 {la['p50_ms_embedding_only']} / p95 {la['p95_ms_embedding_only']} ms "
                  f"(load average {la['load_avg_1m']}); CPU time per call p50 {la['cpu_p50_ms']} / "
                  f"p95 {la['cpu_p95_ms']} ms")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
