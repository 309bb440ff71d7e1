"""Do two trees of Mnemo recall the same cards? The answers of a real owner of each tree on copies of one store.

A store of N synthetic notes is filled once (as `bench/recall_latency.py` fills it), copied once per tree, and each
copy is served by an owner started from that tree (`PYTHONPATH=<tree>`) through the real client. Every tree answers
the same recalls: the latency bench's queries at limits 5 and 10 in the hybrid and project scopes, then, after 20
remembers (the same texts for every tree), the same recalls again at once (the owner has not replayed those writes:
the unreplayed tail is scored from SQLite) and once the index has caught up. An answer is its cards in order: item
id (a remembered note's text instead: its id is random), score and confidence. Any difference is printed and the
exit code is 1. Speed changes must leave every answer as it was (issue 22, fourth pass):

    python bench/recall_same.py --trees old=/tmp/old/server,new=server --sizes 1000,10000
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


def answers(svc, ctx, qs: list[str], known: set[str]) -> list:
    out = []
    for q in qs:
        for limit, scope in ((5, "hybrid"), (10, "hybrid"), (5, "project")):
            res = svc.recall(ctx.to_dict(), q, limit=limit, scope=scope)
            out.append([q, limit, scope, [[c["item_id"] if c["item_id"] in known else "new: " + c["compressed_summary"],
                                           c["score"], c["confidence"]] for c in res["cards"]]])
    return out


def worker(home: Path, n_queries: int) -> None:
    """In a tree's process: serve `home` with this tree's owner and print its answers as JSON."""
    from mnemo.core.models import Context
    from mnemo.core.store import Store
    from mnemo.daemon.client import DaemonService

    ctx = Context(project_id="bench-project", project_name="bench", root=None, branch="main", default_branch="main")
    store = Store(home / "mnemo.db")
    known = {m.id for m in store.query_memories()}
    store.close()
    qs = queries(n_queries)
    svc = DaemonService(home, client_name="bench")
    svc.connect()
    rl._wait_indexed(svc, ctx)
    out = {"indexed": answers(svc, ctx, qs, known)}
    for text in WRITES:
        svc.remember(ctx.to_dict(), text, on_conflict="keep_both")
    out["tail"] = answers(svc, ctx, qs[:30], known)
    rl._wait_indexed(svc, ctx)
    out["replayed"] = answers(svc, ctx, qs[:30], known)
    svc.shutdown()
    rl._wait_stopped(home)
    print(json.dumps(out))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", required=True, help="name=path of the tree's `server` directory, comma-separated")
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(Path(args.worker), args.queries)
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
        got = {}
        for name, tree in trees.items():
            home = base / name
            shutil.copytree(base / "store", home)
            env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve()), "MNEMO_HOME": str(home)}
            proc = subprocess.run([sys.executable, __file__, "--worker", str(home), "--queries", str(args.queries),
                                   "--trees", args.trees], env=env, capture_output=True, text=True, check=False)
            if proc.returncode:
                print(proc.stderr, file=sys.stderr)
                return 2
            got[name] = json.loads(proc.stdout)
        names = list(got)
        first = got[names[0]]
        for name in names[1:]:
            for phase in first:
                diff = [(a, b) for a, b in zip(first[phase], got[name][phase], strict=True) if a != b]
                total = len(first[phase])
                print(f"{n} notes, {phase}: {total - len(diff)} / {total} answers identical ({names[0]} vs {name})")
                for a, b in diff[:5]:
                    print(f"  {a[0]!r} limit {a[1]} {a[2]}:\n    {names[0]}: {a[3]}\n    {name}: {b[3]}")
                failed = failed or bool(diff)
        shutil.rmtree(base, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
