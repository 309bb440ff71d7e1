"""The in-memory BM25 index: same scores as the reference BM25, kept current through the store's change log."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from mnemo.core.indexes.keyword import PartitionIndex
from mnemo.core.memory.manage import forget, promote
from mnemo.core.memory.write import remember
from mnemo.core.text import BM25, tokenize


def test_partition_scores_match_reference_bm25():
    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(60)]
    docs = [" ".join(rng.choice(vocab) for _ in range(rng.randint(3, 30))) for _ in range(300)]
    idx = PartitionIndex()
    for i, d in enumerate(docs):
        idx.add(f"d{i:03d}", tokenize(d))
    ref = BM25([tokenize(d) for d in docs])
    for _ in range(20):
        q = tokenize(" ".join(rng.choice(vocab) for _ in range(3)))
        got = idx.search(q, 10)
        want = ref.top(q, 10)
        ref_scores = ref.scores(q)
        assert len(got) == len(want)
        for (doc, a), (_, b) in zip(got, want, strict=True):
            assert a == pytest.approx(b, rel=1e-4)  # same score at every rank (float32 vs float64 ties may swap)
            assert a == pytest.approx(ref_scores[int(doc[1:])], rel=1e-4)


def test_removed_documents_leave_results_and_statistics():
    idx = PartitionIndex()
    idx.add("a", tokenize("redis cache eviction"))
    idx.add("b", tokenize("redis queue"))
    idx.add("a", tokenize("postgres replica"))  # re-adding replaces
    assert [i for i, _ in idx.search(tokenize("redis"), 5)] == ["b"]
    idx.remove("b")
    assert idx.search(tokenize("redis"), 5) == []
    assert idx.n_alive == 1 and idx.dead_fraction() == pytest.approx(2 / 3)


def test_store_changes_reach_the_keyword_index(engine, ctx):
    a = remember(engine, ctx, "the payments webhook verifies signatures")["memory"]
    part = f"p-{ctx.project_id}"
    assert [i for i, _ in engine.keywords.search([part], "webhook signatures", 5)] == [a["id"]]
    b = remember(engine, ctx, "webhook retries use exponential backoff")["memory"]
    assert {i for i, _ in engine.keywords.search([part], "webhook", 5)} == {a["id"], b["id"]}
    promote(engine, ctx, a["id"])  # moves to the global partition
    assert [i for i, _ in engine.keywords.search(["g"], "signatures", 5)] == [a["id"]]
    assert [i for i, _ in engine.keywords.search([part], "signatures", 5)] == []
    forget(engine, ctx, b["id"])
    assert engine.keywords.search([part], "backoff", 5) == []
    other = replace(ctx, project_id="elsewhere")
    remember(engine, other, "webhook elsewhere")
    assert engine.keywords.search([part], "webhook", 5) == []  # partitions never mix


def _per_posting_scores(idx: PartitionIndex, tokens: list[str], k: int) -> list[tuple[str, float]]:
    """The search as it was before issue 22's fourth pass: the length term made per posting, the dead slots
    masked per term (the float32 operations the new search must repeat to the bit)."""
    import math

    import numpy as np

    from mnemo.core.indexes.keyword import K1, B

    n = len(idx.ids)
    alive = np.frombuffer(idx.alive, dtype=np.uint8)
    dl = np.frombuffer(idx.doc_len, dtype=np.float32)
    avgdl = idx.total_len / idx.n_alive
    scores = np.zeros(n, dtype=np.float32)
    hit = np.zeros(n, dtype=bool)
    for term in set(tokens):
        plist = idx.postings.get(term)
        if plist is None:
            continue
        docs, tfs = np.frombuffer(plist[0], dtype=np.int32), np.frombuffer(plist[1], dtype=np.float32)
        live = alive[docs] == 1
        df = int(live.sum())
        if not df:
            continue
        idf = math.log(1 + (idx.n_alive - df + 0.5) / (df + 0.5))
        d, tf = docs[live], tfs[live]
        scores[d] += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * dl[d] / avgdl))
        hit[d] = True
    cand = np.flatnonzero(hit)
    top = cand[np.argpartition(-scores[cand], k - 1)[:k]] if len(cand) > k else cand
    return [(idx.ids[i], float(scores[i])) for i in sorted(top.tolist(), key=lambda i: (-scores[i], idx.ids[i]))]


def test_scores_are_the_per_posting_ones_to_the_bit():
    """The length term computed once per state of the partition (and no dead-slot mask when none is dead) gives
    the same float32 scores, in the same order, as the per-posting formula; also after removals and additions."""
    rng = random.Random(7)
    vocab = [f"w{i}" for i in range(80)]
    idx = PartitionIndex()
    for i in range(400):
        idx.add(f"d{i:03d}", tokenize(" ".join(rng.choice(vocab) for _ in range(rng.randint(3, 30)))))
    queries = [tokenize(" ".join(rng.choice(vocab) for _ in range(4))) for _ in range(30)]
    for step in range(3):
        for q in queries:
            assert idx.search(q, 10) == _per_posting_scores(idx, q, 10)
        for i in rng.sample(range(400), 40):  # dead slots (then a state the cached length term must follow)
            idx.remove(f"d{i:03d}")
        idx.add(f"new{step}", tokenize("w1 w2 w3 w1"))
