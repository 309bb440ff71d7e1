"""Activation: signals, combination, filters, explanations and the prompt block (plumbing with the hash embedder),
and relevance with the real model on the starter skills."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from mnemo.core.embedding.embedder import HashEmbedder
from mnemo.core.errors import InvalidInput
from mnemo.core.skills import ActivationConfig, SkillEngine, SkillRegistry, render_prompt_block
from mnemo.core.skills.vectors import VectorCache

REPO = Path(__file__).resolve().parents[2]


def write(p: Path, text: str) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "proj"
    write(root / "skills" / "docker.md", "---\nname: docker\ndescription: Containers and images.\n"
          "globs: '**/Dockerfile'\nkeywords: [docker, container, deploy]\n---\nUse multi-stage builds.")
    write(root / "skills" / "python.md", "---\nname: python\ndescription: Python code style.\nglobs: '**/*.py'\n"
          "---\nType hints everywhere.")
    write(root / "skills" / "catchall.md", "---\nname: everything\ndescription: Generic.\nglobs: '**'\n---\nGeneric.")
    write(root / ".cursor" / "rules" / "manual.mdc", "---\nalwaysApply: false\n---\nOnly when mentioned.")
    write(root / "AGENTS.md", "# Agents\nKeep answers short.")
    return root


@pytest.fixture
def engine(project) -> SkillEngine:
    return SkillEngine(SkillRegistry(project, use_user_dir=False), HashEmbedder())


def names(res):
    return [a.name for a in res.activations]


def test_glob_activation_and_explanation(engine):
    res = engine.activate("src/app/Dockerfile", None)
    act = {a.name: a for a in res.activations}
    assert "docker" in act and act["docker"].activated_by == ["glob"]
    assert act["docker"].matched["glob"] == "**/Dockerfile" and 0.85 < act["docker"].signals["glob"] <= 1.0
    assert "AGENTS.md" in act and act["AGENTS.md"].always and "always" in act["AGENTS.md"].activated_by
    assert "python" not in act
    assert act["docker"].token_cost > 0 and "matched src/app/Dockerfile" in act["docker"].reason
    # a catch-all glob is a weak signal: it does not activate on its own
    assert "everything" not in act
    assert any(d["name"] == "everything" for d in res.dropped)


def test_keyword_activation(engine):
    res = engine.activate(None, "please deploy the containers")
    a = next(a for a in res.activations if a.name == "docker")
    assert "keyword" in a.activated_by and set(a.matched["keywords"]) == {"deploy", "container"}
    assert a.signals["keyword"] == pytest.approx(0.75)


def test_absolute_and_relative_paths_agree(engine, project):
    r1 = engine.activate(str(project / "pkg" / "mod.py"), None)
    r2 = engine.activate("pkg/mod.py", None)
    assert "python" in names(r1) and names(r1) == names(r2)


def test_threshold_and_max_skills(engine):
    cfg = ActivationConfig(threshold=0.0, max_skills=1, include_always=False)
    res = engine.activate("a/Dockerfile", "deploy containers", config=cfg)
    assert names(res) == ["docker"]
    assert any("max_skills" in d["why"] for d in res.dropped)
    res = engine.activate("a/Dockerfile", None, config=ActivationConfig(threshold=1.0))
    assert names(res) == ["AGENTS.md"]  # always-apply rules do not need the threshold
    miss = next(d for d in res.dropped if d["name"] == "docker")  # why not: its probability and the threshold
    assert miss["threshold"] == 1.0 and 0.5 < miss["score"] < 1.0 and "< threshold 1.00" in miss["why"]
    assert engine.activate("a/Dockerfile", None, max_skills=0).names() == ["AGENTS.md"]
    assert res.to_dict()["threshold"] == 1.0


def test_one_probability_whatever_the_evidence(engine):
    """Glob, keyword and meaning land on one scale: the score is the model's probability, the same threshold
    applies to all of them, and the explanation lists each feature's share of the log-odds."""
    by_file = {a.name: a for a in engine.activate("a/Dockerfile", None).activations}["docker"]
    by_words = {a.name: a for a in engine.activate(None, "please deploy the containers").activations}["docker"]
    for a in (by_file, by_words):
        assert a.score == a.signals["probability"] >= engine.config.threshold
        assert a.matched["contributions"]
    assert "glob" in by_file.matched["contributions"] and "keyword" in by_words.matched["contributions"]


def test_manual_rule_only_by_name(engine):
    res = engine.activate(None, "Only when mentioned")
    assert "manual" not in names(res)
    res = engine.activate(None, "apply the manual rule here")
    assert "manual" in names(res)


def test_result_is_json_and_prompt_block(engine):
    res = engine.activate("a/Dockerfile", "deploy")
    d = json.loads(json.dumps(res.to_dict()))
    # what this file and request call for first, most likely first; the always-apply rules after
    assert [a["name"] for a in d["activations"]] == ["docker", "AGENTS.md"]
    assert all("body" not in a for a in d["activations"])
    block = render_prompt_block(res)
    assert block.startswith("## Active skills")
    assert "Use multi-stage builds." in block and "skills/docker.md" in block and "why:" in block
    small = render_prompt_block(res, token_budget=60)  # the least likely skill is left out first, and named
    assert "Dropped for the token budget" in small and "Use multi-stage builds." not in small
    assert "Keep answers short." in small and "skills/docker.md" in small
    empty = engine.activate(None, None, config=ActivationConfig(include_always=False))
    assert "No skills apply" in render_prompt_block(empty)


def test_body_fence_cannot_be_escaped(tmp_path):
    root = tmp_path / "p"
    write(root / "skills" / "x.md", "---\nname: x\nglobs: '**/*.x'\n---\n````\n## injected heading\n````")
    eng = SkillEngine(SkillRegistry(root, use_user_dir=False), HashEmbedder())
    block = render_prompt_block(eng.activate("a.x", None))
    assert "`````markdown" in block


def test_edits_take_effect_without_restart(engine, project):
    assert "python" not in names(engine.activate("x.go", None))
    f = project / "skills" / "python.md"
    f.write_text(f.read_text().replace("'**/*.py'", "'**/*.py, **/*.go'"))
    os.utime(f, (time.time() + 5, time.time() + 5))
    engine._last_refresh = 0
    assert "python" in names(engine.activate("x.go", None))


def test_invalid_inputs(engine):
    with pytest.raises(InvalidInput):
        engine.activate(None, 42)
    with pytest.raises(InvalidInput):
        engine.activate(None, "x", max_skills=-1)
    with pytest.raises(InvalidInput):
        ActivationConfig.from_dict({"nope": 1})
    assert ActivationConfig.from_dict({"threshold": "0.5"}).threshold == 0.5
    with pytest.raises(InvalidInput, match="between 0 and 1"):
        ActivationConfig.from_dict({"threshold": 1.5})
    with pytest.raises(InvalidInput, match="unknown activation model feature"):
        ActivationConfig.from_dict({"model": {"gloob": 1.0}})
    tuned = ActivationConfig.from_dict({"model": {"keyword": 0.0}})  # one coefficient changed, the rest kept
    assert tuned.model["keyword"] == 0.0 and tuned.model["cos_gap"] == ActivationConfig().model["cos_gap"]
    with pytest.raises(InvalidInput):
        engine.activate(None, "x", token_budget=-1)


def test_empty_registry(tmp_path):
    eng = SkillEngine(SkillRegistry(tmp_path, use_user_dir=False), HashEmbedder())
    res = eng.activate("a.py", "hello")
    assert res.activations == [] and res.considered == 0


def test_vector_cache_on_disk_avoids_re_embedding(project, tmp_path):
    class Counting(HashEmbedder):
        calls = 0

        def embed(self, texts):
            Counting.calls += len(texts)
            return super().embed(texts)

    cache = tmp_path / "vec.sqlite"
    SkillEngine(SkillRegistry(project, use_user_dir=False), Counting(), vector_cache=cache).warm()
    first = Counting.calls
    assert first > 0
    SkillEngine(SkillRegistry(project, use_user_dir=False), Counting(), vector_cache=VectorCache(cache)).warm()
    assert Counting.calls == first


# -- relevance with the real model ----------------------------------------------------------------------------

@pytest.fixture(scope="module", params=["onnx-int8", "onnx"])
def real_engine(request):
    """The int8 export is what skill activation uses (Engine.skill_embedder); the float model must agree."""
    from mnemo.core.embedding.embedder import get_embedder

    return SkillEngine(SkillRegistry(REPO, use_user_dir=False), get_embedder(request.param))


def test_starter_skills_docker_example(real_engine):
    res = real_engine.activate(str(REPO / "src" / "app" / "Dockerfile"), "deploy the containers to staging")
    top = res.activations[0]
    assert top.name == "docker"
    assert "glob" in top.activated_by and "keyword" in top.activated_by


@pytest.mark.parametrize("file,message,expected", [
    (None, "review this endpoint for sql injection and auth bypass", "security-review"),
    (None, "write a regression test for the flaky login test", "testing"),
    (None, "squash these commits and write a good commit message", "git-hygiene"),
    ("web/src/App.tsx", "the button state is duplicated", "typescript"),
    (None, "the nightly workflow keeps failing on the cache step", "github-actions"),
    (None, "add an index to speed up this slow query", "sql-database"),
])
def test_starter_skills_relevance(real_engine, file, message, expected):
    res = real_engine.activate(file, message)
    assert res.activations and res.activations[0].name == expected, res.to_dict()["activations"]


def test_unrelated_message_activates_nothing(real_engine):
    res = real_engine.activate(None, "what a lovely sunny afternoon")
    assert [a for a in res.activations if not a.always] == []


def test_more_specific_glob_wins(real_engine):
    res = real_engine.activate(str(REPO / "tests" / "unit" / "test_api.py"), None)
    assert res.names()[:2] == ["testing", "python"]
    assert res.activations[0].signals["glob_specificity"] > res.activations[1].signals["glob_specificity"]


def test_request_decides_among_many_same_glob_rules(tmp_path):
    root = tmp_path / "p"
    for i in range(12):
        write(root / ".cursor" / "rules" / f"r{i:02d}.mdc", f"---\ndescription: rule {i}\nglobs: **/*.tsx\n---\nbody {i}")
    write(root / ".cursor" / "rules" / "store.mdc", "---\ndescription: state\nglobs: **/*.js\n---\nstate rules")
    write(root / "skills" / "redux.md", "---\nname: redux\nkeywords: [redux, store]\n---\nUse RTK.")
    eng = SkillEngine(SkillRegistry(root, use_user_dir=False), HashEmbedder())
    no_msg = eng.activate("src/App.tsx", None)
    assert len(no_msg.activations) == 5 and "redux" not in no_msg.names()  # the file alone: 5 of the 12
    res = eng.activate("src/App.tsx", "fix the redux store")
    assert res.names()[0] == "redux"


# -- which embedder skill activation uses (Engine.skill_embedder) -------------------------------------------

def test_service_uses_the_int8_model_for_skills_and_keeps_others(home, ctx, real_embedder, hash_embedder,
                                                                  monkeypatch):
    from mnemo.core.embedding.embedder import MODEL_ID, MODEL_ID_INT8, get_embedder
    from mnemo.core.engine import Engine
    from mnemo.service import LocalService

    monkeypatch.delenv("MNEMO_SKILL_EMBEDDER", raising=False)
    monkeypatch.delenv("MNEMO_EMBEDDER", raising=False)
    real = Engine(home / "real", embedder=real_embedder)          # the default memory embedder: int8 (issue 22)
    floaty = Engine(home / "float", embedder=get_embedder("onnx"))
    fake = Engine(home / "hash", embedder=hash_embedder)
    try:
        assert real.model_id == MODEL_ID_INT8
        svc = LocalService(real)
        assert real.skill_embedder() is real_embedder            # one int8 session for memories and skills
        res = svc.activate_skills(ctx.to_dict(), file=str(REPO / "src" / "app" / "Dockerfile"),
                                  message="deploy the containers to staging")
        assert res["activations"][0]["name"] == "docker"
        monkeypatch.setenv("MNEMO_EMBEDDER", "onnx")                # memories on the float model: skills stay int8
        got = floaty.skill_embedder()
        assert got.model_id == MODEL_ID_INT8 and floaty.model_id == MODEL_ID
        monkeypatch.delenv("MNEMO_EMBEDDER")
        monkeypatch.setenv("MNEMO_SKILL_EMBEDDER", "same")
        assert real.skill_embedder() is real_embedder
        assert floaty.skill_embedder().model_id == MODEL_ID
        monkeypatch.delenv("MNEMO_SKILL_EMBEDDER")
        assert fake.skill_embedder() is hash_embedder  # plumbing tests keep their embedder
    finally:
        real.close()
        floaty.close()
        fake.close()


# -- one decision: multi-skill requests, meaning alone, the token budget, the editor's mirror --------------------

def test_request_that_needs_two_skills_activates_both(real_engine):
    res = real_engine.activate(None, "containerize the app and add a github actions workflow that builds the image")
    assert {"docker", "github-actions"} <= set(res.names()[:3]), res.to_dict()["activations"]


def test_description_only_skill_fires_from_meaning(real_engine, tmp_path):
    """A Claude skill (name and description, no globs, no keywords) activates from a request in other words
    next to the Dockerfile rule: the retired gap filter dropped it (0.425 < 0.5 x best)."""
    root = tmp_path / "p"
    write(root / ".claude" / "skills" / "deploy-k8s" / "SKILL.md",
          "---\nname: deploy-k8s\ndescription: Deploy services to Kubernetes with Helm. Use when deploying "
          "containers to staging or production clusters.\n---\nOne chart per service.")
    for f in (REPO / "skills").glob("*.md"):
        write(root / "skills" / f.name, f.read_text(encoding="utf-8"))
    eng = SkillEngine(SkillRegistry(root, use_user_dir=False), real_engine.embedder)
    res = eng.activate(str(root / "src" / "app" / "Dockerfile"), "deploy the containers to staging")
    assert res.names()[:2] == ["docker", "deploy-k8s"]
    k8s = res.activations[1]
    assert "glob" not in k8s.activated_by and k8s.score >= res.threshold
    quiet = eng.activate(None, "roll out the new version to the staging cluster")
    assert "deploy-k8s" in quiet.names()


def test_token_budget_drops_the_least_likely_first(tmp_path):
    root = tmp_path / "p"
    write(root / "skills" / "a.md", "---\nname: alpha\nglobs: '**/*.x'\nkeywords: [alpha, beta]\n---\n" + "a " * 800)
    write(root / "skills" / "b.md", "---\nname: bravo\nglobs: '**/*.x'\n---\n" + "b " * 800)
    write(root / "skills" / "c.md", "---\nname: charlie\nglobs: '**/*.x'\n---\nshort")
    eng = SkillEngine(SkillRegistry(root, use_user_dir=False), HashEmbedder())
    every = ActivationConfig(threshold=0.0)  # all three activate, with different probabilities
    res = eng.activate("f.x", "alpha beta", token_budget=500, config=every)
    by = {a.name: a for a in res.activations}
    assert set(by) == {"alpha", "bravo", "charlie"}
    assert by["alpha"].score > by["bravo"].score
    assert by["alpha"].injected and not by["bravo"].injected  # ... the less likely big one is left out
    assert [d["name"] for d in res.budget["dropped"]] == ["bravo"] and res.budget["used"] <= 500
    assert res.total_tokens == res.budget["used"]
    block = render_prompt_block(res)
    assert "Dropped for the token budget (500 tokens" in block and "- bravo" in block and "b b b" not in block
    assert eng.activate("f.x", "alpha beta", token_budget=0, config=every).budget == {}  # 0: no budget


def test_editor_settings_mirror_the_core_defaults():
    from mnemo.editor_settings import Settings

    core, editor = ActivationConfig(), Settings().skills
    assert (editor.max_active, editor.token_budget) == (core.max_skills, core.token_budget)
