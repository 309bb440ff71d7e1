"""A write's nearest memories (core/search.py `nearest_from_scores`, issue 22 seventh pass): the visibility rows of
the candidates are read a few at a time, best first, until no unread one can change the answer. The answer must be
the one reading every candidate gives, whatever the scores (ties, a floor) and whichever candidates are hidden."""

from __future__ import annotations

import random
import time
import uuid

from mnemo.core import search
from mnemo.core.engine import Engine
from mnemo.core.models import Memory


def _memories(engine: Engine, ctx, n: int, rnd: random.Random) -> list[str]:
    ids = []
    now = time.time()
    with engine.store.write() as c:
        for i in range(n):
            hidden = rnd.random() < 0.35
            m = Memory(id="mem-" + uuid.UUID(int=rnd.getrandbits(128)).hex[:20], text=f"note {i}", type="project",
                       kind="fact", scope="project", project_id=ctx.project_id, project_name=ctx.project_name,
                       branch=ctx.branch, importance=0.5, confirmations=1, created_at=now, updated_at=now,
                       last_accessed=now, access_count=0, content_hash=f"h{i}", source="user", author="test",
                       status="pending" if hidden and i % 2 else "active", deprecated=hidden and not i % 2)
            engine.store.insert_memory(c, m, engine.embed([m.text])[0], engine.model_id)
            ids.append(m.id)
    return ids


def _reading_all(engine: Engine, ctx, scores: dict[str, float], k: int, min_sim):
    ids = [i for i, _ in sorted(scores.items(), key=lambda kv: -kv[1])][: k * 4]
    rows = engine.store.visibility_rows(ids)
    seen = [(i, scores[i]) for i in ids if i in rows and search.memory_visible(search.Light(rows[i]), ctx)]
    seen.sort(key=lambda kv: (-kv[1], kv[0]))
    return search._kept(seen, k, min_sim)


def test_reading_a_few_at_a_time_gives_the_answer_of_reading_all(home, hash_embedder, ctx, monkeypatch):
    rnd = random.Random(4)
    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    try:
        ids = _memories(engine, ctx, 80, rnd)
        asked: list[int] = []
        real = type(engine.store).visibility_rows

        def counting(self, wanted):
            wanted = list(wanted)
            asked.append(len(wanted))
            return real(self, wanted)

        for case in range(300):
            pool = rnd.sample(ids, rnd.randint(1, 60))
            levels = [round(rnd.random(), 1) for _ in range(4)]  # few distinct values: ties everywhere
            scores = {i: rnd.choice(levels) if case % 2 else rnd.random() for i in pool}
            k = rnd.choice([1, 3, 10])
            min_sim = rnd.choice([None, 0.3, 0.6])
            want = _reading_all(engine, ctx, scores, k, min_sim)
            monkeypatch.setattr(type(engine.store), "visibility_rows", counting)
            asked.clear()
            ordered = [i for i, _ in sorted(scores.items(), key=lambda kv: -kv[1])][: k * 4]
            got = search._visible_kept(engine, ctx, ordered, scores, k, min_sim)
            monkeypatch.setattr(type(engine.store), "visibility_rows", real)
            assert got == want, (case, k, min_sim)
            assert sum(asked) <= len(ordered)
        # the common case: the best candidates visible, all above the floor: k + 2 read, not 4k
        visible = [i for i in ids if search.memory_visible(search.Light(engine.store.visibility_rows([i])[i]), ctx)]
        scores = {i: 1.0 - n / 100 for n, i in enumerate(visible[:40])}
        monkeypatch.setattr(type(engine.store), "visibility_rows", counting)
        asked.clear()
        got = search._visible_kept(engine, ctx, list(scores), scores, 10, 0.34)
        assert [i for i, _ in got] == visible[:10] and asked == [12]
    finally:
        engine.close()
