"""The conflict threshold (cosine >= 0.80) with the real model (all-MiniLM-L6-v2) on realistic pairs."""

from __future__ import annotations

import pytest

from mnemo.core import lifecycle

CONFLICTS = [  # the same subject, a different value: each pair must be caught
    ("The database is PostgreSQL 14", "The database is PostgreSQL 16"),
    ("The API timeout is 30 seconds", "The API timeout is 60 seconds"),
    ("The payments API requires idempotency keys on every POST",
     "The payments API does not require idempotency keys on POST requests"),
    ("Always use double quotes for strings", "Always use single quotes for strings"),
    ("Line length limit is 100 characters", "Line length limit is 120 characters"),
]
UNRELATED = [  # different subjects: never a conflict
    ("The frontend is written in React", "The database is PostgreSQL 16"),
    ("FastAPI backend", "OAuth2 with PKCE for mobile clients"),
    ("payments API requires idempotency keys on every POST", "Run the tests with `bash .ci/run`"),
    ("The CI runs on GitHub Actions", "Logging uses structlog with JSON output"),
    ("We use pytest for tests", "We use unittest for tests"),  # 0.57: related, but below the threshold
]


@pytest.mark.parametrize("old,new", CONFLICTS)
def test_realistic_contradictions_are_conflicts(real_engine, ctx, old, new):
    first = real_engine.remember(ctx, old)["memory"]
    r = real_engine.remember(ctx, new)
    assert r["status"] == "conflict", r
    assert r["conflicts"][0]["id"] == first["id"] and r["conflicts"][0]["similarity"] >= 0.80


@pytest.mark.parametrize("old,new", UNRELATED)
def test_unrelated_pairs_are_not_conflicts(real_engine, ctx, old, new):
    real_engine.remember(ctx, old)
    r = real_engine.remember(ctx, new)
    assert r["status"] == "created" and r["conflicts"] == []


def test_similarity_is_the_cosine_of_the_real_vectors(real_engine, ctx):
    a, b = CONFLICTS[0]
    va, vb = real_engine.embed([a, b])
    real_engine.remember(ctx, a)
    mem = real_engine.remember(ctx, b)["conflicts"][0]
    assert mem["similarity"] == pytest.approx(float(va @ vb), abs=1e-4)
    assert lifecycle.settings().conflict_threshold == 0.80
