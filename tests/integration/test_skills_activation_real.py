"""Skill activation as a user meets it, with the real model: the README's example next to a Claude skill, and a
repository holding a real collection of description-only skills (wshobson/agents, ../shared/data)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from conftest import run_cli, shared_data

DEPLOY_K8S = ("---\nname: deploy-k8s\ndescription: Deploy services to Kubernetes with Helm. Use when deploying "
              "containers to staging or production clusters.\n---\n# Deploy to Kubernetes\n\n- One Helm chart per "
              "service, values per environment.\n- `helm upgrade --install --atomic`; roll back on a failed probe.\n")


def test_readme_example_activates_docker_and_the_claude_skill(tmp_path):
    """`mnemo skills activate --file src/app/Dockerfile --message "deploy the containers to staging"` in a
    repository with a deploy-k8s Claude skill: both apply, both activate (the retired gap filter dropped the
    second one)."""
    repo = tmp_path / "repo"
    (repo / ".claude" / "skills" / "deploy-k8s").mkdir(parents=True)
    (repo / ".claude" / "skills" / "deploy-k8s" / "SKILL.md").write_text(DEPLOY_K8S, encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    res = run_cli("skills", "activate", "--file", "src/app/Dockerfile", "--message", "deploy the containers to staging",
                  "--json", home=tmp_path / "home", cwd=repo, env={"MNEMO_NO_DAEMON": "1", "HF_HUB_OFFLINE": "1"})
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    names = [a["name"] for a in out["activations"]]
    assert names[:2] == ["docker", "deploy-k8s"], out["activations"]
    k8s = out["activations"][1]
    assert k8s["source_format"] == "claude-skill" and "glob" not in k8s["activated_by"]  # from meaning alone
    assert k8s["score"] >= out["threshold"] and "deploy-k8s" in out["prompt_block"]


DOCKER_INSTRUCTIONS = ('---\napplyTo: "**/Dockerfile"\ndescription: Dockerfile conventions\n---\n# Dockerfiles\n'
                       "- Base images: `python:3.11-slim`, pinned by digest.\n")


def _activate(tmp_path, *args: str) -> dict:
    repo = tmp_path / "repo"
    (repo / ".github" / "instructions").mkdir(parents=True, exist_ok=True)
    (repo / ".github" / "instructions" / "docker.instructions.md").write_text(DOCKER_INSTRUCTIONS, encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    res = run_cli("skills", "activate", *args, "--json", home=tmp_path / "home", cwd=repo,
                  env={"MNEMO_NO_DAEMON": "1", "HF_HUB_OFFLINE": "1"})
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_a_short_request_in_a_globbed_file_activates_the_file_s_skills(tmp_path):
    """CI on main: `--file Dockerfile --message "add a healthcheck"` activated nothing (the docker starter skill at
    p=0.13 < 0.14, the Copilot `applyTo: **/Dockerfile` instruction lower): the request was too short for meaning
    to choose, and it vetoed the file. A request that chooses no skill now leaves the decision to the file, as
    Copilot's applyTo and Cursor's auto-attached rules do."""
    out = _activate(tmp_path, "--file", "Dockerfile", "--message", "add a healthcheck")
    acts = out["activations"]
    assert {(a["name"], a["source_format"]) for a in acts} == {("docker", "copilot")}, out
    # the starter `docker` skill yields to the project's own rule for the same files (issue 20), visibly
    assert any(d["name"] == "docker" and d["why"] == "yields to the project's `docker` rule (same files)"
               for d in out["dropped"]), out["dropped"]
    for a in acts:
        assert a["activated_by"] == ["glob"] and "the file decides" in a["reason"]
        assert "the request decides" not in a["reason"] and a["score"] >= out["threshold"]
    assert "python:3.11-slim" in out["prompt_block"]


def test_a_request_that_chooses_another_skill_keeps_the_decision(tmp_path):
    """The file decides only when the request chose nothing: a CI request in a Dockerfile activates the CI skill
    from its meaning, and the message's own decision stands (no "file decides" fallback)."""
    out = _activate(tmp_path, "--file", "Dockerfile", "--message",
                    "the github actions workflow prints secrets in its logs")
    names = [a["name"] for a in out["activations"]]
    assert "github-actions" in names, out
    assert not any("the file decides" in a["reason"] for a in out["activations"])


@pytest.fixture(scope="module")
def wshobson(tmp_path_factory):
    src = shared_data("skills", "wshobson_skills")
    from mnemo.core.embedding.embedder import get_embedder
    from mnemo.core.skills import SkillEngine, SkillRegistry

    repo = tmp_path_factory.mktemp("wshobson")
    for f in src.rglob("SKILL.md"):  # where Claude Code keeps them: .claude/skills/<name>/SKILL.md
        dest = repo / ".claude" / "skills" / f.parent.name / "SKILL.md"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, dest)
    reg = SkillRegistry(repo, use_user_dir=False, include_builtin=True)  # as the service loads a project
    assert len([s for s in reg.load().skills if s.source_format == "claude-skill"]) >= 150
    return SkillEngine(reg, get_embedder("onnx-int8"))


@pytest.mark.shared_data
@pytest.mark.parametrize("message,expected", [
    ("my goroutines leak when the client disconnects, how do I cancel them", "go-concurrency-patterns"),
    ("set up a helm chart for our api with per-environment values", "helm-chart-scaffolding"),
    ("write a blameless postmortem for yesterday's outage", "postmortem-writing"),
    ("add stripe checkout and handle subscription webhooks", "stripe-integration"),
    ("our postgres query is slow and EXPLAIN shows a sequential scan", "sql-optimization-patterns"),
])
def test_description_only_skills_fire_from_natural_requests(wshobson, message, expected):
    res = wshobson.activate(None, message)
    top = [a.name for a in res.activations if not a.always][:3]
    assert expected in top, (top, res.dropped[:3])
    act = next(a for a in res.activations if a.name == expected)
    assert act.source_format == "claude-skill" and "glob" not in act.activated_by


@pytest.mark.shared_data
@pytest.mark.parametrize("message", [
    "write a haiku about autumn", "what's a good salary offer?", "recommend a restaurant for a date night",
    "how tall is the Eiffel tower", "tell me a joke about cats",
])
def test_unrelated_requests_activate_nothing(wshobson, message):
    res = wshobson.activate(None, message)
    assert [a.name for a in res.activations if not a.always] == []
    assert res.dropped and all(d["score"] < d["threshold"] for d in res.dropped)  # why not: below the threshold


@pytest.fixture(scope="module")
def metatool(tmp_path_factory):
    """MetaTool's 199 tools as the skills of a project (name and description only) and its awareness records."""
    import yaml

    from mnemo.core.embedding.embedder import get_embedder
    from mnemo.core.skills import SkillEngine, SkillRegistry

    tools = json.loads(shared_data("metatool", "plugin_des.json").read_text(encoding="utf-8"))
    records = {}
    for line in shared_data("metatool", "awareness.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        records[r["id"]] = r
    repo = tmp_path_factory.mktemp("metatool")
    for name, desc in tools.items():
        head = yaml.safe_dump({"name": name, "description": desc}, sort_keys=False, allow_unicode=True)
        (repo / ".mnemo" / "skills").mkdir(parents=True, exist_ok=True)
        (repo / ".mnemo" / "skills" / f"{name}.md").write_text(f"---\n{head}---\n", encoding="utf-8")
    return SkillEngine(SkillRegistry(repo, use_user_dir=False), get_embedder("onnx-int8")), records


@pytest.mark.shared_data
@pytest.mark.parametrize("rid", ["aw0229", "aw0501", "aw0685", "aw0869", "aw1001"])
def test_everyday_requests_near_a_tool_stay_quiet(metatool, rid):
    """MetaTool awareness negatives (tune split) that the previous decision activated (the closest tool at 0.35-0.54
    against its threshold 0.14: "Write a short story based on the following prompt ..." -> storybird_stories, "Find
    the four smallest perfect numbers." -> rephrase): nearer to everyday requests than to any tool, they stay quiet."""
    engine, records = metatool
    r = records[rid]
    assert r["label"] == "negative" and r["split"] == "tune"
    res = engine.activate(None, r["query"])
    assert res.names() == [], res.names()


@pytest.mark.shared_data
@pytest.mark.parametrize("rid", ["aw0000", "aw0016", "aw0028", "aw0056", "aw0080"])
def test_tool_requests_still_activate_their_tool(metatool, rid):
    engine, records = metatool
    r = records[rid]
    assert r["label"] == "positive" and r["split"] == "tune"
    assert engine.activate(None, r["query"]).names()[:1] == [r["tool"]]
