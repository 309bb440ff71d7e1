"""`mnemo skills ...` handlers against a stub service (the service itself is tested elsewhere)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mnemo.cli import skills_cmd
from mnemo.core.embedding.embedder import HashEmbedder
from mnemo.core.skills import SkillEngine, SkillRegistry, render_prompt_block

REPO = Path(__file__).resolve().parents[2]


class StubService:
    def __init__(self, root: Path):
        self.engine = SkillEngine(SkillRegistry(root, use_user_dir=False), HashEmbedder())

    def skills_list(self, ctx):
        return {"skills": [s.to_dict() for s in self.engine.skills()]}

    def skills_check(self, ctx):
        return self.engine.check().to_dict()

    def activate_skills(self, ctx, file=None, message=None, **kw):
        res = self.engine.activate(file, message, **kw)
        return {**res.to_dict(), "prompt_block": render_prompt_block(res)}


def parse(argv):
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command")

    def common(q):
        q.add_argument("--json", action="store_true")
        q.add_argument("-C", "--project-root", dest="project_root", default=None)

    skills_cmd.register(sub, common)
    return p.parse_args(argv)


def run(argv, service, monkeypatch):
    monkeypatch.setattr(skills_cmd, "_ctx", lambda args: {})
    args = parse(argv)
    return args.func(args, service)


def test_activate_json_and_human(monkeypatch, capsys):
    svc = StubService(REPO)
    assert run(["skills", "activate", "--file", str(REPO / "src/app/Dockerfile"), "--message", "deploy containers",
                "--json"], svc, monkeypatch) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["activations"][0]["name"] == "docker"
    assert run(["skills", "activate", "--file", str(REPO / "src/app/Dockerfile"), "-m", "deploy"], svc,
               monkeypatch) == 0
    text = capsys.readouterr().out
    assert "docker" in text and "why:" in text
    assert run(["skills", "activate", "--file", "x/Dockerfile", "--prompt"], svc, monkeypatch) == 0
    assert "## Active skills" in capsys.readouterr().out


def test_list_and_check(monkeypatch, capsys, tmp_path):
    svc = StubService(REPO)
    assert run(["skills", "list", "--json"], svc, monkeypatch) == 0
    assert len(json.loads(capsys.readouterr().out)["skills"]) >= 8
    assert run(["skills", "check"], svc, monkeypatch) == 0
    assert "loaded" in capsys.readouterr().out
    bad = tmp_path / "rules"
    bad.mkdir()
    (bad / "ok.mdc").write_text("---\nglobs: **/*.py\n---\nbody")
    (bad / "broken.mdc").write_text("---\nglobs: x\n")
    assert run(["skills", "check", "--dir", str(bad), "--json"], None, monkeypatch) == 1
    res = json.loads(capsys.readouterr().out)
    assert res["files_seen"] == 2 and res["loaded"] == 1 and res["skipped"] == 1
    assert res["problems"][0]["path"].endswith("broken.mdc")


def test_activate_says_why_not(monkeypatch, capsys):
    """The dry run lists the nearest misses with their probability and the threshold they missed."""
    svc = StubService(REPO)
    assert run(["skills", "activate", "--file", str(REPO / "src/app/Dockerfile"), "--json"], svc, monkeypatch) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dropped"] and all(d["threshold"] == out["threshold"] for d in out["dropped"])
    assert run(["skills", "activate", "-m", "write a haiku about autumn"], svc, monkeypatch) == 0
    text = capsys.readouterr().out
    assert "no skill applies" in text and "not active:" in text and "< threshold" in text


def test_check_lists_held_skills(monkeypatch, capsys):
    class Held(StubService):
        def skills_check(self, ctx):
            return {**super().skills_check(ctx), "held": [
                {"key": "k", "path": "/p/.cursor/rules/[evil].mdc", "name": "evil", "flags": ["injection:x"],
                 "state": "held"}]}

    assert run(["skills", "check"], Held(REPO), monkeypatch) == 0
    text = capsys.readouterr().out
    assert "held" in text and "[evil].mdc" in text and "mnemo review" in text
