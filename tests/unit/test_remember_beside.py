"""A single `remember`'s work beside the note's embedding (issue 22, ninth pass): what the neighbour search reads
besides the vector (the change-log rows after the vector file, the items they name and their rows, the tail's
matrix) is made in the engine's helper thread while the write's thread embeds the note, and the search finds it made.
The decisions are the ones the sequential path makes (`bench/write_equivalence.py` compares whole stores). Real
model, real store, a real vector file with writes after it."""

from __future__ import annotations

import threading
import time

import pytest

from mnemo.core.engine import Engine
from mnemo.core.indexes.vector_file import VectorFile
from mnemo.core.memory.write import remember

NOTES = ["payments API requires idempotency keys on every POST", "Run the tests with pytest -x from the repo root",
         "The frontend is built with Vite", "Deploys go through Argo CD", "Use structlog for logging",
         "The cache TTL is 5 minutes for session tokens", "Retries use exponential backoff capped at 30 seconds",
         "Database migrations run with alembic upgrade head"]
CONFLICTING = "The cache TTL is 10 minutes for session tokens"


@pytest.fixture
def engine(home, real_embedder):
    eng = Engine(home, embedder=real_embedder, start_indexer=False)
    yield eng
    eng.close()


def _store_with_a_tail(engine, ctx) -> dict[str, str]:
    """The notes, a vector file of all but the last two, and those two written after it (the tail)."""
    ids = {}
    for text in NOTES[:-2]:
        ids[text] = remember(engine, ctx, text, on_conflict="keep_both")["memory"]["id"]
    engine.vector_file().write()
    for text in NOTES[-2:]:
        ids[text] = remember(engine, ctx, text, on_conflict="keep_both")["memory"]["id"]
    assert engine.vector_file().matrix() is not None
    return ids


def _threads_of(monkeypatch, *names: str) -> list[tuple[str, str]]:
    """(method, thread name) of each call of these `VectorFile` methods, from now on."""
    calls: list[tuple[str, str]] = []
    for name in names:
        real = getattr(VectorFile, name)

        def spy(self, *a, _real=real, _name=name, **kw):
            calls.append((_name, threading.current_thread().name))
            return _real(self, *a, **kw)

        monkeypatch.setattr(VectorFile, name, spy)
    return calls


def _embed_slowly(engine, monkeypatch) -> None:
    """The helper thread surely starts before the embedding ends (a loaded box may not schedule it within a short
    embedding, and then the search does the work itself: the busy-helper test)."""
    real = engine.embed

    def slow(texts):
        time.sleep(0.05)
        return real(texts)

    monkeypatch.setattr(engine, "embed", slow)


def test_the_neighbour_search_is_prepared_in_the_helper_thread(engine, ctx, monkeypatch):
    """Failed before: the write's own thread read the change log and made the tail's matrix after the embedding."""
    ids = _store_with_a_tail(engine, ctx)
    calls = _threads_of(monkeypatch, "prepare", "_tail_matrix", "_tail_extended")
    _embed_slowly(engine, monkeypatch)
    res = remember(engine, ctx, CONFLICTING, on_conflict="review")
    assert res["status"] == "conflict", res
    assert [c["id"] for c in res["conflicts"]] == [ids["The cache TTL is 5 minutes for session tokens"]]
    assert calls and calls[0][0] == "prepare", calls
    # the tail's matrix was made beside the embedding; the search found it made (none made in this thread)
    assert all(thread.startswith("mnemo-beside") for _name, thread in calls), calls


def test_a_busy_helper_thread_is_not_waited_for(engine, ctx, monkeypatch):
    """Another request's work holds the helper thread: the write does not wait for it; its search makes what it
    reads itself, the same decision."""
    ids = _store_with_a_tail(engine, ctx)
    calls = _threads_of(monkeypatch, "prepare", "_tail_matrix", "_tail_extended")
    release = threading.Event()
    busy = engine.beside(release.wait, 10)
    try:
        t0 = time.perf_counter()
        res = remember(engine, ctx, CONFLICTING, on_conflict="review")
        took = time.perf_counter() - t0
    finally:
        release.set()
    busy.result(timeout=10)
    assert took < 5 and res["status"] == "conflict", (took, res)
    assert [c["id"] for c in res["conflicts"]] == [ids["The cache TTL is 5 minutes for session tokens"]]
    assert calls and all(name != "prepare" for name, _thread in calls), calls  # cancelled before it started
    assert all(thread == threading.current_thread().name for _name, thread in calls), calls


def test_a_failed_preparation_is_not_the_writes_failure(engine, ctx, monkeypatch):
    """Whatever fails in the helper thread is met again by the search itself, which reports it or, as here, finds
    nothing wrong: the write lands with its decision."""
    ids = _store_with_a_tail(engine, ctx)
    _embed_slowly(engine, monkeypatch)

    def broken(self, *a, **kw):
        raise RuntimeError("the helper's copy of the change log is gone")

    monkeypatch.setattr(VectorFile, "prepare", broken)
    res = remember(engine, ctx, CONFLICTING, on_conflict="review")
    assert res["status"] == "conflict", res
    assert [c["id"] for c in res["conflicts"]] == [ids["The cache TTL is 5 minutes for session tokens"]]
    # and a write with nothing near it lands as created
    assert remember(engine, ctx, "The mobile app is written in Kotlin")["status"] == "created"


def test_with_the_ann_index_answering_the_tail_it_has_not_seen_is_prepared(home, real_embedder, ctx, monkeypatch):
    """Where chroma's index answers (no vector file, `ann_min_rows` 0 as in every test here), the helper thread
    makes the matrix of the change-log rows the index has not replayed yet, for those rows."""
    monkeypatch.setenv("MNEMO_ANN_MIN_ROWS", "0")
    eng = Engine(home, embedder=real_embedder)
    try:
        ids = {text: remember(eng, ctx, text, on_conflict="keep_both")["memory"]["id"] for text in NOTES}
        deadline = time.monotonic() + 60
        while not (eng.index is not None and eng.index.ready and eng.index.indexed_seq >= eng.store.max_seq()) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        assert eng.index is not None and eng.index.ready
        assert eng.vector_file().matrix() is None  # the index answers
        prepared: list[tuple[int, str]] = []
        real_prepare = VectorFile.prepare

        def spy(self, parts, tail=None):
            prepared.append((-1 if tail is None else len(tail), threading.current_thread().name))
            return real_prepare(self, parts, tail)

        monkeypatch.setattr(VectorFile, "prepare", spy)
        _embed_slowly(eng, monkeypatch)
        res = remember(eng, ctx, CONFLICTING, on_conflict="review")
        assert res["status"] == "conflict", res
        assert [c["id"] for c in res["conflicts"]] == [ids["The cache TTL is 5 minutes for session tokens"]]
        assert len(prepared) == 1 and prepared[0][0] >= 0 and prepared[0][1].startswith("mnemo-beside"), prepared
    finally:
        eng.close()
