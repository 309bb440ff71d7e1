"""SIGKILL a process while it rewrites the persisted read side (<home>/cache: the vector file and the keyword
postings), at random moments, then open the store: it must open, and the first answers (dense and keyword, from
the files or without them) must equal what the store itself says (an exact scan, a keyword index built from
SQLite). A file a kill left half-written is never used; an older complete one is used with the changes after it.

Fast (default): 6 kills. Full (MNEMO_FULL=1): 40 kills.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _helpers import FULL, figure, integrity

from mnemo.core.embedding.embedder import HashEmbedder
from mnemo.core.engine import Engine
from mnemo.core.indexes.dense import exact_scores
from mnemo.core.indexes.keyword import KeywordIndex
from mnemo.core.search import dense_search

CHILD = Path(__file__).with_name("_cache_child.py")
PART = "p-git-cache"
QUERIES = ["redis cache replica", "webhook signature retry", "deploy canary rollout", "note 3"]


def kill_child_at_random(home: Path, seed: int, delay: float) -> None:
    env = dict(os.environ, MNEMO_EMBEDDER="hash")
    proc = subprocess.Popen([sys.executable, str(CHILD), str(home), str(seed)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        time.sleep(delay)
        assert proc.poll() is None, proc.stderr.read()
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()


def check_answers(home: Path) -> tuple[bool, bool]:
    """Open the store as a new owner would and compare its first answers with the store's own; returns whether
    the vector file and the keyword file were used."""
    engine = Engine(home, embedder=HashEmbedder(), start_indexer=False)
    try:
        vf = engine.vector_file()
        used_vectors = vf.matrix() is not None and vf.verify()
        saved = KeywordIndex(engine.store, engine.cache_dir)
        built = KeywordIndex(engine.store)
        n = engine.store.count_vectors()
        for q in QUERIES:
            qvec = engine.embed_query(q)
            got = dense_search(engine, [PART, "g"], qvec, n + 10).scores
            want = dict(exact_scores(engine.store, [PART, "g"], qvec))
            assert got.keys() == want.keys(), q
            for item_id, cos in want.items():
                assert got[item_id] == pytest.approx(cos, abs=1e-6)
            assert saved.search([PART], q, 20) == built.search([PART], q, 20), q
        return used_vectors, saved.saved_seq is not None
    finally:
        engine.close()


def test_kill_while_writing_the_cache_leaves_a_store_that_answers_correctly(tmp_path):
    home = tmp_path / "home"
    rng = random.Random(17)
    kills = 40 if FULL else 6
    used = {"vectors": 0, "keywords": 0}
    for k in range(kills):
        kill_child_at_random(home, k, rng.uniform(0.05, 0.8))
        assert integrity(home / "mnemo.db") == "ok"
        v, kw = check_answers(home)
        used["vectors"] += v
        used["keywords"] += kw
    figure("crash_cache", "kills while the cache is rewritten", kills)
    figure("crash_cache", "first answers equal to the store's own", kills)
    figure("crash_cache", "opens that used the vector file / the keyword file", f"{used['vectors']} / {used['keywords']}")
    assert used["vectors"] > 0  # an older complete file is used (with its tail), not thrown away
