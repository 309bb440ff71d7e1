"""Issue 22: after a change of the embedder setting the owner re-embeds the store once, from the stored text, by
model id: in committed chunks (an owner stopped midway resumes with what is left), never comparing a query with
another model's vectors meanwhile, never bringing back a vector of an item forgotten meanwhile; `mnemo reembed`
follows it. Real models: the float MiniLM export writes the store (what every store written before issue 22 holds),
its int8 export, the default since, takes it over."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import run_cli
from mnemo.core import engine as engine_mod
from mnemo.core.embedding.embedder import MODEL_ID, OnnxMiniLM, get_embedder
from mnemo.core.engine import Engine
from mnemo.core.memory.manage import forget
from mnemo.core.memory.write import remember
from mnemo.core.search import dense_search

NOTES = [f"{c} {v} {o}" for c, v, o in zip(
    ["payments API", "auth service", "billing worker", "search indexer", "web client", "mobile app", "CI pipeline",
     "database layer", "cache", "message queue", "feature flags", "admin panel"],
    ["requires", "must use", "should avoid", "relies on", "was migrated to", "breaks without", "caches",
     "retries with", "logs through", "validates with", "is tested with", "deploys via"],
    ["idempotency keys", "exponential backoff", "structured logging", "a read replica", "Redis", "Postgres 16",
     "JWT tokens", "pydantic models", "the blue-green deploy", "flag checks", "pytest fixtures", "signed URLs"],
    strict=True)]


@pytest.fixture(scope="module")
def int8_embedder():
    return OnnxMiniLM(quantized=True)


@pytest.fixture(scope="module")
def float_embedder():
    emb = get_embedder("onnx")
    assert emb.model_id == MODEL_ID
    return emb


def _write_float_store(home, float_embedder, ctx) -> list[str]:
    e = Engine(home, embedder=float_embedder, start_indexer=False)
    try:
        return [remember(e, ctx, t, on_conflict="keep_both")["memory"]["id"] for t in NOTES]
    finally:
        e.close()


def test_reembedding_resumes_and_never_mixes_models(home, float_embedder, int8_embedder, ctx, monkeypatch):
    ids = _write_float_store(home, float_embedder, ctx)
    parts = [f"p-{ctx.project_id}", "g"]
    monkeypatch.setattr(engine_mod, "REEMBED_CHUNK", 5)
    e = Engine(home, embedder=int8_embedder, start_indexer=False)
    try:
        q = e.embed_query("how do payment retries stay safe?")
        assert dense_search(e, parts, q, 10).scores == {}  # the float vectors are not compared with an int8 query
        new = remember(e, ctx, "the payments API retries with idempotency keys", on_conflict="keep_both")
        assert set(dense_search(e, parts, q, 10).scores) == {new["memory"]["id"]}
        forget(e, ctx, ids[-1])  # forgotten before the re-embedding reaches it
        real_embed = e.embed

        def stop_after_first_chunk(texts):
            e._stop.set()  # the owner is stopping: the first chunk lands, the rest waits for the next owner
            return real_embed(texts)

        monkeypatch.setattr(e, "embed", stop_after_first_chunk)
        e._reembed_foreign_vectors()
        assert e.reembed == {"model_id": int8_embedder.model_id, "done": 5, "total": len(NOTES) - 1,
                             "running": False}
        assert len(e.store.foreign_vectors(int8_embedder.model_id)) == len(NOTES) - 1 - 5
    finally:
        e.close()
    e = Engine(home, embedder=int8_embedder, start_indexer=False)
    try:
        e._reembed_foreign_vectors()
        assert e.reembed["done"] == e.reembed["total"] == len(NOTES) - 1 - 5
        assert e.store.foreign_vectors(int8_embedder.model_id) == []
        assert e.store.vectors([ids[-1]]) == {}  # not brought back
        stored = e.store.vectors(ids[:-1])
        for mem_id, text in zip(ids[:-1], NOTES[:-1], strict=True):
            got = np.frombuffer(stored[mem_id], dtype=np.float32)  # the text's own int8 vector, whatever its chunk
            assert np.array_equal(got, int8_embedder.embed([text])[0])
        q = e.embed_query("how do payment retries stay safe?")
        assert ids[0] in dense_search(e, parts, q, 5).scores
    finally:
        e.close()


@pytest.mark.parametrize("setting", ["default", "env"])
def test_mnemo_reembed_follows_the_owner(home, float_embedder, ctx, git_repo, setting):
    """A store written by the float model (every store before issue 22) is re-embedded to the int8 default at the
    next owner start with no setting at all; MNEMO_EMBEDDER=onnx-int8 does the same explicitly."""
    _write_float_store(home, float_embedder, ctx)
    env = {"MNEMO_EMBEDDER": "onnx-int8"} if setting == "env" else {"MNEMO_EMBEDDER": ""}
    try:
        r = run_cli("reembed", "--json", home=home, cwd=git_repo, env=env, timeout=300)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["model_id"].endswith("#int8")
        assert out["reembed"]["done"] == out["reembed"]["total"] == len(NOTES)
        assert out["index"]["ready"] and out["done"] is True
        r = run_cli("reembed", home=home, cwd=git_repo, env=env, timeout=120)
        assert r.returncode == 0 and f"re-embedded {len(NOTES)} of {len(NOTES)} items" in r.stdout, r.stdout
    finally:
        run_cli("daemon", "stop", home=home, cwd=git_repo, env=env)
