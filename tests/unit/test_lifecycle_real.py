"""The write-time relation decision (core/relation/compare.py) with the real model (all-MiniLM-L6-v2) on realistic pairs:
contradictions conflict, paraphrases and refinements confirm, other facts about the same thing are stored."""

from __future__ import annotations

import pytest

from mnemo.core import lifecycle, review
from mnemo.core.memory.manage import list_memories, promote
from mnemo.core.memory.recall import recall
from mnemo.core.memory.write import remember
from mnemo.core.relation import compare as relation

CONFLICTS = [  # the same subject, another value: each pair must be caught
    ("The database is PostgreSQL 14", "The database is PostgreSQL 16"),  # a version
    ("The API timeout is 30 seconds", "The API timeout is 60 seconds"),  # a number
    ("The payments API requires idempotency keys on every POST",
     "The payments API does not require idempotency keys on POST requests"),  # a negation
    ("Always use double quotes for strings", "Always use single quotes for strings"),
    ("Indent Python code with spaces", "Indent Python code with tabs"),  # one of two alternatives
    ("Line length limit is 100 characters", "Line length limit is 120 characters"),
    ("We use pytest for tests", "We use unittest for tests"),  # another tool for the same job (cosine 0.57)
    ("Use dayjs for dates in the frontend", "Use date-fns for dates in the frontend"),  # a tool no list knows
    ("Orders use optimistic locking", "Orders use pessimistic locking"),  # an opposite no list knows
]
SAME_CLAIM = [  # a paraphrase: a confirmation, not a conflict (issue 13, item 6)
    ("payments API requires idempotency keys on every POST",
     "the payments API requires an idempotency key on every POST request"),
    ("Database migrations are managed with Alembic", "We manage DB migrations with Alembic"),
    ("Never commit .env files; they hold local credentials",
     ".env files contain local credentials and must never be committed"),
]
UNRELATED = [  # different subjects: never a conflict, never a confirmation
    ("The frontend is written in React", "The database is PostgreSQL 16"),
    ("FastAPI backend", "OAuth2 with PKCE for mobile clients"),
    ("payments API requires idempotency keys on every POST", "Run the tests with `bash .ci/run`"),
    ("The CI runs on GitHub Actions", "Logging uses structlog with JSON output"),
    ("Retry failed webhooks up to 5 times", "Retry failed emails up to 3 times"),  # a number and the subject
]


@pytest.mark.parametrize("old,new", CONFLICTS)
def test_realistic_contradictions_are_conflicts(real_engine, ctx, old, new):
    first = remember(real_engine, ctx, old)["memory"]
    r = remember(real_engine, ctx, new)
    assert r["status"] == "conflict", r
    assert r["conflicts"][0]["id"] == first["id"] and r["conflicts"][0]["reasons"]


@pytest.mark.parametrize("old,new", SAME_CLAIM)
def test_paraphrases_confirm_instead_of_conflicting(real_engine, ctx, old, new):
    """Failed before: the issue's paraphrase went to Review as a conflict (cosine >= 0.80, another hash)."""
    first = remember(real_engine, ctx, old)["memory"]
    r = remember(real_engine, ctx, new)
    assert r["status"] == "confirmed" and r["memory"]["id"] == first["id"], r
    assert "confirmed 2x" in r["message"] and r["same_as"]["id"] == first["id"]
    assert list_memories(real_engine, ctx)["total"] == 1
    assert review.review_list(real_engine, ctx)["total"] == 0


def test_a_refinement_confirms_and_keeps_the_more_detailed_text(real_engine, ctx):
    old = remember(real_engine, ctx, "Retry failed webhook deliveries")["memory"]
    new = "Retry failed webhook deliveries up to 5 times with exponential backoff"
    r = remember(real_engine, ctx, new)
    assert r["status"] == "confirmed" and r["same_as"]["refines"], r
    assert r["memory"]["text"] == new and r["memory"]["confirmations"] == 2
    assert real_engine.store.get_memory(old["id"]).superseded_by == r["memory"]["id"]  # kept in history
    assert [m["id"] for m in list_memories(real_engine, ctx)["memories"]] == [r["memory"]["id"]]


@pytest.mark.parametrize("old,new", UNRELATED)
def test_unrelated_pairs_are_not_conflicts(real_engine, ctx, old, new):
    remember(real_engine, ctx, old)
    r = remember(real_engine, ctx, new)
    assert r["status"] == "created" and r["conflicts"] == []


def test_similarity_is_the_cosine_of_the_real_vectors(real_engine, ctx):
    a, b = CONFLICTS[0]
    va, vb = real_engine.embed([a, b])
    remember(real_engine, ctx, a)
    mem = remember(real_engine, ctx, b)["conflicts"][0]
    assert mem["similarity"] == pytest.approx(float(va @ vb), abs=1e-4)
    assert lifecycle.settings().conflict_threshold == relation.SIGNAL_MIN_COSINE


def test_a_more_specific_contradiction_is_still_an_override(real_engine, ctx):
    g = remember(real_engine, ctx, "Indent Python code with spaces")["memory"]
    promote(real_engine, ctx, g["id"])
    r = remember(real_engine, ctx, "Indent Python code with tabs")
    assert r["status"] == "created" and [c["relation"] for c in r["conflicts"]] == ["override"]
    cards = recall(real_engine, ctx, "indent python code", include_docs=False)["cards"]
    assert [c["item_id"] for c in cards] == [r["memory"]["id"]]


def test_a_paraphrase_of_a_global_note_confirms_it(real_engine, ctx):
    g = remember(real_engine, ctx, "Database migrations are managed with Alembic")["memory"]
    promote(real_engine, ctx, g["id"])
    r = remember(real_engine, ctx, "We manage DB migrations with Alembic")
    assert r["status"] == "confirmed" and r["memory"]["id"] == g["id"] and r["memory"]["confirmations"] == 2
