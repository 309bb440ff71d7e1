"""A recall's query embedding goes through the engine's LRU of texts (`Engine.embed_cached`, issue 22): the same
symbol hovered again, or a hover on a symbol the code lens pass already recalled with the same query, costs no
model run in the owner. A write changes no query's vector, so the cache needs no invalidation: a memory written
after the query was cached is found by the next recall with that query. Real model (int8 MiniLM), real store."""

from __future__ import annotations

import numpy as np

from mnemo.service import LocalService

QUERY = "payments client post idempotency key retries"


def test_the_same_query_is_embedded_once_and_a_new_memory_still_shows(real_engine, ctx):
    svc = LocalService(real_engine)
    c = ctx.to_dict()
    svc.remember(c, "Frontend buttons use the tailwind primary color.", source="user")
    embedded: list[list[str]] = []
    model = real_engine.embedder
    real_embed = model.embed

    def counting(texts):
        embedded.append(list(texts))
        return real_embed(texts)

    model.embed = counting
    try:
        first = svc.hover_context(c, "src/client.py", 6, "PaymentsClient.post", QUERY, limit=6, skills=False)
        assert [QUERY] in embedded
        assert not any("idempotency key on every POST" in x["compressed_summary"] for x in first["cards"])
        # a new memory, written after the query's vector was cached (its own text is embedded, not the query)
        mem = svc.remember(c, "The payments API requires an idempotency key on every POST; retries reuse it.",
                           source="user")["memory"]
        embedded.clear()
        again = svc.hover_context(c, "src/client.py", 6, "PaymentsClient.post", QUERY, limit=6, skills=False)
        assert [QUERY] not in embedded  # the query's vector came from the cache ...
        assert again["cards"][0]["item_id"] == mem["id"]  # ... and the new memory is the first card
        # the cached vector is the model's own, bit for bit
        assert np.array_equal(real_engine.embed_cached([QUERY])[0], real_embed([QUERY])[0])
    finally:
        model.embed = real_embed
