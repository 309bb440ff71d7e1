"""Markdown export / import of a store (`mnemo export --format md`, `mnemo import`): how long each takes for N
memories, in process, with the real MiniLM model (the import into a fresh store embeds every text again).

    PYTHONPATH=server HF_HUB_OFFLINE=1 python bench/markdown_roundtrip.py --n 1000

Prints one JSON line: n, export_s, import_fresh_s (restores every id: the second store's change log names them, as
after a repair that lost them; an id a store never held would be a new memory with a new id), reimport_s (same
store: all unchanged), bytes, and whether the second export is identical to the first."""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path

from mnemo.core.embedding.embedder import get_embedder
from mnemo.core.engine import Engine
from mnemo.core.models import Context, Memory
from mnemo.core.sharing.markdown_files import export_markdown, import_markdown
from mnemo.core.text import content_hash

CTX = Context(project_id="git-bench-md", project_name="bench", root=None, branch="main", default_branch="main")
WORDS = ("retry payments idempotency key gateway refund ledger cron staging deploy vpn cache token queue worker "
         "schema migration index latency timeout backoff circuit breaker webhook invoice tax").split()


def memories(n: int, rng: random.Random) -> list[Memory]:
    out = []
    for i in range(n):
        text = f"note {i}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40)))
        t = 1_700_000_000.0 + i * 3600
        out.append(Memory(id=f"mem-{i:020d}", text=text, type=rng.choice(["project", "reference", "user"]),
                          kind=rng.choice(["fact", "decision", "lesson"]), scope="project",
                          project_id=CTX.project_id, project_name="bench", branch=None, importance=0.5,
                          confirmations=1, created_at=t, updated_at=t, last_accessed=t, access_count=0,
                          content_hash=content_hash(text), source="user", tags=rng.sample(WORDS, 2),
                          anchors=[{"path": f"src/m{i % 50}.py", "symbol": f"f{i}", "start_line": 1,
                                    "end_line": 9, "hash": "0" * 64}] if i % 3 == 0 else []))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    args = ap.parse_args()
    emb = get_embedder()
    with tempfile.TemporaryDirectory() as d:
        a = Engine(Path(d) / "a", embedder=emb, lock=False, start_indexer=False)
        b = Engine(Path(d) / "b", embedder=emb, lock=False, start_indexer=False)
        mems = memories(args.n, random.Random(7))
        vecs = emb.embed([m.text for m in mems])
        with a.store.write() as c:
            for m, v in zip(mems, vecs, strict=True):
                a.store.insert_memory(c, m, v, emb.model_id)
        with b.store.write() as c:  # b held these ids once (a repair lost them): the import restores them
            for m in mems:
                b.store.log_change(c, m.id, f"p-{m.project_id}", "delete")
        t0 = time.perf_counter()
        export_markdown(a, CTX, f"{d}/one")
        t1 = time.perf_counter()
        fresh = import_markdown(b, CTX, f"{d}/one")
        t2 = time.perf_counter()
        again = import_markdown(a, CTX, f"{d}/one")
        t3 = time.perf_counter()
        export_markdown(b, CTX, f"{d}/two")
        same = all((Path(d, "one", f).read_text() == Path(d, "two", f).read_text())
                   for f in os.listdir(f"{d}/one"))
        size = sum(p.stat().st_size for p in Path(d, "one").glob("*.md"))
        print(json.dumps({"n": args.n, "export_s": round(t1 - t0, 3), "import_fresh_s": round(t2 - t1, 3),
                          "restored": len(fresh["restored"]), "reimport_s": round(t3 - t2, 3),
                          "unchanged": again["unchanged"], "bytes": size, "identical": same,
                          "model": emb.model_id, "load": os.getloadavg()[0]}))
        a.close()
        b.close()


if __name__ == "__main__":
    main()
