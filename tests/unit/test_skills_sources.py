"""Reading every rule format in place: per-format semantics, bad files reported (never raised), the registry's
discovery, shadowing, incremental reload and watcher."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from mnemo.core.skills import SkillRegistry, read_skill_file
from mnemo.core.skills.model import (
    FORMAT_AGENTS_MD,
    FORMAT_CLAUDE_MD,
    FORMAT_CLAUDE_SKILL,
    FORMAT_CONTINUE,
    FORMAT_COPILOT,
    FORMAT_COPILOT_REPO,
    FORMAT_CURSOR,
    FORMAT_MNEMO,
    FORMAT_WINDSURF,
)


def write(p: Path, text: str | bytes) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text, encoding="utf-8")
    return p


def make_project(root: Path) -> Path:
    write(root / "skills" / "docker.md", "---\nname: docker\ndescription: Containers. Use when deploying containers.\n"
          "globs: '**/Dockerfile'\nkeywords: [docker, container]\nimportance: high\ntools_allowed: [shell]\n---\nBody")
    write(root / "skills" / "README.md", "# not a skill")
    write(root / ".mnemo" / "skills" / "py.md", "---\nname: python\nglobs: ['**/*.py']\nalways_apply: false\n---\nPy")
    write(root / ".github" / "copilot-instructions.md", "Use tabs.")
    write(root / ".github" / "instructions" / "ts.instructions.md",
          "---\napplyTo: '**/*.ts,**/*.tsx'\ndescription: TS rules\n---\nStrict.")
    write(root / ".cursor" / "rules" / "react.mdc", "---\ndescription: React\nglobs: **/*.tsx\nalwaysApply: false\n---\nR")
    write(root / ".claude" / "skills" / "pdf" / "SKILL.md",
          "---\nname: pdf-tools\ndescription: Fill PDF forms. Use when the user asks to fill a PDF.\n"
          "allowed-tools: Read, Bash\n---\nSteps")
    write(root / "CLAUDE.md", "# Project memory\nRun make test.")
    write(root / "AGENTS.md", "# Agents\nBe brief.")
    write(root / ".continue" / "rules" / "go.md", "---\nname: Go\nglobs: '**/*.go'\n---\nGo rules")
    write(root / ".windsurf" / "rules" / "always.md", "---\ntrigger: always_on\n---\nAlways")
    return root


def test_each_format_is_read_with_its_semantics(tmp_path):
    reg = SkillRegistry(make_project(tmp_path / "p"), use_user_dir=False)
    rep = reg.load()
    assert rep.files_seen == 10 and rep.loaded == 10 and rep.skipped == 0
    by = {s.source_format: s for s in rep.skills}
    assert set(by) == {FORMAT_MNEMO, FORMAT_COPILOT_REPO, FORMAT_COPILOT, FORMAT_CURSOR, FORMAT_CLAUDE_SKILL,
                       FORMAT_CLAUDE_MD, FORMAT_AGENTS_MD, FORMAT_CONTINUE, FORMAT_WINDSURF}
    docker = reg.get("docker")
    assert docker.globs == ("**/Dockerfile",) and docker.glob_mode == "vscode" and docker.importance == 0.8
    assert docker.keywords == ("docker", "container") and docker.triggers == ("deploying containers",)
    assert docker.tools_allowed == ("shell",) and docker.id == "skills/docker.md"
    assert by[FORMAT_COPILOT].globs == ("**/*.ts", "**/*.tsx") and by[FORMAT_COPILOT].glob_mode == "vscode"
    assert by[FORMAT_CURSOR].globs == ("**/*.tsx",) and by[FORMAT_CURSOR].glob_mode == "minimatch_dot"
    assert by[FORMAT_CONTINUE].glob_mode == "minimatch" and not by[FORMAT_CONTINUE].always_apply
    pdf = by[FORMAT_CLAUDE_SKILL]
    assert pdf.name == "pdf-tools" and pdf.tools_allowed == ("Read", "Bash")
    assert pdf.triggers == ("fill a PDF",)
    for f in (FORMAT_COPILOT_REPO, FORMAT_CLAUDE_MD, FORMAT_AGENTS_MD, FORMAT_WINDSURF):
        assert by[f].always_apply, f
    json.dumps(rep.to_dict())  # JSON-friendly


def test_copilot_apply_to_list_is_ignored_like_vscode_with_a_warning(tmp_path):
    p = write(tmp_path / "x.instructions.md", "---\napplyTo: ['**/*.py']\ndescription: d\n---\nbody")
    skill, problems = read_skill_file(p)
    assert skill is not None and skill.globs == ()
    assert any("YAML list" in pr.reason and pr.severity == "warning" for pr in problems)


def test_continue_and_cursor_always_apply_rules(tmp_path):
    s, _ = read_skill_file(write(tmp_path / "a.md", "No header at all"), FORMAT_CONTINUE)
    assert s.always_apply  # Continue: no globs and alwaysApply unset -> always
    s, _ = read_skill_file(write(tmp_path / "b.md", "---\nalwaysApply: false\ndescription: x\n---\nb"), FORMAT_CONTINUE)
    assert not s.always_apply
    s, _ = read_skill_file(write(tmp_path / "c.mdc", "---\nalwaysApply: true\n---\nc"))
    assert s.always_apply
    s, _ = read_skill_file(write(tmp_path / "d.mdc", "---\nalwaysApply: false\n---\nmanual rule"))
    assert s.manual_only


@pytest.mark.parametrize("content,reason", [
    (b"\x00\x01binary", "binary"),
    (b"---\nname: a\n---\n\xff\xfe bad", "UTF-8"),
    (b"---\nname: a\n", "never closed"),
    (b"---\ndescription: \n---\n   \n", "empty"),
    (b"---\na: &a [1,2]\nb: [*a, *a]\n---\nbody", "alias"),
])
def test_bad_files_are_reported_with_line_and_reason(tmp_path, content, reason):
    p = write(tmp_path / "bad.md", content)
    skill, problems = read_skill_file(p)
    assert skill is None
    assert len(problems) == 1 and reason in problems[0].reason and problems[0].line >= 1
    assert problems[0].path == str(p)


def test_too_large_file_is_reported(tmp_path):
    p = write(tmp_path / "big.md", "x" * 2000)
    skill, problems = read_skill_file(p, max_bytes=1000)
    assert skill is None and "larger" in problems[0].reason


def test_unreadable_path_never_raises(tmp_path):
    skill, problems = read_skill_file(tmp_path / "missing.md")
    assert skill is None and "cannot read" in problems[0].reason


def test_invisible_unicode_is_stripped_and_flagged(tmp_path):
    p = write(tmp_path / "s.md", "---\nname: x\n---\nDo\u200b this\u202e now")
    skill, problems = read_skill_file(p)
    assert skill.body == "Do this now"
    assert any("invisible" in pr.reason for pr in problems)


def test_shadowing_by_closer_scope(tmp_path):
    root = tmp_path / "p"
    write(root / "skills" / "a.md", "---\nname: same\n---\nproject")
    write(root / ".mnemo" / "skills" / "a.md", "---\nname: same\n---\nlocal")
    user = tmp_path / "user"
    write(user / "a.md", "---\nname: Same\n---\nuser")
    reg = SkillRegistry(root, user_dir=user)
    rep = reg.load()
    assert [s.body for s in rep.skills] == ["local"]
    assert len(rep.shadowed) == 2 and rep.loaded == 3


def test_refresh_if_changed_picks_up_edits_additions_and_deletions(tmp_path):
    root = make_project(tmp_path / "p")
    reg = SkillRegistry(root, use_user_dir=False)
    reg.load()
    v = reg.version
    assert reg.refresh_if_changed() is False
    f = root / "skills" / "docker.md"
    f.write_text(f.read_text().replace("Body", "Body, edited and longer"))
    os.utime(f, (time.time() + 5, time.time() + 5))
    assert reg.refresh_if_changed() is True and reg.version == v + 1
    assert reg.get("docker").body.endswith("edited and longer")
    write(root / "skills" / "new.md", "---\nname: new\n---\nnew skill")
    assert reg.refresh_if_changed() and reg.get("new") is not None
    (root / "skills" / "new.md").unlink()
    assert reg.refresh_if_changed() and reg.get("new") is None


def test_watcher_thread_calls_back_on_change(tmp_path):
    root = make_project(tmp_path / "p")
    reg = SkillRegistry(root, use_user_dir=False)
    reg.load()
    seen = threading.Event()
    w = reg.watch(interval=0.05, on_change=lambda rep: seen.set())
    try:
        write(root / ".cursor" / "rules" / "added.mdc", "---\ndescription: added\n---\nbody")
        assert seen.wait(5)
        assert reg.get("added") is not None
    finally:
        w.stop()
    assert not w.is_alive()


def test_extra_dir_with_format_and_detection(tmp_path):
    d = tmp_path / "corpus"
    write(d / "a" / "r.md", "---\nglobs: '*.py'\n---\nA")
    write(d / "b.mdc", "---\nglobs: **/*.ts\n---\nB")
    write(d / "LICENSE", "MIT")
    rep = SkillRegistry(None, use_user_dir=False, extra_dirs=[(d, FORMAT_CONTINUE)]).load()
    assert rep.files_seen == 1 and rep.skills[0].source_format == FORMAT_CONTINUE
    rep = SkillRegistry(None, use_user_dir=False, extra_dirs=[d]).load()
    assert sorted(s.source_format for s in rep.skills) == [FORMAT_CURSOR, FORMAT_MNEMO]
    assert all(s.id.startswith("corpus/") for s in rep.skills)


def test_symlinked_or_identical_always_files_are_injected_once(tmp_path):
    root = tmp_path / "p"
    write(root / "AGENTS.md", "# Rules\nBe brief.")
    (root / "CLAUDE.md").symlink_to(root / "AGENTS.md")
    write(root / ".github" / "copilot-instructions.md", "# Rules\nBe brief.")
    rep = SkillRegistry(root, use_user_dir=False).load()
    assert len(rep.skills) == 1
    assert len(rep.shadowed) == 2 and rep.loaded == 3


def test_a_wheel_carries_the_starter_skills(tmp_path):
    """`pip install mnemo` (not only a source checkout) gets the starter skills: package data via a symlink."""
    import subprocess
    import sys
    import zipfile

    pytest.importorskip("setuptools")
    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                          "-w", str(tmp_path / "whl"), str(repo)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    wheel = next((tmp_path / "whl").glob("mnemo-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    shipped = sorted(n.rsplit("/", 1)[1] for n in names if n.startswith("mnemo/starter_skills/"))
    assert shipped == sorted(p.name for p in (repo / "skills").glob("*.md")) and len(shipped) >= 8
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)
    code = ("import mnemo.core.skills.registry as r, sys; d = r.builtin_skills_dir(); "
            "sys.stderr.write(f'{d}|{len(list(d.glob(chr(42) + \".md\")))}')")
    env = {k: v for k, v in os.environ.items() if k != "MNEMO_BUILTIN_SKILLS"}
    env["PYTHONPATH"] = str(target)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env,
                       timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]
    where, count = p.stderr.strip().rsplit("|", 1)
    assert where == str(target / "mnemo" / "starter_skills") and int(count) == len(shipped)


# -- nested AGENTS.md / CLAUDE.md -----------------------------------------------------------------------------

def _nested_project(root: Path) -> Path:
    files = {
        "AGENTS.md": "Root rules: run make test before a commit.",
        "services/api/AGENTS.md": "API rules: every handler validates its input with pydantic.",
        "web/app/[id]/CLAUDE.md": "Dynamic route rules: read params with useParams.",
        "node_modules/dep/AGENTS.md": "a dependency's own rules",
        ".cache/AGENTS.md": "hidden",
        "build/AGENTS.md": "build output",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_nested_agents_and_claude_md_apply_to_their_subtree(tmp_path):
    from mnemo.core.embedding.embedder import HashEmbedder
    from mnemo.core.skills import SkillEngine

    root = _nested_project(tmp_path / "p")
    reg = SkillRegistry(root, use_user_dir=False)
    by_name = {s.name: s for s in reg.load().skills}
    assert sorted(by_name) == ["AGENTS.md", "services/api/AGENTS.md", "web/app/[id]/CLAUDE.md"]
    assert by_name["AGENTS.md"].always_apply                          # the root file: every file of the project
    api = by_name["services/api/AGENTS.md"]
    assert not api.always_apply and api.globs == ("services/api/**",)
    assert by_name["web/app/[id]/CLAUDE.md"].globs == ("web/app/\\[id\\]/**",)   # a literal folder name
    eng = SkillEngine(reg, HashEmbedder())
    names = lambda rel: eng.activate(str(root / rel), None).names()  # noqa: E731
    assert names("services/api/handlers/users.py")[:2] == ["services/api/AGENTS.md", "AGENTS.md"]
    assert names("services/web/main.py") == ["AGENTS.md"]             # a sibling folder is not under services/api
    assert names("web/app/[id]/page.tsx")[0] == "web/app/[id]/CLAUDE.md"
    assert names("web/app/other/page.tsx") == ["AGENTS.md"]
    why = eng.activate(str(root / "services/api/x.py"), None).activations[0]
    assert why.activated_by == ["glob"] and "services/api/**" in why.reason


def test_nested_rules_edits_apply_at_once_and_new_files_after_a_background_rescan(tmp_path, monkeypatch):
    from mnemo.core.skills import registry as registry_mod

    root = _nested_project(tmp_path / "p")
    reg = SkillRegistry(root, use_user_dir=False)
    reg.load()
    api = root / "services/api/AGENTS.md"
    api.write_text("API rules: handlers return problem+json errors.")
    assert reg.refresh_if_changed()
    assert "problem+json" in reg.get("services/api/AGENTS.md").body          # an edit: the next refresh
    api.unlink()
    assert reg.refresh_if_changed() and reg.get("services/api/AGENTS.md") is None   # a removal too
    monkeypatch.setattr(registry_mod, "NESTED_RESCAN_S", 0.0)
    (root / "jobs").mkdir()
    (root / "jobs" / "AGENTS.md").write_text("Jobs rules: every job is idempotent.")
    deadline = time.monotonic() + 10
    while reg.get("jobs/AGENTS.md") is None and time.monotonic() < deadline:   # found by a walk in the background
        reg.refresh_if_changed()
        time.sleep(0.05)
    assert reg.get("jobs/AGENTS.md").globs == ("jobs/**",)


def test_nested_walk_is_bounded(tmp_path, monkeypatch):
    from mnemo.core.skills import registry as registry_mod

    deep = tmp_path / "p"
    d = deep
    for i in range(12):
        d = d / f"d{i}"
    d.mkdir(parents=True)
    (d / "AGENTS.md").write_text("too deep to be found")
    (deep / "d0" / "AGENTS.md").write_text("shallow")
    found = registry_mod._walk_nested(deep)
    assert found == [deep / "d0" / "AGENTS.md"]                          # depth limit
    monkeypatch.setattr(registry_mod, "NESTED_MAX_DIRS", 1)
    assert registry_mod._walk_nested(deep) == []                          # directory budget
