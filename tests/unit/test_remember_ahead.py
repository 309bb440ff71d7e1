"""Issue 22, sixth pass: a `remember` embeds its note on the engine's helper thread while its own thread drafts it
(the secret scan, the checks) and looks for the same text. The vector stored is always the stored text's: a text
the draft changed (cleaned, a secret redacted) is embedded again; a failing model fails the write, nothing stored."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest

from mnemo.core.engine import Engine
from mnemo.core.errors import ModelError
from mnemo.core.memory import write


def _recording(monkeypatch) -> list[tuple[str, tuple[str, ...]]]:
    """Every `Engine.embed` call: (thread name, texts)."""
    calls: list[tuple[str, tuple[str, ...]]] = []
    real = Engine.embed

    def embed(self, texts):
        calls.append((threading.current_thread().name, tuple(texts)))
        return real(self, texts)

    monkeypatch.setattr(Engine, "embed", embed)
    return calls


def _stored_vector(engine: Engine, mem_id: str) -> np.ndarray:
    return np.frombuffer(engine.store.vectors([mem_id])[mem_id], dtype=np.float32)


def test_the_note_is_embedded_beside_its_draft_once(engine, ctx, monkeypatch):
    calls = _recording(monkeypatch)
    drafted_on: list[str] = []
    real_draft = write.draft

    def draft(*a, **kw):
        drafted_on.append(threading.current_thread().name)
        return real_draft(*a, **kw)

    monkeypatch.setattr(write, "draft", draft)
    text = "  the payments API requires idempotency keys on every POST  "
    res = write.remember(engine, ctx, text)
    assert res["status"] == "created"
    mine = [c for c in calls if text.strip() in c[1]]
    assert len(mine) == 1 and mine[0][0].startswith("mnemo-beside")  # once, and not on the caller's thread
    assert drafted_on == [threading.current_thread().name]
    stored = res["memory"]["text"]
    assert stored == text.strip()
    assert np.array_equal(_stored_vector(engine, res["memory"]["id"]), engine.embed([stored])[0])


@pytest.mark.parametrize("text, stored", [
    ("retries use\x07 exponential backoff", "retries use exponential backoff"),  # a control character cleaned
    ("deploys go out through the canary \u200bfirst", "deploys go out through the canary first"),  # an invisible one
])
def test_a_text_the_draft_changed_is_embedded_as_stored(engine, ctx, monkeypatch, text, stored):
    calls = _recording(monkeypatch)
    res = write.remember(engine, ctx, text)
    assert res["memory"]["text"] == stored
    assert (threading.current_thread().name, (stored,)) in calls  # embedded again, as stored, here
    assert np.array_equal(_stored_vector(engine, res["memory"]["id"]), engine.embed([stored])[0])


def test_a_redacted_secret_is_never_the_embedded_text_stored(engine, ctx, monkeypatch):
    calls = _recording(monkeypatch)
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    text = f"the deploy bot uses the token {secret} for releases"
    res = write.remember(engine, dataclasses.replace(ctx, secrets="redact"), text)
    stored = res["memory"]["text"]
    assert secret not in stored and "secret_redacted" in res["memory"]["flags"]
    assert (threading.current_thread().name, (stored,)) in calls  # the redacted text, embedded here
    assert np.array_equal(_stored_vector(engine, res["memory"]["id"]), engine.embed([stored])[0])


def _count(engine: Engine) -> int:
    return engine.store.conn().execute("SELECT COUNT(*) FROM memories").fetchone()[0]


def test_the_same_text_again_confirms_and_the_vector_made_ahead_is_dropped(engine, ctx):
    first = write.remember(engine, ctx, "the cache is warmed at deploy")
    again = write.remember(engine, ctx, "the cache is warmed at deploy")
    assert again["status"] == "confirmed" and again["memory"]["id"] == first["memory"]["id"]
    assert again["memory"]["confirmations"] == 2 and _count(engine) == 1


def test_a_model_failing_beside_fails_the_write_and_stores_nothing(engine, ctx, monkeypatch):
    failed_on: list[str] = []

    def broken(self, texts):
        failed_on.append(threading.current_thread().name)
        raise ModelError("the model failed")

    monkeypatch.setattr(Engine, "embed", broken)
    with pytest.raises(ModelError, match="the model failed"):
        write.remember(engine, ctx, "webhooks are verified with their signature")
    assert failed_on and failed_on[0].startswith("mnemo-beside")
    monkeypatch.undo()
    assert _count(engine) == 0


def test_a_busy_helper_thread_is_not_waited_for(engine, ctx, monkeypatch):
    """Another request's work holds the helper thread: the write embeds its note itself instead of queueing."""
    release = threading.Event()
    busy = engine.beside(release.wait, 10)
    calls = _recording(monkeypatch)
    try:
        res = write.remember(engine, ctx, "the scheduler runs jobs in UTC")
    finally:
        release.set()
    busy.result(timeout=10)
    assert res["status"] == "created"
    assert [c[0] for c in calls if c[1] == ("the scheduler runs jobs in UTC",)] == [threading.current_thread().name]
