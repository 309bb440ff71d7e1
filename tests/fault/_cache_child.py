"""Rewrite a store's persisted read side (<home>/cache) in a loop, with notes written in between, until killed
(for test_crash_cache.py).

    python _cache_child.py HOME SEED

Prints `ready` once the loop runs; the parent SIGKILLs it at a random moment, so kills land inside a write of the
vector file, of the keyword file, between their renames, or inside a SQLite commit.
"""

import random
import sys
from pathlib import Path

from mnemo.core.embedding.embedder import HashEmbedder
from mnemo.core.engine import Engine
from mnemo.core.memory.write import remember
from mnemo.core.models import Context

CTX = Context(project_id="git-cache", project_name="cache", root=None, branch="main", default_branch="main")
WORDS = ["redis", "cache", "postgres", "replica", "retry", "backoff", "webhook", "signature", "deploy", "canary",
         "token", "expiry", "queue", "worker", "schema", "migration", "flag", "rollout", "metric", "alert"]


def main() -> None:
    home, seed = Path(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    engine = Engine(home, embedder=HashEmbedder(), start_indexer=False)
    print("ready", flush=True)
    i = 0
    while True:
        for _ in range(rng.randint(0, 3)):
            text = " ".join(rng.sample(WORDS, 5)) + f" note {seed}-{i}"
            remember(engine, CTX, text, on_conflict="keep_both")
            i += 1
        engine.vector_file().write()
        engine.keywords.save()


if __name__ == "__main__":
    main()
