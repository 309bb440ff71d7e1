"""The compact exact scan of large partitions (core/indexes/compact.py, issue 22 third pass): int8 rows scored by
onnxruntime, the candidates within the quantization's error bound re-scored in float32. Its top k must be the
float32 exact scan's, on real MiniLM vectors, directly and through the vector file an owner searches."""

from __future__ import annotations

import json
import time
import uuid

import numpy as np
import pytest

from conftest import shared_data
from mnemo.core.indexes import compact
from mnemo.core.indexes.dense import cosines
from mnemo.core.indexes.vector_file import VectorFile
from mnemo.core.models import Memory
from mnemo.core.store import Store
from mnemo.core.text import content_hash


@pytest.fixture(scope="module")
def locomo(real_embedder):
    """(texts, their vectors, query vectors): LoCoMo's dialogue turns and questions, embedded by the real model."""
    turns = [json.loads(line)["text"] for line in shared_data("locomo", "locomo_turns.jsonl").open()]
    questions = [json.loads(line)["question"] for line in shared_data("locomo", "locomo_queries.jsonl").open()]
    texts = list(dict.fromkeys(t for t in turns if t.strip()))[:1500]
    vecs = np.asarray(real_embedder.embed(texts), dtype=np.float32)
    queries = np.asarray(real_embedder.embed(questions[::12][:60]), dtype=np.float32)
    return texts, vecs, queries


def test_model_bytes_are_a_valid_onnx_model_and_score_exactly(tmp_path):
    """The hand-written protobuf is a valid ONNX model (checked by the onnx package, with its external weights
    written beside it as a file), and the session computes the exact integer product of the quantized query and
    the int8 rows given to it in memory."""
    import onnx

    (tmp_path / "model.onnx").write_bytes(compact.matmul_integer_model(4, 3))
    (tmp_path / "in-memory").write_bytes(bytes(12))
    onnx.checker.check_model(str(tmp_path / "model.onnx"), full_check=True)
    model = onnx.load(str(tmp_path / "model.onnx"), load_external_data=False)
    assert [n.op_type for n in model.graph.node] == ["MatMulInteger"]
    w = model.graph.initializer[0]
    assert (w.name, list(w.dims), w.data_location) == ("W", [4, 3], onnx.TensorProto.EXTERNAL)
    rng = np.random.default_rng(3)
    rows = rng.normal(size=(3000, 4)).astype(np.float32)
    scan = compact.build(lambda a, b: rows[a:b], 0, len(rows), 4, chunk=700)
    q8, s = compact.quantize(rows)
    assert np.array_equal(scan._weights, q8.T) and np.array_equal(scan.scales, s)
    top = scan.levels  # the query bytes this CPU's kernel multiplies exactly (`query_levels`)
    qq = np.array([[7, 0, top, 130 * top // 255]], dtype=np.uint8)
    zero = np.array(128 * top // 255, dtype=np.uint8)
    y = scan._session.run(None, {"q": qq, "z": zero})[0][0]
    assert np.array_equal(y, ((qq.astype(np.int64) - int(zero)) @ q8.T.astype(np.int64))[0])


def test_the_query_is_quantized_to_levels_the_kernel_multiplies_exactly():
    """On a CPU whose integer kernel saturates pairs of products (AVX2 without VNNI: `vpmaddubsw`), a query byte of
    255 against two weights of 127 is clipped; the probe sees that and the query gets 127 levels, which no pair can
    overflow. Either way the chosen levels are exact on the worst case, and a query quantized at them scores every
    row exactly on rows built to saturate (every weight +/-127)."""
    dim = 384
    levels = compact.query_levels(dim)
    assert levels in (255, 127)
    assert compact.exact_at(levels, dim)
    assert compact.exact_at(255, dim) == (levels == 255)  # 127 only where 255 is not exact
    rng = np.random.default_rng(5)
    rows = np.where(rng.random((3000, dim)) < 0.5, 1.0, -1.0).astype(np.float32)  # int8 rows of +/-127
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    scan = compact.build(lambda a, b: rows[a:b], 0, len(rows), dim)
    assert scan.levels == levels
    for _ in range(5):
        q = np.abs(rng.normal(size=dim)).astype(np.float32)  # every byte of the query high: the saturating case
        q /= np.linalg.norm(q)
        scores, bound = scan.approx(q)
        assert np.abs(scores - rows @ q).max() <= bound
        top = scan.candidates(q, 10)
        want = np.argsort(-(rows @ q), kind="stable")[:10]
        assert set(want.tolist()) <= set(top.tolist())


def test_top_k_equals_the_float32_exact_scan_on_real_vectors(locomo):
    _texts, vecs, queries = locomo
    scan = compact.build(lambda a, b: vecs[a:b], 0, len(vecs), vecs.shape[1], chunk=1000)
    for q in queries:
        exact = vecs @ q
        scores, bound = scan.approx(q)
        assert np.abs(scores - exact).max() <= bound  # the bound holds for every row
        for k in (5, 50, 200):
            rows = scan.candidates(q, k)
            assert len(rows) < len(vecs) // 2  # a filter, not the whole partition
            top = rows[np.argsort(-(vecs[rows] @ q), kind="stable")[:k]]
            want = np.argsort(-exact, kind="stable")[:k]
            assert set(top.tolist()) == set(want.tolist())


def test_each_candidate_held_to_its_own_bound(locomo):
    """Of the rows within twice the largest row's bound of the k-th best, the candidates keep those whose own bound
    (their scale and L1 norm) can still reach the float32 top k: on real vectors, with a write's changed rows masked
    and without, every row's own bound holds, the candidates are fewer, in row order, and hold the top k."""
    _texts, vecs, queries = locomo
    scan = compact.build(lambda a, b: vecs[a:b], 0, len(vecs), vecs.shape[1], chunk=1000)
    rng = np.random.default_rng(23)
    fewer = wide_total = 0
    for i, q in enumerate(queries[:30]):
        scores, bound, half_l1, q_err = scan._approx(q)
        own = scan.scales * half_l1 + scan.row_l1 * q_err + compact.SLACK
        exact = vecs @ q
        assert (np.abs(scores - exact) <= own).all() and (own <= bound + 1e-9).all()
        masked = rng.choice(len(vecs), 200, replace=False) if i % 2 else None
        if masked is not None:
            scores[masked] = exact[masked] = -np.inf
        for k in (1, 10, 40, 200):
            got = scan.candidates(q, k, masked)
            wide = np.flatnonzero(scores >= compact.kth_best(scores, k) - 2 * bound)
            assert set(got.tolist()) <= set(wide.tolist()) and (np.diff(got) > 0).all()
            assert set(np.argsort(-exact, kind="stable")[:k].tolist()) <= set(got.tolist())
            fewer += len(wide) - len(got)
            wide_total += len(wide)
    assert fewer > wide_total // 10  # the own bounds leave out a good part of the rows


def test_kth_best_is_the_partitions_kth(locomo):
    """`kth_best` (the floor from every 16th score, then a partition of the scores above it) is the k-th largest
    `np.partition` finds, to the bit: on real approximate scores, with rows masked to -inf (a write's changed
    rows), with ties, and on sizes where the sample cannot hold k (then it partitions them all)."""
    _texts, vecs, queries = locomo
    scan = compact.build(lambda a, b: vecs[a:b], 0, len(vecs), vecs.shape[1], chunk=1000)
    rng = np.random.default_rng(11)
    cases = []
    for q in queries[:20]:
        scores, _bound = scan.approx(q)
        cases.append(scores)
        masked = scores.copy()
        masked[rng.choice(len(masked), 300, replace=False)] = -np.inf
        cases.append(masked)
    cases.append(np.round(rng.standard_normal(5000), 1).astype(np.float32))  # many ties
    cases.append(np.full(3000, 0.25, dtype=np.float32))
    cases.append(rng.standard_normal(50).astype(np.float32))
    for scores in cases:
        n = len(scores)
        for k in (1, 2, 5, 40, 41, 90, n // 2, n):
            if 1 <= k <= n:
                assert compact.kth_best(scores, k) == float(np.partition(scores, n - k)[n - k])


def _store_with(home, texts, vecs, model_id: str) -> Store:
    store = Store(home / "mnemo.db")
    now = time.time()
    with store.write() as c:
        for i, (t, v) in enumerate(zip(texts, vecs, strict=True)):
            m = Memory(id="mem-" + uuid.uuid4().hex[:20], text=t, type="project", kind="fact", scope="project",
                       project_id="p1", project_name="p1", branch="main", importance=0.5, confirmations=1,
                       created_at=now - i, updated_at=now - i, last_accessed=now - i, access_count=0,
                       content_hash=content_hash(t), source="import", author="test")
            store.insert_memory(c, m, v, model_id)
    return store


@pytest.mark.parametrize("trim_rows", [1000, 20000], ids=["sparse-two-threads", "mapped-one-thread"])
def test_vector_file_search_through_the_compact_scan_is_the_exact_one(home, locomo, real_embedder, monkeypatch,
                                                                     trim_rows):
    """Through the vector file an owner searches: once `ensure_compact` gave the partition its int8 copy, every
    search returns the same items with the same float32 cosines as the float32 scan of the mapped matrix, and
    items changed after the file are still left to the caller's exact tail; whether the candidates are re-scored
    from rows read through `SparseRows` (a partition of `TRIM_ROWS` or more) or gathered from the mapping (a
    smaller one), and whether the int8 product runs on two threads (`PARALLEL_ROWS`) or one."""
    texts, vecs, queries = locomo
    monkeypatch.setattr(compact, "MIN_ROWS", 1000)
    monkeypatch.setattr(compact, "TRIM_ROWS", trim_rows)
    monkeypatch.setattr(compact, "PARALLEL_ROWS", trim_rows)
    store = _store_with(home, texts, vecs, real_embedder.model_id)
    try:
        vf = VectorFile(home / "cache", store, real_embedder.model_id)
        vf.write()
        m = vf.matrix()
        assert vf.ensure_compact() == 1 and set(m.compact) == {"p-p1"}
        assert vf.ensure_compact() == 0  # built once per file
        assert m.trimmed == ({"p-p1"} if trim_rows <= len(texts) else set())
        ids = [m.ids[i] for i in range(0, m.count, 37)]
        for q in queries[:5]:  # the keyword-only hits' cosines: the rows' own, by either read
            got_scores, rest = vf.scores_for(["p-p1"], q, ids)
            assert not rest and got_scores == {i: float(v) for i, v in zip(
                ids, cosines(np.array(m.read(0, m.count))[list(range(0, m.count, 37))], q).tolist(), strict=True)}
        for q in queries[:30]:
            for k in (5, 50):
                got, tail = vf.search(["p-p1", "g"], q, k)
                scan = m.compact.pop("p-p1")
                try:
                    want, _ = vf.search(["p-p1", "g"], q, k)
                finally:
                    m.compact["p-p1"] = scan
                assert not tail and got == want and len(got) == k  # the same items, the same cosines to the bit
        # a change after the file: the changed item is not answered from the file (the caller scores it exactly)
        row = m.parts["p-p1"][0] + 7
        victim, victim_vec = m.ids[row], np.array(m.read(row, row + 1)[0])
        with store.write() as c:
            store.delete_item(c, victim)
        got, tail = vf.search(["p-p1"], victim_vec, 50)  # the victim's own vector: it would rank first
        assert victim not in got and [c["item_id"] for c in tail] == [victim]
        assert len(got) >= 50
    finally:
        store.close()


def test_verify_and_compact_keep_the_float_rows_out_of_the_owner(home, locomo, real_embedder, monkeypatch):
    """The checksum pass and the compact build read the file (pread), and a built partition's mapped pages are
    dropped: the float32 matrix does not stay in the owner's RSS (what the 100k owner's size needs)."""
    texts, vecs, _ = locomo
    monkeypatch.setattr(compact, "MIN_ROWS", 1000)
    monkeypatch.setattr(compact, "TRIM_ROWS", 1000)
    store = _store_with(home, texts, vecs, real_embedder.model_id)
    try:
        VectorFile(home / "cache", store, real_embedder.model_id).write()
        vf = VectorFile(home / "cache", store, real_embedder.model_id)  # a new owner: opens and checks it
        m = vf.matrix()
        assert not m.verified and vf.verify() and m.verified
        np.einsum("ij,j->i", m.mat, vecs[0])  # a first query before the compact scan: every page touched
        assert _mapped_rss_kb(m.path) >= vecs.nbytes // 1024 * 0.9
        vf.ensure_compact()
        assert _mapped_rss_kb(m.path) <= 16  # at most the pages around the partition's ends
        for q in vecs[:20]:  # queries re-score their candidates through `SparseRows`: no page of it stays either
            assert len(vf.search(["p-p1"], q, 50)[0]) == 50
        assert m._sparse is not None and _mapped_rss_kb(m.path) <= 16
    finally:
        store.close()


def test_a_partition_below_the_trim_keeps_its_pages_mapped(home, locomo, real_embedder, monkeypatch):
    """Below `TRIM_ROWS` the compact scan's candidates are gathered from the mapping: its pages are mapped once
    when the scan is built (not one fault per row in the first queries), and stay (~15 MB at 10k rows)."""
    texts, vecs, _ = locomo
    monkeypatch.setattr(compact, "MIN_ROWS", 1000)
    store = _store_with(home, texts, vecs, real_embedder.model_id)
    try:
        VectorFile(home / "cache", store, real_embedder.model_id).write()
        vf = VectorFile(home / "cache", store, real_embedder.model_id)
        m = vf.matrix()
        assert vf.verify()
        assert vf.ensure_compact() == 1 and not m.trimmed
        assert _mapped_rss_kb(m.path) >= vecs.nbytes // 1024 * 0.9
    finally:
        store.close()


def _mapped_rss_kb(path) -> int:
    """The resident kB of this process's mappings of `path` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in open("/proc/self/smaps"):
        if "-" in line.split(" ", 1)[0] and len(line.split()) >= 5:
            inside = line.rstrip().endswith(str(path))
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


def test_a_failed_build_leaves_the_float32_scan(home, locomo, real_embedder, monkeypatch):
    """The compact scan is an optimisation: when its build fails (an onnxruntime without the operator, memory),
    the partition is scanned in float32 as before, the failure is logged once, not retried for that file."""
    texts, vecs, queries = locomo
    monkeypatch.setattr(compact, "MIN_ROWS", 1000)
    calls = []
    monkeypatch.setattr(compact, "build", lambda *a, **k: calls.append(1) or (_ for _ in ()).throw(
        RuntimeError("no MatMulInteger here")))
    store = _store_with(home, texts, vecs, real_embedder.model_id)
    try:
        vf = VectorFile(home / "cache", store, real_embedder.model_id)
        vf.write()
        assert vf.ensure_compact() == 0 and vf.ensure_compact() == 0 and calls == [1]
        got, _ = vf.search(["p-p1"], queries[0], 5)
        m = vf.matrix()
        rows = np.array(m.read(0, m.count))
        assert set(got) == {m.ids[i] for i in np.argsort(-(rows @ queries[0]), kind="stable")[:5]}
    finally:
        store.close()


def test_a_writes_search_leaves_the_changed_rows_out_before_re_scoring(home, locomo, real_embedder, monkeypatch):
    """A write's neighbour check reads the `k` best unchanged rows of a partition (`search(unchanged=True)`): the
    rows changed after the file are left out of the compact scan's scores, so about `k` candidates are re-scored in
    float32, not `k` + every change (issue 22, fifth pass: at 100k up to 2,000 rows read with pread at every write).
    The `k` best it returns are those of the full answer, with the same cosines to the bit; with a document block
    among them it answers as the full search does."""
    texts, vecs, queries = locomo
    monkeypatch.setattr(compact, "MIN_ROWS", 1000)
    monkeypatch.setattr(compact, "TRIM_ROWS", 1000)
    store = _store_with(home, texts, vecs, real_embedder.model_id)
    try:
        vf = VectorFile(home / "cache", store, real_embedder.model_id)
        vf.write()
        m = vf.matrix()
        assert vf.ensure_compact() == 1
        m.index_rows()
        rng = np.random.default_rng(5)
        changed = [m.ids[int(r)] for r in rng.choice(m.count, 300, replace=False)]
        with store.write() as c:  # 300 changes past the file: a memory's vector written again
            for item_id in changed:
                store.log_change(c, item_id, "p-p1", "upsert")
        reread: list[int] = []
        real_rows_of = type(m)._rows_of
        monkeypatch.setattr(type(m), "_rows_of", lambda self, part, rows: reread.append(len(rows)) or
                            real_rows_of(self, part, rows))
        for q in queries[:30]:
            del reread[:]
            full, tail = vf.search(["p-p1"], q, 40)
            wide = sum(reread)
            del reread[:]
            best, tail2 = vf.search(["p-p1"], q, 40, unchanged=True)
            assert [c["item_id"] for c in tail] == [c["item_id"] for c in tail2]
            assert not set(best) & set(changed) and len(best) == 40
            top = dict(sorted(full.items(), key=lambda kv: -kv[1])[:40])
            assert best == top  # the same rows, the same cosines
            assert sum(reread) < wide / 2  # ~k candidates re-read, not k + 300
        # more changes (writes go on): the rows left out are found for the new items only, and are all of them
        more = [m.ids[int(r)] for r in rng.choice(m.count, 50, replace=False)]
        with store.write() as c:
            for item_id in more:
                store.log_change(c, item_id, "p-p1", "upsert")
        changed += more
        for q in queries[30:40]:
            full, _tail = vf.search(["p-p1"], q, 40)
            best, _tail = vf.search(["p-p1"], q, 40, unchanged=True)
            assert not set(best) & set(changed)
            assert best == dict(sorted(full.items(), key=lambda kv: -kv[1])[:40])
        assert sorted(m._changed_rows_of[1].tolist()) == sorted({m._rows[i] for i in changed})
        # a document block among the best: the window the full search takes
        # (the best row that did not change: a changed row is out of both answers, whatever its id; the rows are in
        # the order of the random ids, so the best row of all is among the 300 changed ones one run in five)
        gone = set(changed)
        blk_row = next(int(r) for r in np.argsort(-(m.read(0, m.count) @ queries[0])) if m.ids[int(r)] not in gone)
        m.ids[blk_row] = "blk-" + m.ids[blk_row]
        assert vf.search(["p-p1"], queries[0], 40, unchanged=True)[0] == vf.search(["p-p1"], queries[0], 40)[0]
    finally:
        store.close()


def test_a_rows_cosine_is_the_same_wherever_it_stands(locomo):
    """`dense.cosines`, which every exact cosine of a stored vector goes through (the file's scan, its re-scored
    candidates, the change-log tail of a write and of an import's chunk, `exact_scores`): a row's value does not
    depend on its place, its neighbours or the number of rows, so each path finds the same cosine to the bit
    (BLAS's matrix-vector product gives most rows another last bit in another matrix)."""
    _texts, vecs, queries = locomo
    mat = np.ascontiguousarray(vecs, dtype=np.float32)
    rng = np.random.default_rng(3)
    for q in queries[:10]:
        q = np.asarray(q, dtype=np.float32)
        full = cosines(mat, q)
        order = rng.permutation(len(mat))
        assert np.array_equal(cosines(np.ascontiguousarray(mat[order]), q), full[order])  # another order
        assert np.array_equal(cosines(mat[333:334], q), full[333:334])  # alone
        room = np.empty((len(mat) + 5, mat.shape[1]), dtype=np.float32)  # inside a larger buffer, shifted
        room[5:] = mat
        assert np.array_equal(cosines(room[5:], q), full)
        assert np.allclose(full, mat @ q, atol=1e-6)
