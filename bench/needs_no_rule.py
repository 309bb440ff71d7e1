"""The context block's "this request needs no rule" gate (core/agent/context_block.py, `needs_no_rule`) on
requests nobody on the team wrote: MetaTool's awareness set (../shared/data/metatool/awareness.jsonl, README
there), its own `split` field (tune / test, 260 + 260 each; the split the activation was fitted on), the
activation chatter set (bench/data/activation_chatter.jsonl, its tune / test halves) as further negatives, and the
activation dev set (bench/data/activation_dev.jsonl: requests written from real rules, each in a repository
holding its whole corpus and the starter skills, as bench/skill_openset.py runs it; tune / test) for the cost on
real coding requests: every expected skill the activation chose must stay.

    python bench/needs_no_rule.py --data ../shared/data --json     # ~1 min; last line: one JSON object

The 199 tools are the skills of a project (as bench/skill_openset.py lays them out); each request goes through
`SkillEngine.activate(None, query)` as shipped, then the gate as the block applies it (each rule's sections
embedded as the block embeds them, `SkillEngine.conversation_score`). Per split and margin:
- `neg_quiet`: negatives (no tool needed) with nothing activated after the gate (before: the activation alone);
- `pos_kept`: expected skills (a positive's tool) that were activated and are still there after the gate (the
  cost: 1.0 means none lost);
- `pos_hit3`: positives whose expected skills are all among the first 3 left (the dev set: the first of each group).
Margin 0.0 is the activation alone (the gate off); the gate's chat floor (`CHAT_MIN`) is as shipped.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

CHATTER = Path(__file__).resolve().parent / "data" / "activation_chatter.jsonl"
MARGINS = (0.05, 0.1, 0.15, 0.2, 0.25)


def best_section(eng, act, query: str) -> float | None:
    """The best cosine between the request and the rule's sections, as the block computes it."""
    import numpy as np

    from mnemo.core.skills.sections import section_view, split_sections

    secs = split_sections(act.body or "")
    if not secs:
        return None
    qv = eng.message_vector(query)
    sv = eng.text_vectors([section_view(act.name, s) for s in secs])
    return float(np.max(np.asarray(sv) @ np.asarray(qv)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    ap.add_argument("--json", action="store_true", help="print only the final JSON object")
    ap.add_argument("--no-dev", action="store_true", help="MetaTool and chatter only (skip the activation dev set)")
    ap.add_argument("--vector-cache", default=str(Path(tempfile.gettempdir()) / "mnemo-bench-skill-vectors.sqlite"))
    args = ap.parse_args(argv)
    from mnemo.core.agent.context_block import CHAT_MARGIN, needs_no_rule
    from mnemo.core.embedding.embedder import get_embedder
    from skill_data import build_universes, dev_cases, load_dev, metatool_universe

    data = Path(args.data)
    emb = get_embedder("onnx-int8")
    rows_out: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="mnemo-nnr-") as td:
        u, rows = metatool_universe(data, Path(td), emb, str(Path(td) / "vectors.sqlite"))
        eng = u.engine
        chatter = [json.loads(x) for x in open(CHATTER, encoding="utf-8") if x.strip()]
        cases = [(r["split"], r["query"], r["tool"] if r["label"] == "positive" else None, "awareness")
                 for r in rows] + [(r["split"], r["request"], None, "chatter") for r in chatter]
        runs = [(eng, None, split, query, tool, source) for split, query, tool, source in cases]
        if not args.no_dev:
            universes = build_universes(data, Path(td), emb, args.vector_cache)
            for c in dev_cases(load_dev(), universes):
                u = universes[c.universe]
                names = {i: s.name for s, i in ((s, u.pos_by_id[s.id]) for s in u.engine.skills())}
                want = [names[g[0]] for g in c.groups] or None
                runs.append((u.engine, c.file, c.split, c.message, want, "dev"))
        for e, file, split, query, tool, source in runs:
            res = e.activate(file, query)
            acts = [a for a in res.activations if not a.always]
            conv = e.conversation_score(query)
            rows_out.append({"split": split, "source": source, "tool": tool, "names": [a.name for a in acts],
                             "gates": {m: [needs_no_rule(a, best_section(e, a, query), conv, m) for a in acts]
                                       for m in (0.0, *MARGINS)}})
    out: dict = {"shipped_margin": CHAT_MARGIN}
    for split in ("tune", "test"):
        for source in ("awareness", "chatter", "dev"):
            sub = [r for r in rows_out if r["split"] == split and r["source"] == source]
            pos = [r for r in sub if r["tool"]]
            for r in pos:   # a dev case: every expected skill (the first of each group) must stay
                r["tool"] = r["tool"] if isinstance(r["tool"], list) else [r["tool"]]
            neg = [r for r in sub if not r["tool"]]
            res_split: dict = {"n_pos": len(pos), "n_neg": len(neg)}
            for m in (0.0, *MARGINS):
                def left(r: dict, m: float = m) -> list[str]:
                    return [n for n, g in zip(r["names"], r["gates"][m], strict=True) if not g]
                had = [(r, t) for r in pos for t in r["tool"] if t in r["names"]]
                res_split[str(m)] = {
                    "neg_quiet": round(sum(not left(r) for r in neg) / len(neg), 4) if neg else None,
                    "pos_kept": round(sum(t in left(r) for r, t in had) / len(had), 4) if had else None,
                    "pos_hit3": round(sum(all(t in left(r)[:3] for t in r["tool"]) for r in pos) / len(pos), 4)
                    if pos else None}
            out[f"{source}_{split}"] = res_split
    if not args.json:
        for k, v in out.items():
            print(k, v)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
