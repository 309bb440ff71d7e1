"""The persisted read side (<home>/cache): the vector file and the keyword postings answer exactly like the store
they were written from, follow later writes through the change log, and are never trusted when they do not match
the store (torn, truncated, foreign, from a newer history, made by another model)."""

from __future__ import annotations

import random
import shutil

import pytest

from mnemo.core.engine import Engine
from mnemo.core.indexes.dense import exact_scores
from mnemo.core.indexes.keyword import KeywordIndex, PartitionIndex
from mnemo.core.indexes.vector_file import FILE_NAME, VectorFile
from mnemo.core.memory.manage import forget, promote
from mnemo.core.memory.recall import recall
from mnemo.core.memory.write import remember
from mnemo.core.search import dense_search
from mnemo.core.text import tokenize

WORDS = ["redis", "cache", "postgres", "replica", "retry", "backoff", "webhook", "signature", "deploy", "canary",
         "token", "expiry", "queue", "worker", "schema", "migration", "flag", "rollout", "metric", "alert"]


def fill(engine, ctx, n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    ids = []
    for i in range(n):
        text = " ".join(rng.sample(WORDS, 5)) + f" note {i}"
        ids.append(remember(engine, ctx, text, on_conflict="keep_both")["memory"]["id"])
    return ids


def reopen(engine: Engine, home, hash_embedder) -> Engine:
    engine.close()
    return Engine(home, embedder=hash_embedder, start_indexer=False)


def exact(engine, parts, qvec, k):
    return dict(sorted(exact_scores(engine.store, parts, qvec), key=lambda kv: -kv[1])[:k])


def test_partition_dump_round_trip_scores_the_same():
    rng = random.Random(5)
    idx = PartitionIndex()
    for i in range(300):
        idx.add(f"d{i}", tokenize(" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 12)))))
    for i in range(0, 300, 7):
        idx.remove(f"d{i}")  # dead slots survive the round trip
    idx.add("d14", tokenize("redis redis cache"))  # re-added: one dead, one live slot
    head, sections = idx.dump()
    back = PartitionIndex.undump(head, sections)
    for _ in range(30):
        q = tokenize(" ".join(rng.sample(WORDS, 3)))
        assert back.search(q, 20) == idx.search(q, 20)
    assert back.slot == idx.slot and back.n_alive == idx.n_alive


def test_loaded_postings_are_made_on_first_use_and_dump_the_same():
    """Issue 22, third pass: a loaded partition makes a term's arrays when a query (or a new note) first needs
    them, not all ~100k at load; adding notes to a loaded partition, then saving it again, gives the bytes of the
    same partition built in memory."""
    rng = random.Random(7)
    notes = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 12))) + f" ticket{i}" for i in range(200)]
    built = PartitionIndex()
    for i, t in enumerate(notes[:150]):
        built.add(f"d{i}", tokenize(t))
    back = PartitionIndex.undump(*built.dump())
    assert len(back.postings._made) == 0 and len(back.postings) == len(built.postings)
    q = tokenize("redis cache ticket3")
    assert back.search(q, 10) == built.search(q, 10)
    assert set(back.postings._made) == {t for t in q if t in built.postings}  # only what the query read
    for i, t in enumerate(notes[150:], start=150):  # known and new terms
        built.add(f"d{i}", tokenize(t))
        back.add(f"d{i}", tokenize(t))
    made = dict(back.postings._made)
    head_b, sections_b = back.dump()
    # saving reads the loaded terms' bytes where they lie: none is made for it (issue 22, thirteenth pass)
    assert back.postings._made == made and len(made) < len(back.postings)
    head_a, sections_a = built.dump()
    a = PartitionIndex.undump(head_a, sections_a)
    b = PartitionIndex.undump(head_b, sections_b)
    assert {t: (a.postings[t][0].tolist(), a.postings[t][1].tolist()) for t in a.postings} == {
        t: (b.postings[t][0].tolist(), b.postings[t][1].tolist()) for t in b.postings}
    for _ in range(20):
        q = tokenize(" ".join(rng.sample(WORDS, 3)))
        assert back.search(q, 20) == built.search(q, 20)
    again = PartitionIndex.undump(*b.dump())  # a file saved from a loaded partition loads the same again
    assert again.dump() == b.dump() == (head_b, sections_b)


def test_saved_keywords_load_and_follow_later_changes(home, hash_embedder, ctx):
    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    ids = fill(engine, ctx, 40)
    part = f"p-{ctx.project_id}"
    engine.keywords.build_all()
    engine.keywords.save()
    engine = reopen(engine, home, hash_embedder)
    try:
        loaded = KeywordIndex(engine.store, engine.cache_dir)
        assert loaded.search([part], "redis backoff", 10) == engine.keywords.search([part], "redis backoff", 10)
        assert loaded.last_problem is None and loaded.saved_seq == engine.store.max_seq()
        new = remember(engine, ctx, "zebra crossing policy", on_conflict="keep_both")["memory"]["id"]
        forget(engine, ctx, ids[0])
        promote(engine, ctx, ids[1])
        built = KeywordIndex(engine.store)
        for q in ("zebra", "redis backoff", "note 0", "note 1"):
            assert loaded.search([part, "g"], q, 10) == built.search([part, "g"], q, 10), q
        assert [i for i, _ in loaded.search([part], "zebra", 5)] == [new]
    finally:
        engine.close()


def test_first_answer_from_the_files_equals_the_exact_scan(home, hash_embedder, ctx):
    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    ids = fill(engine, ctx, 60)
    engine = reopen(engine, home, hash_embedder)  # close() wrote <home>/cache
    try:
        assert (home / "cache" / FILE_NAME).exists() and (home / "cache" / "keywords.bin").exists()
        parts = [f"p-{ctx.project_id}", "g"]
        q = engine.embed_query("redis cache replica")
        hits = dense_search(engine, parts, q, 10)
        assert hits.used_index and engine.vector_file().matrix() is not None
        top = sorted(exact(engine, parts, q, 100).values(), reverse=True)[:10]  # ties may pick other ids
        assert sorted(hits.scores.values(), reverse=True)[:10] == pytest.approx(top, abs=1e-6)
        # later writes, a forget and a promotion are the file's tail: scored from SQLite, the old rows left out
        forget(engine, ctx, ids[0])
        promote(engine, ctx, ids[1])
        new = remember(engine, ctx, "redis cache replica tuning", on_conflict="keep_both")["memory"]["id"]
        hits = dense_search(engine, parts, q, 10)
        assert ids[0] not in hits.scores and new in hits.scores
        want = exact(engine, parts, q, 10)
        assert set(want) <= set(hits.scores)
        for item_id, cos in want.items():
            assert hits.scores[item_id] == pytest.approx(cos, abs=1e-6)
        res = recall(engine, ctx, "redis cache replica")
        assert res["warnings"] == [] and res["cards"]
    finally:
        engine.close()


@pytest.mark.parametrize("damage", ["truncate", "extend", "header", "newer", "model", "flip"])
def test_a_file_that_does_not_match_the_store_is_not_used(home, hash_embedder, ctx, damage):
    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    fill(engine, ctx, 30)
    engine = reopen(engine, home, hash_embedder)
    path = home / "cache" / FILE_NAME
    data = path.read_bytes()
    if damage == "truncate":  # a torn write: any prefix
        path.write_bytes(data[: len(data) - 700])
    elif damage == "extend":
        path.write_bytes(data + b"\0" * 64)
    elif damage == "header":
        path.write_bytes(data[:20] + b"{" + data[21:])
    elif damage == "flip":  # a row the open does not sample: the background checksum catches it
        m = engine.vector_file().matrix()
        row = next(i for i in range(m.count) if i % max(1, m.count // 8) and i != m.count - 1)
        at = int(m.mat.offset) + row * m.dim * 4
        m = None
        engine.vector_file()._loaded = None
        path.write_bytes(data[:at] + bytes(b ^ 0xFF for b in data[at:at + 4]) + data[at + 4:])
    try:
        if damage == "newer":  # the store restored from a backup taken before the file was written
            shutil.copy(path, home / "keep")
            engine.close()
            backup = home.parent / "older"
            engine = Engine(backup, embedder=hash_embedder, start_indexer=False)
            fill(engine, ctx, 35, seed=2)  # a different history that reaches past the file's change
            (backup / "cache").mkdir(exist_ok=True)
            shutil.copy(home / "keep", backup / "cache" / FILE_NAME)
            engine = reopen(engine, backup, hash_embedder)
            (backup / "cache" / FILE_NAME).write_bytes((home / "keep").read_bytes())
        vf = VectorFile(engine.cache_dir, engine.store, "other-model" if damage == "model" else engine.model_id)
        if damage == "flip":
            assert vf.matrix() is not None and vf.verify() is False
        assert vf.matrix() is None and vf.last_problem
        parts = [f"p-{ctx.project_id}", "g"]
        q = engine.embed_query("postgres migration")
        engine._vector_file = vf if damage != "model" else None
        assert dense_search(engine, parts, q, 50).scores.keys() == exact(engine, parts, q, 50).keys()
        engine.vector_file().refresh()  # rewritten, and trusted again
        assert engine.vector_file().matrix() is not None
    finally:
        engine.close()


def test_a_crash_while_writing_leaves_the_old_file_in_use(home, hash_embedder, ctx, monkeypatch):
    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    fill(engine, ctx, 20)
    engine = reopen(engine, home, hash_embedder)
    try:
        before = (home / "cache" / FILE_NAME).read_bytes()
        new = remember(engine, ctx, "postgres migration checklist", on_conflict="keep_both")["memory"]["id"]

        def crash(*a, **k):
            raise OSError("simulated crash before the rename")

        monkeypatch.setattr("mnemo.core.indexes.vector_file.os.replace", crash)
        with pytest.raises(OSError):
            engine.vector_file().write()
        monkeypatch.undo()
        assert (home / "cache" / FILE_NAME).read_bytes() == before  # the old file, untouched
        fresh = VectorFile(engine.cache_dir, engine.store, engine.model_id)
        assert fresh.matrix() is not None
        engine._vector_file = fresh
        q = engine.embed_query("postgres migration checklist")
        assert new in dense_search(engine, [f"p-{ctx.project_id}"], q, 5).scores  # from the tail
    finally:
        engine.close()


def test_vector_file_rewrite_reads_the_tail_not_the_store(home, hash_embedder, ctx, monkeypatch):
    """Issue 22: a rewrite after later writes copies the mapped rows and reads only the changed items from SQLite,
    and the file it writes holds exactly what a full rewrite from the store holds (a new note, a forgotten one, a
    promoted one that moved partition)."""
    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    try:
        ids = fill(engine, ctx, 30)
        vf = engine.vector_file()
        vf.write()
        new = remember(engine, ctx, "zebra crossing policy", on_conflict="keep_both")["memory"]["id"]
        forget(engine, ctx, ids[0])
        promote(engine, ctx, ids[1])
        read_all = []
        monkeypatch.setattr(VectorFile, "_all_rows", lambda self, out: read_all.append(1) or None)
        vf.write()  # from the loaded matrix and the tail
        assert read_all == []
        m = vf.matrix()
        got = {p: {m.ids[i]: m.mat[i].tobytes() for i in range(a, b)} for p, (a, b) in m.parts.items()}
        monkeypatch.undo()
        full = VectorFile(engine.cache_dir / "full", engine.store, engine.model_id)
        full.write()
        f = full.matrix()
        want = {p: {f.ids[i]: f.mat[i].tobytes() for i in range(a, b)} for p, (a, b) in f.parts.items()}
        assert {p: r for p, r in got.items() if r} == {p: r for p, r in want.items() if r}
        part = f"p-{ctx.project_id}"
        assert new in got[part] and ids[0] not in got[part] and ids[1] in got["g"] and ids[1] not in got[part]
        assert m.seq == f.seq == engine.store.max_seq()  # rows in another order: the checksum is its own
        reopened = VectorFile(engine.cache_dir, engine.store, engine.model_id)
        assert reopened.matrix() is not None and reopened.verify()  # the next owner accepts it, checksum included
    finally:
        engine.close()


def test_scores_of_given_items_come_from_the_file_and_its_tail_from_sqlite(home, hash_embedder, ctx, monkeypatch):
    """Recall scores its keyword-only hits by id on every query (issue 22): from the mapped file's rows where the
    file holds them as stored, from SQLite for what changed after it (edited, forgotten, promoted, new) or lies
    outside the asked partitions, and always equal to the exact cosines of the store."""
    from mnemo.core.edits import edit_memory

    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    ids = fill(engine, ctx, 40)
    engine = reopen(engine, home, hash_embedder)
    try:
        proj = f"p-{ctx.project_id}"
        q = engine.embed_query("redis cache replica")
        asked = [ids[i] for i in range(0, 40, 3)]
        assert engine.vector_file().matrix() is not None  # opened (its open checks sample rows from SQLite)
        read = []
        real_vectors = engine.store.vectors
        monkeypatch.setattr(engine.store, "vectors", lambda ids_, *a, **k: read.append(list(ids_)) or
                            real_vectors(ids_, *a, **k))
        # before the indexer made the file's id -> row map, SQLite answers (no 100k-entry dict on a query's path)
        first = dense_search(engine, [proj, "g"], q, 10, ids=asked).scores
        assert read == [asked] and first == pytest.approx(dict(exact_scores(engine.store, [proj, "g"], q,
                                                                              ids=asked)), abs=1e-6)
        read.clear()
        engine.vector_file().verify()  # the indexer's steps after the start: its checks, then the map (and any
        engine.vector_file().ensure_compact()  # compact scan: none at this size)
        got = dense_search(engine, [proj, "g"], q, 10, ids=asked).scores
        assert read == []  # every one from the file
        assert got == pytest.approx(dict(exact_scores(engine.store, [proj, "g"], q, ids=asked)), abs=1e-6)
        forget(engine, ctx, ids[0])
        promote(engine, ctx, ids[3])
        edit_memory(engine, ctx, ids[6], text="zebra crossing near the office")
        new = remember(engine, ctx, "redis cache replica tuning", on_conflict="keep_both")["memory"]["id"]
        read.clear()  # (the writes' own checks read vectors too)
        got = dense_search(engine, [proj, "g"], q, 10, ids=[*asked, new]).scores
        assert sorted(x for batch in read for x in batch) == sorted([ids[0], ids[3], ids[6], new])
        want = dict(exact_scores(engine.store, [proj, "g"], q, ids=[*asked, new]))
        assert ids[0] not in got and got == pytest.approx(want, abs=1e-6)
        assert got[ids[6]] == pytest.approx(float(engine.embed_query("zebra crossing near the office") @ q), abs=1e-6)
        only_proj = dense_search(engine, [proj], q, 10, ids=asked).scores
        assert ids[3] not in only_proj  # promoted to the global partition: not in the project's
    finally:
        engine.close()
