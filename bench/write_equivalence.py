"""The write path's decisions, old against new: the same texts into a store of 3,000 synthetic notes with the same
ids (uuid4 seeded), then everything a write decides dumped as JSON (each result's status, id, conflicts and
same-claim; every memory row, review row and vector row, times left out). Run it under each tree and compare:

    PYTHONPATH=<old tree>/server python bench/write_equivalence.py /tmp/old.json
    PYTHONPATH=<new tree>/server python bench/write_equivalence.py /tmp/new.json
    cmp /tmp/old.json /tmp/new.json

The texts: the first 500 pairs of bench/data/conflict_pairs.jsonl remembered one after the other (old, then new;
`on_conflict` keep_both / review / supersede in turn), 150 synthetic notes, and 800 texts of the next 400 pairs
plus two refused items in one `remember_batch`. Uses the real embedder (int8 MiniLM by default)."""

import json
import random
import sqlite3
import sys
import time
import uuid
from pathlib import Path

from scratch import scratch_dir  # bench/ is on sys.path when run as a script

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
rnd = random.Random(1234)
uuid.uuid4 = lambda: uuid.UUID(int=rnd.getrandbits(128), version=4)  # the same ids in both runs

import recall_latency as rl  # noqa: E402
from mnemo.core.embedding.embedder import get_embedder  # noqa: E402
from mnemo.core.engine import Engine  # noqa: E402
from mnemo.core.memory import write  # noqa: E402
from mnemo.core.models import Context  # noqa: E402

emb = get_embedder()
ctx = Context(project_id="bench-project", project_name="bench", root=None, branch="main", default_branch="main")
home = scratch_dir("mnemo-eq-")
rl.fill_store(home, 3000, emb, ctx)
eng = Engine(home, emb)
while not (eng.index is not None and eng.index.ready):
    time.sleep(0.1)
pairs = [json.loads(line) for line in open(HERE / "data" / "conflict_pairs.jsonl")]
results = []
modes = ["keep_both", "review", "supersede"]
for i, p in enumerate(pairs[:500]):
    for t in (p["old"], p["new"]):
        r = write.remember(eng, ctx, t, on_conflict=modes[i % 3])
        results.append([r["status"], r["memory"]["id"], [c["id"] for c in r["conflicts"]],
                        [(c["relation"], c["level"], c["reasons"]) for c in r["conflicts"]], r.get("same_as")])
for t in rl.synth_notes(150, seed=5):
    r = write.remember(eng, ctx, "note: " + t, on_conflict="keep_both")
    results.append([r["status"], r["memory"]["id"], [c["id"] for c in r["conflicts"]], r.get("same_as")])
items = [{"text": t} for p in pairs[500:900] for t in (p["old"], p["new"])] + [{"text": ""}, {"text": 5}]
b = write.remember_batch(eng, ctx, items, source="import", on_conflict="keep_both")
results.append(b)
eng.close()
db = sqlite3.connect(home / "mnemo.db")
db.row_factory = sqlite3.Row
def rows(sql, drop=()):
    return [{k: r[k] for k in r.keys() if k not in drop} for r in db.execute(sql)]
T = ("created_at", "updated_at", "last_accessed", "at", "replaced_at", "resolved_at", "decided_at")
out = {"results": results,
       "memories": rows("SELECT * FROM memories ORDER BY id", T),
       "review": rows("SELECT * FROM review ORDER BY id", T + ("id",)),
       "vectors": [(r[0], r[1], r[2]) for r in db.execute("SELECT item_id, part, model_id FROM vectors ORDER BY item_id")]}
def clean(o):
    if isinstance(o, dict):
        return {k: clean(v) for k, v in o.items() if k not in T and k not in ("created_at", "updated_at", "last_accessed")}
    if isinstance(o, list):
        return [clean(x) for x in o]
    return o
out = clean(out)
# payloads hold JSON with times: parse and drop them
for r in out["review"]:
    for k, v in list(r.items()):
        if isinstance(v, str) and v.startswith("{"):
            try:
                r[k] = clean(json.loads(v))
            except ValueError:
                pass
json.dump(out, open(sys.argv[1], "w"), indent=0, sort_keys=True, default=str)
print({k: len(v) for k, v in out.items()})
