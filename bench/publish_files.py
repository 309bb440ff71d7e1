"""`mnemo publish` of a store into every agent target (core/sharing/publish.py), in process: how long the first
publish, an unchanged second one, a dry run and a hand-edit sync take for N memories (a third of them anchored to
one of 20 folders), and whether the second publish wrote nothing. Publishing embeds nothing (the store's vectors
are not used; the hash embedder only fills the store), so no model is loaded; the secret scan of every published
text is included.

    PYTHONPATH=server python bench/publish_files.py --n 300

Prints one JSON line: n, files, published, first_s, again_s, dry_run_s, sync_s (one edited line read back and
rewritten), again_written (must be 0)."""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import tempfile
import time
from pathlib import Path

from mnemo.core.embedding.embedder import get_embedder
from mnemo.core.engine import Engine
from mnemo.core.identity import detect_context
from mnemo.core.models import Memory
from mnemo.core.sharing.publish import publish
from mnemo.core.text import content_hash

WORDS = ("retry payments idempotency key gateway refund ledger cron staging deploy vpn cache token queue worker "
         "schema migration index latency timeout backoff circuit breaker webhook invoice tax").split()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    args = ap.parse_args()
    rng = random.Random(7)
    emb = get_embedder("hash")
    with tempfile.TemporaryDirectory() as d:
        root = Path(d) / "repo"
        root.mkdir()
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        (root / "CLAUDE.md").write_text("# Ours\n\nKeep functions short.\n")
        ctx = detect_context(root)
        engine = Engine(Path(d) / "home", embedder=emb, lock=False, start_indexer=False)
        mems = []
        for i in range(args.n):
            text = f"Rule {i}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30))) + "."
            t = 1_700_000_000.0 + i * 3600
            mems.append(Memory(
                id=f"mem-{i:020d}", text=text, type=rng.choice(["feedback", "project"]),
                kind=rng.choice(["decision", "pattern", "lesson"]), scope="project", project_id=ctx.project_id,
                project_name=ctx.project_name, branch=None, importance=rng.random(), confirmations=rng.randint(1, 4),
                created_at=t, updated_at=t, last_accessed=t, access_count=0, content_hash=content_hash(text),
                source="user", anchors=[{"path": f"src/m{i % 20}/x.py"}] if i % 3 == 0 else []))
        vecs = emb.embed([m.text for m in mems])
        with engine.store.write() as c:
            for m, v in zip(mems, vecs, strict=True):
                engine.store.insert_memory(c, m, v, emb.model_id)
        t0 = time.perf_counter()
        first = publish(engine, ctx, ["all"])
        t1 = time.perf_counter()
        again = publish(engine, ctx)
        t2 = time.perf_counter()
        publish(engine, ctx, dry_run=True)
        t3 = time.perf_counter()
        agents = root / "AGENTS.md"
        line = next(ln for ln in agents.read_text().split("\n") if "<!-- mnemo:" in ln and ln.startswith("- "))
        agents.write_text(agents.read_text().replace(line, line.replace("Rule", "Rule (edited)", 1)))
        t4 = time.perf_counter()
        synced = publish(engine, ctx, sync=True)
        t5 = time.perf_counter()
        engine.close()
        print(json.dumps({"n": args.n, "files": len(first["files"]), "published": first["published"],
                          "first_s": round(t1 - t0, 3), "again_s": round(t2 - t1, 3), "dry_run_s": round(t3 - t2, 3),
                          "sync_s": round(t5 - t4, 3), "sync_edited": len(synced["sync"]["edited"]),
                          "again_written": len(again["written"])}))


if __name__ == "__main__":
    main()
