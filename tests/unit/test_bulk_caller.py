"""Issue 22, sixth pass: the caller's thread of `remember_batch` does less per note, deciding the same. A chunk looks
its notes' texts up at once (`find_duplicate` only for the texts held, or written earlier in the chunk); a note's
tail of changed items keeps only what `nearest_from_scores` can read; `Memory.to_dict` copies as
`dataclasses.asdict` does. tests/unit/test_remember_batch.py and test_write_cost.py compare a batch with one
remember after another."""

from __future__ import annotations

import dataclasses
import random
import threading
import time

import numpy as np

from mnemo.core.engine import Engine
from mnemo.core.memory import manage, neighbours, write
from mnemo.core.models import Memory
from mnemo.core.search import nearest_from_scores


# -- the duplicate lookup of a chunk ---------------------------------------------------------------------------
def test_a_chunk_looks_its_texts_up_at_once_and_still_confirms_every_duplicate(home, hash_embedder, ctx,
                                                                                monkeypatch):
    """A text stored before, and a text said twice in one chunk, are confirmations as they were; `same_content` is
    asked only for those texts, not for each note."""
    monkeypatch.setattr(write, "BATCH_CHUNK", 8)
    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    try:
        before = write.remember(engine, ctx, "the billing worker retries webhooks five times", on_conflict="keep_both")
        asked: list[str] = []
        real = type(engine.store).same_content
        monkeypatch.setattr(type(engine.store), "same_content",
                            lambda self, h, p: asked.append(h) or real(self, h, p))
        texts = [f"note {i} about queue {i * 7} and worker {i * 13}" for i in range(20)]
        items = [{"text": t} for t in texts[:3]] + [{"text": "the billing worker retries webhooks five times"}] + \
            [{"text": t} for t in texts[3:6]] + [{"text": texts[4]}] + [{"text": t} for t in texts[6:]]
        res = write.remember_batch(engine, ctx, items, on_conflict="keep_both")
        got = [(it["status"], it["id"]) for it in res["items"]]
        assert got[3] == ("confirmed", before["memory"]["id"])  # held before the batch
        assert got[7] == ("confirmed", got[5][1])  # said twice in one chunk (items 5 and 7)
        assert res["counts"] == {"created": 20, "confirmed": 2}
        assert engine.store.get_memory(before["memory"]["id"]).confirmations == 2
        assert engine.store.get_memory(got[5][1]).confirmations == 2
        # asked for the text held before and for each text after its first note in the chunk, not for each note
        hashes = {it["text"]: write.content_hash(it["text"]) for it in items}
        assert sorted(asked) == sorted([hashes[items[3]["text"]], hashes[texts[4]]])
    finally:
        engine.close()


def test_held_hashes_are_those_same_content_finds(home, hash_embedder, ctx):
    """`Store.held_hashes` holds a hash exactly when `same_content` finds a memory for it: this project's project
    memories, not another project's nor a global one."""
    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    try:
        mine = write.remember(engine, ctx, "deploys go through the canary first", on_conflict="keep_both")
        glob = write.remember(engine, ctx, "prefer small pull requests", on_conflict="keep_both")
        manage.promote(engine, ctx, glob["memory"]["id"], "global")
        other = dataclasses.replace(ctx, project_id="another-project")
        theirs = write.remember(engine, other, "the schema migration runs at night", on_conflict="keep_both")
        hashes = [m["memory"]["content_hash"] for m in (mine, glob, theirs)] + ["no-such-hash"]
        held = engine.store.held_hashes(hashes, ctx.project_id)
        assert held == {h for h in hashes if engine.store.same_content(h, ctx.project_id)}
        assert held == {mine["memory"]["content_hash"]}
    finally:
        engine.close()


# -- the tail a note reads -------------------------------------------------------------------------------------
class _Log:
    """A change log and vectors, as `_Tail.catch_up` reads them from the store."""

    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.vecs: dict[str, bytes] = {}

    def put(self, item_id: str, vec) -> None:
        self.rows.append({"seq": len(self.rows) + 1, "item_id": item_id, "op": "upsert"})
        if vec is None:
            self.vecs.pop(item_id, None)
        else:
            self.vecs[item_id] = np.asarray(vec, dtype=np.float32).tobytes()

    def changes_after(self, seq: int) -> list[dict]:
        return self.rows[seq:]

    def vectors(self, ids, parts, model_id) -> dict[str, bytes]:
        return {i: self.vecs[i] for i in ids if i in self.vecs}


class _Reads:
    """A store for `nearest_from_scores` that records which ids it read, in order (and holds none)."""

    def __init__(self) -> None:
        self.read: list[str] = []

    def visibility_rows(self, ids):
        self.read = list(ids)
        return {}

    def get_memories(self, ids):
        return {}


def test_the_tail_keeps_what_the_nearest_memories_read_ties_and_blocks_too(ctx):
    """`_Tail.best` drops only items `nearest_from_scores` never reads: with any file top list added, the ids it
    reads are the same, in the same order, with the same cosines, for vectors with many exact ties, with document
    blocks among the changed items, and after an item's vector is gone (the rows rebuilt)."""
    rng = random.Random(3)
    dim = 6
    log = _Log()
    pool = [rng.choice([-1.0, 0.0, 1.0]) for _ in range(dim * 12)]  # few distinct vectors: ties everywhere

    def vec():
        start = rng.randrange(12) * dim
        return pool[start:start + dim]

    tail = neighbours._Tail(0, dim)
    reads = _Reads()
    engine = type("E", (), {"store": reads})()
    names = [f"mem-{i}" for i in range(150)] + [f"blk-{i}" for i in range(30)]
    for round_ in range(6):
        for name in rng.sample(names, 60):
            log.put(name, None if rng.random() < 0.05 else vec())
        tail.catch_up(log, ["p"], "m", np)
        assert tail.ids == list(tail.vecs) and tail.blocks == sum(i.startswith("blk-") for i in tail.ids)
        for _ in range(40):
            q = np.asarray(vec(), dtype=np.float32)
            full, best = tail.scores(q, np), tail.best(q, np, 40)
            assert set(best) <= set(full) and all(best[i] == full[i] for i in best)
            assert list(best) == [i for i in full if i in best]  # in their order
            values = sorted(set(full.values()))
            top = {f"mem-file-{j}": rng.choice(values) for j in range(rng.choice([0, 10, 45]))}
            top.update({f"blk-file-{j}": rng.choice(values) for j in range(3)})
            nearest_from_scores(engine, ctx, {**top, **full}, 10)
            want = reads.read
            nearest_from_scores(engine, ctx, {**top, **best}, 10)
            assert reads.read == want, round_
        if round_ == 2:
            assert len(tail.best(np.ones(dim, dtype=np.float32), np, 40)) < len(tail.vecs)  # it does drop some


# -- the record of a memory ------------------------------------------------------------------------------------
def test_a_memorys_record_is_what_asdict_gives_and_a_copy():
    mem = Memory(id="mem-1", text="the auth service rotates keys", type="fact", kind="decision", scope="project",
                 project_id="p", project_name="proj", branch="main", importance=0.5, confirmations=2,
                 created_at=1.5, updated_at=2.5, last_accessed=3.5, access_count=4, content_hash="h", source="user",
                 provenance={"imported_from": {"snapshot_sha256": "abc", "ids": [1, 2]}}, anchors=[{"path": "a.py"}],
                 tags=["auth"], flags=["hidden_text"])
    got = mem.to_dict()
    assert got == dataclasses.asdict(mem) and list(got) == list(dataclasses.asdict(mem))
    got["provenance"]["imported_from"]["ids"].append(3)
    got["anchors"][0]["path"] = "b.py"
    got["tags"].append("x")
    assert mem.provenance["imported_from"]["ids"] == [1, 2] and mem.anchors == [{"path": "a.py"}]
    assert mem.tags == ["auth"]
    odd = dataclasses.replace(mem, provenance={"when": (1, 2)})  # not a JSON value: asdict's own copy
    assert odd.to_dict() == dataclasses.asdict(odd)


# -- the neighbours loaded -------------------------------------------------------------------------------------
def test_memories_loaded_as_tuples_are_those_from_row_makes(home, hash_embedder, ctx):
    """`Store.get_memories` reads plain tuples (`memory_of`): the same memories as `Memory.from_row` of each row,
    for empty, missing and filled JSON columns and a deprecated flag stored as an integer."""
    from mnemo.core.store import memories as table

    assert table.FIELDS_IN_ORDER  # else get_memories falls back to from_row (slower, the same memories)
    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    try:
        ids = []
        for i in range(12):
            res = write.remember(engine, ctx, f"note {i} on the {['cache', 'queue', 'auth'][i % 3]} layer",
                                 tags=["a", "b"][: i % 3], anchors=[{"path": f"src/m{i}.py"}] if i % 2 else None,
                                 on_conflict="keep_both")
            ids.append(res["memory"]["id"])
        with engine.store.write() as c:
            c.execute("UPDATE memories SET provenance='', tags='' WHERE id=?", (ids[0],))
            c.execute("UPDATE memories SET provenance=?, deprecated=1 WHERE id=?",
                      ('{"refines": "mem-x", "n": [1, {"k": null}]}', ids[1]))
        got = engine.store.get_memories(ids + ["mem-missing"])
        rows = {r["id"]: Memory.from_row(r) for r in engine.store.conn().execute("SELECT * FROM memories")}
        assert got == {i: rows[i] for i in ids}
        assert got[ids[0]].provenance == {} and got[ids[0]].tags == []
        assert got[ids[1]].deprecated is True and got[ids[1]].provenance["n"] == [1, {"k": None}]
        assert [type(m.deprecated) for m in got.values()] == [bool] * len(ids)
    finally:
        engine.close()


# -- who makes a chunk's top lists -----------------------------------------------------------------------------
def _tops_threads(home, hash_embedder, ctx, monkeypatch, slow: str) -> list[str]:
    """The threads that made each chunk's top lists in a batch of 4 chunks, the embedding or the landing slowed."""
    monkeypatch.setattr(write, "BATCH_CHUNK", 8)
    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    try:
        for t in [f"stored note {i} on redis cache retry {i * 3}" for i in range(40)]:
            write.remember(engine, ctx, t, on_conflict="keep_both")
        engine.vector_file().write()
        made: list[str] = []
        real_tops, real_embed, real_land = neighbours._chunk_tops, Engine.embed, write.land

        def tops(*a, **kw):
            made.append(threading.current_thread().name)
            return real_tops(*a, **kw)

        def embed(self, texts):
            if slow == "embedding" and len(texts) > 1:
                time.sleep(0.4)
            return real_embed(self, texts)

        def land(*a, **kw):
            if slow == "landing":
                time.sleep(0.03)
            return real_land(*a, **kw)

        monkeypatch.setattr(neighbours, "_chunk_tops", tops)
        monkeypatch.setattr(Engine, "embed", embed)
        monkeypatch.setattr(write, "land", land)
        texts = [f"batch note {i} about the queue worker {i * 7}" for i in range(32)]
        res = write.remember_batch(engine, ctx, [{"text": t} for t in texts], on_conflict="keep_both")
        assert res["counts"] == {"created": 32}
        return made
    finally:
        engine.close()


def test_the_top_lists_are_made_on_the_thread_with_time_left(home, hash_embedder, ctx, monkeypatch):
    """While the caller lands the chunk before for longer than the next chunk's embedding takes, the second thread
    makes the next chunk's top lists too; when the caller waits for the embedding already, the second thread goes
    on to the next chunk and the caller makes them (the same lists: `ChunkSearch` makes them when none came)."""
    landing = _tops_threads(home / "a", hash_embedder, ctx, monkeypatch, slow="landing")
    # the first chunk is embedded at once (its lists made here), the three after it ahead
    assert sorted(name.split("_")[0] for name in landing) == ["MainThread"] + ["mnemo-embed-ahead"] * 3
    monkeypatch.undo()
    embedding = _tops_threads(home / "b", hash_embedder, ctx, monkeypatch, slow="embedding")
    assert embedding == ["MainThread"] * 4


# -- the word diff of a pair -----------------------------------------------------------------------------------
def test_the_word_diff_is_difflibs():
    """`compare._opcodes` gives difflib's opcodes (the "equal" ones left out) on random word sequences, few words
    repeated often and many rarely, of every length a note has and longer, and on the sides `_diff` passes it."""
    import difflib

    from tests.unit.test_relation import difflib_diff

    from mnemo.core.relation import compare

    rng = random.Random(22)
    for n in range(40000):
        words = rng.choice([2, 3, 5, 12, 40])
        longest = rng.choice([4, 14, 40])
        a = [f"w{rng.randrange(words)}" for _ in range(rng.randrange(longest))]
        b = [f"w{rng.randrange(words)}" for _ in range(rng.randrange(longest))]
        if n % 3 == 0 and a:  # a shared run, as two notes on one subject have
            start = rng.randrange(len(a))
            b[rng.randrange(len(b) + 1):0] = a[start:start + rng.randrange(1, 6)]
        want = [op for op in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes() if op[0] != "equal"]
        assert compare._opcodes(a, b) == want, (a, b)
        assert compare._diff(a, b) == difflib_diff(a, b), (a, b)
