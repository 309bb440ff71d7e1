"""A `remember_batch` chunk's top lists (core/memory/neighbours.py `_chunk_tops`, issue 22 seventh pass): the
product made in the layout its lists read, the best columns found from each row's edge value. The lists must be
what a plain argpartition of the cosines gives: the same rows, best first, the same cosines."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from mnemo.core.memory.neighbours import _best_columns, _chunk_tops


def test_the_best_columns_are_argpartitions_with_ties_and_nans():
    rng = np.random.default_rng(7)
    neg = rng.standard_normal((6, 500)).astype(np.float32)
    neg[1, :40] = -5.0  # a tie wider than the width: the first columns of it
    neg[2, 10:20] = np.sort(neg[2])[29]  # a tie across the edge
    neg[3, ::2] = np.nan  # fewer numbers than the width
    width = 30
    got = _best_columns(neg, width, np)
    assert got.shape == (6, width)
    for i in range(6):
        row, cols = neg[i], got[i]
        assert list(cols) == sorted(set(cols.tolist()))  # distinct, in column order
        if i == 3:
            assert set(cols.tolist()) == set(np.argpartition(row, width - 1)[:width].tolist())
            continue
        edge = np.sort(row)[width - 1]
        assert (row[cols] <= edge).all() and set(np.flatnonzero(row < edge).tolist()) <= set(cols.tolist())
        if i == 1:
            assert list(cols) == list(range(width))
        if i not in (1, 2):  # no tie: exactly argpartition's columns
            assert set(cols.tolist()) == set(np.argpartition(row, width - 1)[:width].tolist())


def test_the_top_lists_are_the_cosines_best_first():
    rng = np.random.default_rng(11)
    mat = rng.standard_normal((3000, 32)).astype(np.float32)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    q = mat[rng.choice(3000, 5, replace=False)] + 0.05 * rng.standard_normal((5, 32)).astype(np.float32)
    m = SimpleNamespace(parts={"p-a": (0, 1000), "p-b": (1000, 3000)}, mat=mat, trimmed=set())
    tops = _chunk_tops(m, ["p-a", "p-b", "p-none"], q, 50)
    assert set(tops) == {"p-a", "p-b"}
    for part, (a, n, idx, vals) in tops.items():
        assert (a, n) == (m.parts[part][0], m.parts[part][1] - m.parts[part][0])
        sims = q @ mat[a:a + n].T
        for i in range(len(q)):
            want = np.argsort(-sims[i], kind="stable")[:50]
            assert idx[i].tolist() == want.tolist()
            np.testing.assert_allclose(vals[i], sims[i, want], rtol=0, atol=1e-6)
    small = _chunk_tops(m, ["p-a"], q, 5000)  # room past the partition: every row, best first
    assert small["p-a"][2].shape == (5, 1000)
