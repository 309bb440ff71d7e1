"""Issue 22: a write's cost does not grow with the store. Every statement a `remember` runs uses an index (no
full scan of memories, vectors or the change log), its neighbour check loads whole only the memories it keeps,
and the relation check embeds a neighbour's masked text once for the notes that follow."""

from __future__ import annotations

import random

from mnemo.core import write
from mnemo.core.engine import Engine
from mnemo.core.search import nearest_memories

WORDS = ["redis", "cache", "postgres", "replica", "retry", "backoff", "webhook", "signature", "deploy", "canary",
         "token", "expiry", "queue", "worker", "schema", "migration", "flag", "rollout", "metric", "alert"]
BIG_TABLES = ("memories", "vectors", "changes", "blocks", "review", "versions")


def _fill(engine, ctx, n: int) -> None:
    rng = random.Random(3)
    for i in range(n):
        write.remember(engine, ctx, " ".join(rng.sample(WORDS, 5)) + f" note {i}", on_conflict="keep_both")


def _scans(conn, statements: list[str]) -> list[tuple[str, str]]:
    """(statement, plan line) for every plan step that scans one of the big tables whole."""
    out = []
    for sql in statements:
        head = sql.lstrip().split(None, 1)[0].upper()
        if head not in ("SELECT", "UPDATE", "DELETE", "INSERT", "WITH"):
            continue
        for row in conn.execute("EXPLAIN QUERY PLAN " + sql).fetchall():
            detail = row[3]
            if detail.startswith("SCAN ") and detail.split()[1] in BIG_TABLES and "USING" not in detail:
                out.append((sql, detail))
    return out


def test_remember_runs_no_full_scan(home, hash_embedder, ctx):
    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    try:
        _fill(engine, ctx, 60)
        engine.vector_file().write()
        conn = engine.store.conn()
        seen: list[str] = []
        conn.set_trace_callback(seen.append)
        try:
            for text in ("redis cache retry backoff deploy note 7", "a brand new fact about zebra crossings",
                         "redis cache retry backoff deploy note 7"):  # related, new, and the same text again
                write.remember(engine, ctx, text, on_conflict="keep_both")
        finally:
            conn.set_trace_callback(None)
        assert len(seen) > 10
        assert _scans(conn, seen) == []
    finally:
        engine.close()


def test_neighbour_check_loads_only_the_kept_memories_whole(home, hash_embedder, ctx, monkeypatch):
    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    try:
        _fill(engine, ctx, 80)
        loaded: list[int] = []
        real = type(engine.store).get_memories

        def counting(self, ids):
            ids = list(ids)
            loaded.append(len(ids))
            return real(self, ids)

        monkeypatch.setattr(type(engine.store), "get_memories", counting)
        found = nearest_memories(engine, ctx, engine.embed_query("redis cache retry"), k=5)
        assert len(found) == 5 and loaded == [5]  # not the 20 candidates it ranked
        sims = [s for _, s in found]
        assert sims == sorted(sims, reverse=True)
    finally:
        engine.close()


def test_relation_check_embeds_through_the_cache(home, hash_embedder, ctx, monkeypatch):
    calls: list[list[str]] = []

    class Counting(type(hash_embedder)):
        def embed(self, texts):
            calls.append(list(texts))
            return super().embed(texts)

    engine = Engine(home, embedder=Counting(), start_indexer=False)
    try:
        first = engine.embed_cached(["redis cache", "postgres replica", "redis cache"])
        assert calls == [["redis cache", "postgres replica"]]
        assert (first == engine.embed(["redis cache", "postgres replica", "redis cache"])).all()
        calls.clear()
        again = engine.embed_cached(["postgres replica", "kafka topic", "redis cache"])
        assert calls == [["kafka topic"]]  # only what it has not seen
        assert (again == engine.embed(["postgres replica", "kafka topic", "redis cache"])).all()
        # the write path's relation check embeds its masked notes and slots through the cache
        from mnemo.core import relation

        used = []
        real = relation.decide_many
        monkeypatch.setattr(relation, "decide_many", lambda pairs, embed, *a, **kw: used.append(embed) or
                            real(pairs, embed, *a, **kw))
        write.remember(engine, ctx, "the payments API retries 3 times with backoff", on_conflict="keep_both")
        write.remember(engine, ctx, "the payments API retries 4 times with backoff", on_conflict="keep_both")
        assert used and all(e == engine.embed_cached for e in used)
    finally:
        engine.close()
