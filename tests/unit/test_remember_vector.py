"""The vector a `remember` stores is always the stored text's: a text the draft changed (a control or invisible
character cleaned, a secret redacted) is embedded as stored, never as sent; the same text again confirms. (Issue 22,
sixth pass, tried embedding the note on the helper thread while it was drafted and measured it slower through a
real owner at 10k (docs/benchmarks.md): these checks hold whichever thread embeds.)"""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest

from mnemo.core.engine import Engine
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


@pytest.mark.parametrize("text, stored", [
    ("retries use\x07 exponential backoff", "retries use exponential backoff"),  # a control character cleaned
    ("deploys go out through the canary \u200bfirst", "deploys go out through the canary first"),  # an invisible one
])
def test_a_text_the_draft_changed_is_embedded_as_stored(engine, ctx, monkeypatch, text, stored):
    calls = _recording(monkeypatch)
    res = write.remember(engine, ctx, text)
    assert res["memory"]["text"] == stored
    assert (threading.current_thread().name, (stored,)) in calls  # embedded as stored
    assert np.array_equal(_stored_vector(engine, res["memory"]["id"]), engine.embed([stored])[0])


def test_a_redacted_secret_is_never_the_embedded_text_stored(engine, ctx, monkeypatch):
    calls = _recording(monkeypatch)
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    text = f"the deploy bot uses the token {secret} for releases"
    res = write.remember(engine, dataclasses.replace(ctx, secrets="redact"), text)
    stored = res["memory"]["text"]
    assert secret not in stored and "secret_redacted" in res["memory"]["flags"]
    assert (threading.current_thread().name, (stored,)) in calls  # the redacted text, as stored
    assert np.array_equal(_stored_vector(engine, res["memory"]["id"]), engine.embed([stored])[0])


def _count(engine: Engine) -> int:
    return engine.store.conn().execute("SELECT COUNT(*) FROM memories").fetchone()[0]


def test_the_same_text_again_confirms(engine, ctx):
    first = write.remember(engine, ctx, "the cache is warmed at deploy")
    again = write.remember(engine, ctx, "the cache is warmed at deploy")
    assert again["status"] == "confirmed" and again["memory"]["id"] == first["memory"]["id"]
    assert again["memory"]["confirmations"] == 2 and _count(engine) == 1
