"""Learning from corrections: the detector on the issue's examples and hard negatives (real MiniLM), the memory it
files (kind feedback, pending under confirm, active under auto, the prompt as provenance), and "confirmed Nx"."""

from __future__ import annotations

import pytest

from mnemo.core.agent import corrections as cr
from mnemo.core.errors import InvalidInput
from mnemo.service import LocalService

LASTING = ["no, use pnpm, not npm", "always run ruff before committing", "don't mock the database in these tests",
           "From now on write commit messages in the imperative mood",
           "I prefer small focused commits over one big commit"]
ONE_OFF = ["don't worry about the tests for now", "no, I meant the other file", "use a set instead of a list here",
           "add a retry to the webhook sender", "should we always use pnpm here?", "never mind, revert that",
           "the cache should never grow beyond 100 entries, add a bound"]


@pytest.mark.parametrize("prompt", LASTING)
def test_lasting_corrections_and_preferences_are_detected(real_embedder, prompt):
    found = cr.detect(prompt, real_embedder)
    assert found and found[0].score >= cr.FITTED_THRESHOLD, cr.score_sentences(prompt, real_embedder)


@pytest.mark.parametrize("prompt", ONE_OFF)
def test_one_off_steering_requests_and_questions_are_not(real_embedder, prompt):
    assert cr.detect(prompt, real_embedder) == []


def test_the_memory_text_drops_the_lead_and_gets_a_type():
    assert cr.memory_text("no, use pnpm, not npm") == "Use pnpm, not npm."
    assert cr.memory_text("Nope — actually, tests go under tests/unit!") == "Tests go under tests/unit!"
    assert cr.memory_type("please keep your answers short unless I ask for detail") == "user"
    assert cr.memory_type("we use pnpm in this repo, not npm") == "project"


# The issue's examples and more negations: the learned note keeps "no / don't / never / stop / no need to".
NEGATIONS = {
    "no need to explain, just show the diff": "No need to explain, just show the diff.",
    "no docker compose v1 syntax please, it's `docker compose` now":
        "No docker compose v1 syntax please, it's `docker compose` now.",
    "No, no mocks for our own modules.": "No mocks for our own modules.",
    "I said no ORM for the reporting queries.": "No ORM for the reporting queries.",
    "nope, no print statements in library code, use the logger":
        "No print statements in library code, use the logger.",
    "no more lodash in new code, we use native array methods": "No more lodash in new code, we use native array methods.",
    "no don't write to stdout in the language server": "Don't write to stdout in the language server.",
    "hmm no, no need to ask before running the linter, just run it":
        "No need to ask before running the linter, just run it.",
    "actually no, no Optional[...] in new code, write X | None": "No Optional[...] in new code, write X | None.",
}


@pytest.mark.parametrize("prompt", sorted(NEGATIONS))
def test_a_learned_note_keeps_its_negation(prompt):
    """Only a conversational lead-in ("no, ", "actually ", "I said ") is dropped; a "no" that is the rule stays."""
    assert [cr.memory_text(s) for s in cr.sentences(prompt)][0] == NEGATIONS[prompt]


def test_the_issue_examples_are_learned_with_their_meaning(real_embedder):
    for prompt in list(NEGATIONS)[:2]:
        found = cr.detect(prompt, real_embedder)
        assert [c.text for c in found] == [NEGATIONS[prompt]], cr.score_sentences(prompt, real_embedder)


def test_only_the_sentence_that_states_the_rule_is_filed(real_embedder):
    found = cr.detect("Fix the flaky login test. Also, from now on always run the linter before you commit.",
                      real_embedder)
    assert [c.text for c in found] == ["From now on always run the linter before you commit."]


def test_a_bad_learn_setting_is_refused():
    assert cr.learn_mode(None) == "confirm"
    with pytest.raises(InvalidInput) as e:
        cr.learn_mode("sometimes")
    assert "MNEMO_LEARN_CORRECTIONS" in e.value.hint


def test_learned_corrections_wait_in_review_and_are_confirmed_not_copied(real_engine, ctx):
    svc = LocalService(real_engine)
    c = ctx.to_dict()
    first = svc.context(c, message="no, use pnpm, not npm", event="prompt", learn="confirm")["learned"]
    assert [(x["text"], x["memory_status"], x["type"]) for x in first] == [("Use pnpm, not npm.", "pending",
                                                                            "project")]
    mem = svc.get_memory(c, first[0]["id"])
    assert mem["kind"] == "feedback" and mem["provenance"]["learned_from"]["prompt"] == "no, use pnpm, not npm"
    review = svc.review_list(c)
    assert [i["item_id"] for i in review["items"] if i["kind"] == "pending"] == [first[0]["id"]]
    for prompt in ("No, use pnpm not npm!", "we use pnpm in this repo, not npm"):
        again = svc.context(c, message=prompt, event="prompt", learn="confirm")["learned"]
        assert again[0]["id"] == first[0]["id"] and again[0]["status"] == "confirmed"
    mem = svc.get_memory(c, first[0]["id"])
    assert mem["confirmations"] == 3 and len(mem["provenance"]["confirmed_by"]) == 2
    assert len([i for i in svc.review_list(c)["items"] if i["kind"] == "pending"]) == 1


def test_auto_files_them_active_and_off_files_nothing(real_engine, ctx):
    svc = LocalService(real_engine)
    c = ctx.to_dict()
    assert svc.context(c, message="always run ruff before committing", event="prompt", learn="off")["learned"] == []
    res = svc.context(c, message="always run ruff before committing", event="prompt", learn="auto")
    assert res["learned"][0]["memory_status"] == "active"
    assert "### Learned from this prompt" in res["markdown"] and "(active)" in res["markdown"]
    start = svc.context(c, event="session-start", session="next")["markdown"]
    assert "### Preferences and corrections learned earlier" in start and "Always run ruff" in start
