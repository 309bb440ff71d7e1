"""Do two trees of Mnemo recall the same cards? The answers of a real owner of each tree on copies of one store.

A store of N synthetic notes is filled (as `bench/recall_latency.py` fills it) and indexed once by an owner of the
first tree; then 20 more notes are added to it behind the owner's back (fixed ids, so ties break alike in every
copy), so the persisted read side lags 20 changes: that tail is scored from SQLite at every query. The store is
copied once per tree and each copy served by an owner started from that tree (`PYTHONPATH=<tree>`) through the real
client. Every tree answers the latency bench's queries at limits 5 and 10 in the hybrid and project scopes, and
(issue 22, fifth pass) with a filter on full rows (kind and tag: half of the 20 notes are tagged decisions), one on
the visibility columns (type) and a floor of the call's own; an answer is its cards in order (item id, score,
confidence; with `--full` every field of every card), its warnings and how many hits the floor hid. Any difference
is printed and the exit code is 1. Speed changes must leave every answer as it was (issue 22, fourth pass):

    python bench/recall_same.py --trees old=/tmp/old/server,new=server --sizes 1000,10000 [--full]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import recall_latency as rl  # noqa: E402

WRITES = [f"same-check note {i}: {t}" for i, t in enumerate(rl.synth_notes(20, seed=5))]


def queries(n: int) -> list[str]:
    """The latency bench's queries (`recall_latency.measure`), in its order."""
    rng = random.Random(1)
    return [f"what does the {rng.choice(rl.COMPONENTS)} {rng.choice(['need', 'use', 'avoid'])} for "
            f"{rng.choice(rl.OBJECTS)}?" for _ in range(n)]


# the calls each query is asked with: the latency bench's, then a filter that reads full rows (`kind`, `tags`), one
# on the visibility columns (`types`), and a floor of the call's own
CALLS = ({"limit": 5, "scope": "hybrid"}, {"limit": 10, "scope": "hybrid"}, {"limit": 5, "scope": "project"},
         {"limit": 5, "scope": "hybrid", "kind": "decision", "tags": ["payments"]},
         {"limit": 5, "scope": "hybrid", "types": ["project"]},
         {"limit": 5, "scope": "hybrid", "min_confidence": 0.3})


def answers(svc, ctx, qs: list[str], full: bool = False) -> list:
    """Per query and call: the cards in order (item id, score, confidence; with `full`, every field of each card),
    the warnings and how many hits the floor hid."""
    out = []
    for q in qs:
        for call in CALLS:
            res = svc.recall(ctx.to_dict(), q, **call)
            cards = res["cards"] if full else [[c["item_id"], c["score"], c["confidence"]] for c in res["cards"]]
            out.append([q, call, cards, res["warnings"], res["hidden_low_confidence"]])
    return out


def worker(home: Path, n_queries: int, full: bool) -> None:
    """In a tree's process: serve `home` with this tree's owner and print its answers as JSON."""
    from mnemo.core.models import Context
    from mnemo.daemon.client import DaemonService

    ctx = Context(project_id="bench-project", project_name="bench", root=None, branch="main", default_branch="main")
    svc = DaemonService(home, client_name="bench")
    svc.connect()
    rl._wait_indexed(svc, ctx)
    tail = svc.stats(ctx.to_dict())["index"]
    out = {"answers": answers(svc, ctx, queries(n_queries), full), "index": tail}
    svc.shutdown()
    rl._wait_stopped(home)
    print(json.dumps(out))


def add_behind(home: Path, embedder, ctx) -> None:
    """The 20 notes of `WRITES`, inserted as the bench's fill inserts (fixed ids), after the owner indexed."""
    import time

    from mnemo.core.models import Memory
    from mnemo.core.store import Store
    from mnemo.core.text import content_hash

    store = Store(home / "mnemo.db")
    vecs = embedder.embed(WRITES)
    now = time.time()
    with store.write() as c:
        for i, text in enumerate(WRITES):
            # every other one a tagged decision with provenance: the filters below and the cards' JSON fields
            m = Memory(id=f"mem-same-check-{i:02d}", text=text, type="project", kind="decision" if i % 2 else "fact",
                       scope="project", project_id=ctx.project_id, project_name=ctx.project_name, branch=ctx.branch,
                       importance=0.5, confirmations=1, created_at=now, updated_at=now, last_accessed=now,
                       access_count=0, content_hash=content_hash(text), source="import", author="bench",
                       tags=["payments", f"t{i}"] if i % 2 else [],
                       provenance={"imported_from": "bench"} if i % 2 else {})
            store.insert_memory(c, m, vecs[i], embedder.model_id)
    store.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", required=True, help="name=path of the tree's `server` directory, comma-separated")
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--full", action="store_true", help="compare every field of every card, not only the ranking")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(Path(args.worker), args.queries, args.full)
        return 0
    from mnemo.core.embedding.embedder import get_embedder
    from mnemo.core.models import Context

    trees = dict(t.split("=", 1) for t in args.trees.split(","))
    ctx = Context(project_id="bench-project", project_name="bench", root=None, branch="main", default_branch="main")
    embedder = get_embedder()
    failed = False
    for n in (int(s) for s in args.sizes.split(",")):
        base = Path(tempfile.mkdtemp(prefix=f"mnemo-same-{n}-"))
        rl.fill_store(base / "store", n, embedder, ctx)
        first = Path(next(iter(trees.values()))).resolve()
        subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[2]); import recall_latency as rl;"
                        " from pathlib import Path; from mnemo.core.models import Context;"
                        " from mnemo.daemon.client import DaemonService; h = Path(sys.argv[1]);"
                        " c = Context(project_id='bench-project', project_name='bench', root=None, branch='main',"
                        " default_branch='main'); s = DaemonService(h, client_name='bench'); s.connect();"
                        " rl._wait_indexed(s, c); s.shutdown(); rl._wait_stopped(h)",
                        str(base / "store"), str(Path(__file__).resolve().parent)],
                       env={**os.environ, "PYTHONPATH": str(first)}, check=True)
        add_behind(base / "store", embedder, ctx)
        got = {}
        for name, tree in trees.items():
            home = base / name
            shutil.copytree(base / "store", home)
            env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve()), "MNEMO_HOME": str(home)}
            proc = subprocess.run([sys.executable, __file__, "--worker", str(home), "--queries", str(args.queries),
                                   "--trees", args.trees, *(["--full"] if args.full else [])], env=env,
                                  capture_output=True, text=True, check=False)
            if proc.returncode:
                print(proc.stderr, file=sys.stderr)
                return 2
            got[name] = json.loads(proc.stdout)
        names = list(got)
        a = got[names[0]]["answers"]
        for name in names[1:]:
            b = got[name]["answers"]
            diff = [(x, y) for x, y in zip(a, b, strict=True) if x != y]
            shown = [sum(len(x[2]) for x in a if x[1] == call) for call in CALLS]
            print(f"{n} notes (+{len(WRITES)} behind the index): {len(a) - len(diff)} / {len(a)} answers identical "
                  f"({names[0]} vs {name}); cards per call {shown}; index: {got[name]['index']}")
            for x, y in diff[:5]:
                print(f"  {x[0]!r} {x[1]}:\n    {names[0]}: {x[2:]}\n    {name}: {y[2:]}")
            failed = failed or bool(diff)
        shutil.rmtree(base, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
