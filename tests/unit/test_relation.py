"""core/relation/compare.py beyond its lists: the replaced slot, opposites by form, swapped order, negations in other words,
and the learned conflict model, with the real model (all-MiniLM-L6-v2) where an embedding is involved."""

from __future__ import annotations

import math

import pytest

from mnemo.core.relation import compare as relation


def decide(real_embedder, old: str, new: str) -> relation.Decision:
    va, vb = real_embedder.embed([old, new])
    return relation.decide(old, new, float(va @ vb), real_embedder.embed, relation.vocabulary_of(real_embedder))


# Each was decided "distinct" by the rules with hand lists (no list knew the words): now a conflict.
UNLISTED = [
    ("Use dayjs for dates in the frontend", "Use date-fns for dates in the frontend"),  # tools nobody listed
    ("Orders use optimistic locking", "Orders use pessimistic locking"),  # an opposite nobody listed
    ("The public site is built with Astro", "The public site is built with Next.js"),
    ("The price field is read-only in the admin API", "The price field is read-write in the admin API"),
    ("Prefer Postgres arrays over join tables for tags", "Prefer join tables over Postgres arrays for tags"),
]


@pytest.mark.parametrize("old,new", UNLISTED)
def test_an_unlisted_alternative_in_the_same_slot_is_a_conflict(real_embedder, old, new):
    d = decide(real_embedder, old, new)
    assert d.relation == "conflict" and d.reasons and d.score is not None and d.score >= relation.MODEL.threshold


@pytest.mark.parametrize("old,new", [
    # another subject AND another value: another fact
    ("Retry failed webhooks up to 5 times", "Retry failed emails up to 3 times"),
    # another command for another task
    ("Start the dev server with `npm run dev`", "Build the production bundle with `npm run build`"),
    ("Each PR needs one approval", "Each PR needs a linked ticket"),  # two words replaced, nothing alike
])
def test_another_fact_in_the_same_frame_is_not_a_conflict(real_embedder, old, new):
    assert decide(real_embedder, old, new).relation != "conflict"


@pytest.mark.parametrize("old,new", [
    # a negation said with other words: "disabled", "outside", "out of" are negations of their own
    ("The bastion host does not accept password logins", "Password logins are disabled on the bastion host"),
    ("Test accounts are excluded from the revenue reports", "Revenue reports leave out test accounts"),
    # "a two-pane design" / "two panes" is a rewording, not a replaced slot
    ("Tablet layouts use a two-pane design", "On tablets the layout has two panes"),
])
def test_a_paraphrase_in_other_words_is_not_a_conflict(real_embedder, old, new):
    assert decide(real_embedder, old, new).relation != "conflict"


def test_features_name_the_slot_the_opposite_and_the_order():
    f = relation.features("Orders use optimistic locking", "Orders use pessimistic locking", 0.9)
    assert f.slot == ("optimistic", "pessimistic") and not f.signals
    f = relation.features("Search input is debounced", "Search input is throttled", 0.9)
    assert f.slot == ("debounced", "throttled")
    assert relation.features("Users are hard-deleted", "Users are soft-deleted", 0.9).opposite
    assert relation.features("Commit signed tags", "Commit unsigned tags", 0.9).opposite
    assert relation.features("Prefer tabs over spaces here", "Prefer spaces over tabs here", 0.9).reordered
    # a word that merely ends like another is no opposite
    assert not relation.features("Generated code is committed", "Generated code is formatted", 0.9).opposite
    # "24 hours" is "one day": no number changed
    assert not relation.features("Keys are kept for 24 hours", "We store keys for one day", 0.9).signals


def test_a_pair_without_any_cue_never_asks_the_model():
    f = relation.features("The React components are written in TypeScript", "Our React components use TypeScript",
                          0.92)
    assert not relation.has_cue(f)
    assert relation.classify(f, 0.92, None).relation == "duplicate"


def test_the_model_is_whole_and_documented():
    assert len(relation.MODEL.weights) == len(relation.FEATURES)
    assert all(math.isfinite(w) for w in relation.MODEL.weights) and 0 < relation.MODEL.threshold < 1
    f = relation.features("The API timeout is 30 seconds", "The API timeout is 60 seconds", 0.95)
    x = relation.vector(f)
    assert len(x) == len(relation.FEATURES) and relation.conflict_probability(x) > 0.9


def test_same_claim_refuses_a_replaced_slot_without_embedding_anything():
    """Compaction and team recall use same_claim: a pair with any contradiction cue is never the same claim."""
    assert not relation.same_claim("Use dayjs for dates in the frontend", "Use date-fns for dates in the frontend",
                                   0.95)
    assert relation.same_claim("Database migrations are managed with Alembic", "We manage DB migrations with Alembic",
                               0.93)


@pytest.mark.parametrize("old,new", [
    ("All containers run as a non-root user", "No container runs as root"),  # "non-" is a negation
    ("The warehouse is refreshed every night at 3 AM UTC", "Every night at 03:00 UTC the warehouse gets refreshed"),
    ("Raw event data is kept in the data lake for one year", "We retain raw events in the lake for 12 months"),
    ("Feature flags expire after 90 days", "Feature flags expire after three months"),
    ("Incidents get a postmortem within five business days",
     "A postmortem is written for every incident no later than 5 business days after it"),
])
def test_the_same_value_or_negation_written_another_way_is_no_signal(old, new):
    assert relation.features(old, new, 0.9).signals == []


@pytest.mark.parametrize("old,new", [
    ("Containers run as a non-root user", "Containers run as root"),
    ("The ETL runs nightly at 02:00 UTC", "The ETL runs nightly at 4 AM UTC"),
    ("Log retention is 30 days", "Log retention is 90 days"),
])
def test_a_changed_value_or_negation_written_another_way_is_a_signal(old, new):
    assert relation.features(old, new, 0.9).signals


def test_two_replaced_slots_are_never_the_same_claim():
    """Another team on another day: close (cosine 0.87), but never folded into a confirmation."""
    f = relation.features("The frontend team deploys on Mondays", "The backend team deploys on Wednesdays", 0.87)
    assert f.two_slots and relation.classify(f, 0.87, None).relation == "distinct"
    assert not relation.same_claim("The frontend team deploys on Mondays", "The backend team deploys on Wednesdays",
                                   0.87)


def test_word_forms_units_and_shared_names_are_read_right():
    # "merge" (a listed alternative) and "merges" are one word: nothing is replaced
    f = relation.features("Don't merge to main on Friday afternoons", "No merges into main on Friday afternoon", 0.82)
    assert f.slot is None and f.diff_words == 0
    # a shared name is no rewording: the slot stays
    f = relation.features("The desktop app is packaged with electron-builder",
                          "The desktop app is packaged with Electron Forge", 0.87)
    assert f.slot == ("electron-builder", "electron forge") and f.slot_after_preposition
    # the units of two counts keyed by the same word are not explained by the number change: another subject
    f = relation.features("The search index has 3 shards", "The search index has 2 replicas", 0.77)
    assert f.signals and not {"shard", "replica"} & f.explained


def difflib_diff(a, b) -> list[tuple[str, int, int, int, int]]:
    """The word diff `compare._diff` must give: the common beginning and end cut off, difflib's opcodes of the
    middles (the "equal" ones left out). Also the reference of tests/unit/test_bulk_caller.py."""
    import difflib

    lo = 0
    while lo < len(a) and lo < len(b) and a[lo] == b[lo]:
        lo += 1
    hi = 0
    while hi < len(a) - lo and hi < len(b) - lo and a[-1 - hi] == b[-1 - hi]:
        hi += 1
    sm = difflib.SequenceMatcher(a=a[lo:len(a) - hi], b=b[lo:len(b) - hi], autojunk=False)
    return [(op, i1 + lo, i2 + lo, j1 + lo, j2 + lo) for op, i1, i2, j1, j2 in sm.get_opcodes() if op != "equal"]


def test_the_word_alignment_is_difflibs():
    """`_diff` answers without difflib when the differing middles share no word (issue 22, fourth pass): the same
    opcodes as difflib's on every pair of short word sequences."""
    import random

    from mnemo.core.relation.compare import _diff

    rng = random.Random(7)
    for _ in range(20000):
        words = "abcdefgh"[:rng.randint(1, 8)]
        a = tuple(rng.choice(words) for _ in range(rng.randint(0, 10)))
        b = tuple(rng.choice(words) for _ in range(rng.randint(0, 10)))
        assert _diff(a, b) == difflib_diff(a, b), (a, b)
