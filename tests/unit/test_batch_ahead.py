"""Issue 22, fifth pass: `remember_batch` embeds the next chunk (and multiplies it with the vector file) on a second
thread while a chunk lands, and the owner's BLAS threads sleep after a product. Nothing a batch decides changes
(tests/unit/test_remember_batch.py and test_write_cost.py compare it with one remember after another); these tests
show the second thread at work, that top lists made ahead are used only while they hold, and the owner's setting."""

from __future__ import annotations

import json
import os
import random
import threading
import time
from pathlib import Path

import pytest

from mnemo.core.engine import Engine
from mnemo.core.indexes.dense import cosines
from mnemo.core.memory import neighbours, write
from mnemo.core.search import nearest_memories
from mnemo.core.store.codec import partition_for

WORDS = ["redis", "cache", "postgres", "replica", "retry", "backoff", "webhook", "signature", "deploy", "canary",
         "token", "expiry", "queue", "worker", "schema", "migration", "flag", "rollout", "metric", "alert"]


def _texts(n: int, seed: int, tag: str) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.sample(WORDS, 5)) + f" {tag} {i}" for i in range(n)]


def test_the_next_chunk_is_embedded_on_a_second_thread_while_a_chunk_lands(home, hash_embedder, ctx, monkeypatch):
    """Chunk n + 1 is embedded, on the `mnemo-embed-ahead` thread, before chunk n's landing ends; the batch lands
    every note in order, as before."""
    monkeypatch.setattr(write, "BATCH_CHUNK", 8)
    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    events: list[tuple[str, str, float]] = []
    real_embed, real_land = Engine.embed, write._land_chunk

    def embed(self, texts):
        events.append(("embed", threading.current_thread().name, time.monotonic()))
        time.sleep(0.02)  # long enough to overlap with the landing of the chunk before
        return real_embed(self, texts)

    def land(*a, **kw):
        events.append(("land start", threading.current_thread().name, time.monotonic()))
        try:
            return real_land(*a, **kw)
        finally:
            events.append(("land end", threading.current_thread().name, time.monotonic()))

    monkeypatch.setattr(Engine, "embed", embed)
    monkeypatch.setattr(write, "_land_chunk", land)
    try:
        texts = _texts(30, 1, "note")
        res = write.remember_batch(engine, ctx, [{"text": t} for t in texts], on_conflict="keep_both")
        assert [it["index"] for it in res["items"]] == list(range(30))
        assert res["counts"] == {"created": 30}
        stored = engine.store.get_memories([it["id"] for it in res["items"]])
        assert [stored[it["id"]].text for it in res["items"]] == texts
        ahead = [e for e in events if e[0] == "embed" and e[1].startswith("mnemo-embed-ahead")]
        assert len(ahead) == 3  # chunks 2, 3 and 4 of 4 (the first is embedded before anything can land)
        lands = [e for e in events if e[0].startswith("land")]
        first_end = next(t for name, _, t in lands if name == "land end")
        assert ahead[0][2] < first_end  # chunk 2 was being embedded while chunk 1 landed
        assert not [t for t in threading.enumerate() if t.name.startswith("mnemo-embed-ahead")]  # none left
    finally:
        engine.close()


def test_an_embedding_failure_ahead_is_raised_and_earlier_chunks_stay(home, hash_embedder, ctx, monkeypatch):
    """A chunk whose embedding fails on the second thread fails the call at that chunk, as it did on the caller's
    thread: the chunks before it are committed (acknowledged chunk by chunk), nothing after it lands."""
    monkeypatch.setattr(write, "BATCH_CHUNK", 8)
    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    real_embed = Engine.embed

    def embed(self, texts):
        if any("poison" in t for t in texts):
            raise RuntimeError("the model failed")
        return real_embed(self, texts)

    monkeypatch.setattr(Engine, "embed", embed)
    try:
        texts = _texts(24, 2, "note")
        texts[17] = "poison " + texts[17]  # in the third chunk
        try:
            write.remember_batch(engine, ctx, [{"text": t} for t in texts], on_conflict="keep_both")
        except RuntimeError as exc:
            assert "the model failed" in str(exc)
        else:
            raise AssertionError("the failure was not raised")
        assert sorted(m.text for m in engine.store.live_memories(ctx.project_id)) == sorted(texts[:16])
    finally:
        engine.close()


def test_top_lists_made_ahead_are_used_only_while_they_hold(home, hash_embedder, ctx):
    """`ChunkSearch.ahead` computes a chunk's top lists from the vector file in use; the chunk's search takes them
    when made from the same file with room for the changes since, and makes them again otherwise (the file was
    rewritten, or more changes came than the room kept). Each note gets what it finds alone either way."""
    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    try:
        for t in _texts(60, 3, "stored"):
            write.remember(engine, ctx, t, on_conflict="keep_both")
        engine.vector_file().write()
        texts = _texts(6, 4, "chunk")
        vecs = engine.embed(texts)

        def check(tops, used: bool) -> None:
            with engine.store.write():
                chunk = neighbours.ChunkSearch(engine, ctx, vecs, tops=tops)
                assert chunk._top is not None
                assert (chunk._top is tops.parts) is used
                for j in range(len(texts)):
                    got = chunk.nearest(j)(vecs[j], 10)
                    alone = nearest_memories(engine, ctx, vecs[j], 10)
                    assert [m.id for m, _ in got] == [m.id for m, _ in alone]
                    assert [round(s, 5) for _, s in got] == [round(s, 5) for _, s in alone]

        made = neighbours.ChunkSearch.ahead(engine, ctx, before=0)
        assert made is not None
        check(made(vecs), used=True)
        stale = made(vecs)
        for t in _texts(3, 5, "later"):  # three changes after the file: more than a room made for none
            write.remember(engine, ctx, t, on_conflict="keep_both")
        tight = neighbours.Tops(stale.matrix, stale.room - 1, stale.parts)
        check(tight, used=False)
        check(neighbours.ChunkSearch.ahead(engine, ctx, before=0)(vecs), used=True)
        engine.vector_file().write()  # a new file: lists made from the old one are not used
        check(stale, used=False)
    finally:
        engine.close()


def test_the_owner_lets_blas_threads_sleep_and_keeps_a_users_setting(home, monkeypatch):
    """The owner sets OPENBLAS_NUM_THREADS=1 and OPENBLAS_THREAD_TIMEOUT before numpy loads (a product spread over
    BLAS's threads waited for the core an import embeds on, and its threads spun through the Python work after
    every product); a value the user set is kept."""
    from mnemo.daemon.client import DaemonService
    from mnemo.daemon.paths import info_path

    def owner_env(value: str | None, threads: str | None = None) -> dict[str, str]:
        if value is None:
            monkeypatch.delenv("OPENBLAS_THREAD_TIMEOUT", raising=False)
        else:
            monkeypatch.setenv("OPENBLAS_THREAD_TIMEOUT", value)
        if threads is None:
            monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
        else:
            monkeypatch.setenv("OPENBLAS_NUM_THREADS", threads)
        monkeypatch.setenv("MNEMO_EMBEDDER", "hash")
        svc = DaemonService(home, client_name="test")
        try:
            svc.connect()
            pid = json.loads(info_path(home).read_text())["pid"]
            raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            return dict(e.decode().split("=", 1) for e in raw if b"=" in e)
        finally:
            svc.shutdown()
            for _ in range(200):
                if not info_path(home).exists():
                    break
                time.sleep(0.05)

    if not os.path.exists("/proc/self/environ"):
        import pytest

        pytest.skip("reads the owner's environment from /proc")
    env = owner_env(None)
    assert env.get("OPENBLAS_THREAD_TIMEOUT") == "4" and env.get("OPENBLAS_NUM_THREADS") == "1"
    env = owner_env("9", threads="2")
    assert env.get("OPENBLAS_THREAD_TIMEOUT") == "9" and env.get("OPENBLAS_NUM_THREADS") == "2"


def test_the_changed_items_are_followed_row_by_row_with_the_same_cosines(home, hash_embedder, ctx):
    """The chunk's tail of changed items (`neighbours._Tail`) keeps their vectors as one matrix updated row by row:
    after new items, replaced vectors, a deleted item and its return, its cosines are those of the vectors stored
    now, exactly (the same product as a matrix made afresh)."""
    import numpy as np

    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    try:
        for t in _texts(20, 6, "stored"):
            write.remember(engine, ctx, t, on_conflict="keep_both")
        engine.vector_file().write()
        seq = engine.store.max_seq()
        parts = neighbours.scope_parts(ctx, "hybrid")
        tail = neighbours._Tail(seq, engine.embedder.dim)
        rng = random.Random(9)
        mems = []
        query = engine.embed(["redis cache retry"])[0]

        def check() -> None:
            tail.catch_up(engine.store, parts, engine.model_id, np)
            blobs = engine.store.vectors(sorted(tail.upserts), parts, engine.model_id)
            fresh = {i: np.frombuffer(b, dtype=np.float32) for i, b in blobs.items()}
            got = tail.scores(query, np)
            assert set(got) == set(fresh)
            ids = list(tail.vecs)
            made = cosines(np.stack([tail.vecs[i] for i in ids]), query) if ids else np.zeros(0)
            assert got == dict(zip(ids, made.tolist(), strict=True))  # bit for bit
            for i, v in fresh.items():
                assert abs(got[i] - float(v @ query)) < 1e-6

        for step in range(120):
            op = rng.random()
            with engine.store.write() as c:
                if op < 0.5 or not mems:
                    mem, _ = write.draft(ctx, " ".join(rng.sample(WORDS, 4)) + f" step {step}")
                    engine.store.insert_memory(c, mem, engine.embed([mem.text])[0], engine.model_id)
                    mems.append(mem)
                elif op < 0.8:  # a new vector for a memory written before
                    mem = rng.choice(mems)
                    c.execute("UPDATE vectors SET vec=? WHERE item_id=?",
                              (engine.embed([f"replaced {step}"])[0].tobytes(), mem.id))
                    engine.store.log_change(c, mem.id, partition_for(mem.scope, mem.project_id), "upsert")
                else:  # deleted
                    mem = mems.pop(rng.randrange(len(mems)))
                    engine.store.delete_item(c, mem.id)
            if step % 7 == 0:
                check()
        check()
    finally:
        engine.close()


def test_a_chunk_reads_the_change_log_only_past_the_chunk_before(home, hash_embedder, ctx, monkeypatch):
    """The chunks of a batch read the same vector file: each takes over what the one before read of the change log
    and reads only the rows after it (at 100k the log holds up to 2,000 rows past the file), and decides what it
    decides reading it all (tests/unit/test_write_cost.py compares a batch with one remember after another)."""
    monkeypatch.setattr(write, "BATCH_CHUNK", 8)
    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    try:
        for t in _texts(40, 7, "stored"):
            write.remember(engine, ctx, t, on_conflict="keep_both")
        engine.vector_file().write()
        for t in _texts(10, 8, "tail"):
            write.remember(engine, ctx, t, on_conflict="keep_both")
        file_seq = engine.vector_file().matrix().seq
        reads: list[int] = []
        real = type(engine.store).changes_after
        monkeypatch.setattr(type(engine.store), "changes_after",
                            lambda self, seq, *a, **kw: reads.append(seq) or real(self, seq, *a, **kw))
        inits: list[int] = []
        real_init = neighbours.ChunkSearch.__init__

        def init(self, *a, **kw):
            n = len(reads)
            real_init(self, *a, **kw)
            inits.append(reads[n] if len(reads) > n else -1)

        monkeypatch.setattr(neighbours.ChunkSearch, "__init__", init)
        res = write.remember_batch(engine, ctx, [{"text": t} for t in _texts(32, 9, "batch")], on_conflict="keep_both")
        assert res["counts"] == {"created": 32}
        assert len(inits) == 4
        assert inits[0] == file_seq  # the first chunk reads the log from the file's end
        assert all(seq > file_seq for seq in inits[1:])  # the next ones past what the chunk before read
    finally:
        engine.close()


def test_an_import_leaves_a_trimmed_partitions_rows_out_of_the_owner(home, hash_embedder, ctx, monkeypatch):
    """A partition served by its compact scan keeps its float32 pages out of the owner's RSS (100k: ~150 MB); a
    batch's product with it reads them all, and drops them again: after an import they are not resident."""
    from tests.unit.test_compact_scan import _mapped_rss_kb

    from mnemo.core.indexes import compact

    monkeypatch.setattr(compact, "MIN_ROWS", 1000)
    monkeypatch.setattr(compact, "TRIM_ROWS", 1000)
    monkeypatch.setattr(write, "BATCH_CHUNK", 8)
    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    try:
        write.remember_batch(engine, ctx, [{"text": t} for t in _texts(1000, 10, "stored")], on_conflict="keep_both")
        vf = engine.vector_file()
        vf.write()
        m = vf.matrix()
        assert vf.ensure_compact() == 1 and m.trimmed
        used: list[bool] = []
        real_init = neighbours.ChunkSearch.__init__

        def init(self, *a, **kw):
            real_init(self, *a, **kw)
            used.append(self._top is not None and self._m is m)

        monkeypatch.setattr(neighbours.ChunkSearch, "__init__", init)
        res = write.remember_batch(engine, ctx, [{"text": t} for t in _texts(24, 11, "batch")], on_conflict="keep_both")
        assert res["counts"] == {"created": 24} and used == [True, True, True]
        assert _mapped_rss_kb(m.path) <= 16  # at most the pages around the partition's ends
    finally:
        engine.close()


def test_a_batch_gives_the_heaps_freed_pages_back(home, hash_embedder, ctx, monkeypatch):
    """A batch's chunk products are large and glibc keeps what they freed: the service trims the heap after every
    `remember_batch`, failed ones included (an owner that imported 500 notes into a 100k store held ~90 MB more)."""
    from mnemo import service
    from mnemo.core.errors import InvalidInput
    from mnemo.service import LocalService

    trims: list[int] = []
    real = service.release_freed_memory
    monkeypatch.setattr(service, "release_freed_memory", lambda: trims.append(1) or real())
    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    try:
        svc = LocalService(engine)
        res = svc.remember_batch(ctx.to_dict(), [{"text": t} for t in _texts(5, 3, "trim")], on_conflict="keep_both")
        assert res["counts"] == {"created": 5} and trims == [1]
        with pytest.raises(InvalidInput):
            svc.remember_batch(ctx.to_dict(), "not a list")  # refused: still trimmed
        assert trims == [1, 1]
        if os.uname().sysname == "Linux" and os.path.exists("/lib/x86_64-linux-gnu/libc.so.6"):
            assert service._LIBC  # glibc: malloc_trim found and called
    finally:
        engine.close()
