"""Project identity and live branch detection."""

from __future__ import annotations

from conftest import git
from mnemo.core.identity import detect_context, normalize_origin, project_identity


def test_ssh_and_https_forms_of_one_repo_give_one_id():
    forms = [
        "git@github.com:Acme/Payments.git",
        "https://github.com/acme/payments",
        "https://github.com/acme/payments.git/",
        "ssh://git@github.com/acme/payments.git",
        "ssh://git@github.com:22/acme/payments",
        "https://user:tok@github.com/acme/payments.git",
    ]
    assert {normalize_origin(f) for f in forms} == {"github.com/acme/payments"}


def test_origin_url_gives_stable_id_and_name(git_repo, tmp_path):
    a = project_identity(git_repo)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(git_repo), str(clone))
    git(clone, "remote", "set-url", "origin", "https://github.com/ACME/payments")
    b = project_identity(clone / "")
    assert a.project_id == b.project_id and a.project_id.startswith("git-")
    assert a.project_name == "payments"


def test_no_origin_falls_back_to_root_path_hash(tmp_path):
    d = tmp_path / "plain"
    (d / "sub").mkdir(parents=True)
    git(d, "init", "-q")  # a repository without an origin remote
    ident = project_identity(d / "sub")
    assert ident.project_id.startswith("path-")
    assert project_identity(d).project_id == ident.project_id  # subdirectories of one root are one project
    other = tmp_path / "other"
    other.mkdir()
    assert project_identity(other).project_id != ident.project_id


def test_env_overrides(monkeypatch, git_repo):
    monkeypatch.setenv("MNEMO_PROJECT_ID", "custom-id")
    monkeypatch.setenv("MNEMO_PROJECT_NAME", "Custom")
    ident = project_identity(git_repo)
    assert (ident.project_id, ident.project_name) == ("custom-id", "Custom")


def test_project_root_override(monkeypatch, git_repo, tmp_path):
    monkeypatch.setenv("MNEMO_PROJECT_ROOT", str(git_repo))
    assert project_identity(tmp_path).root == git_repo.resolve()


def test_branch_follows_checkout_live(git_repo):
    ctx = detect_context(git_repo)
    assert (ctx.branch, ctx.default_branch) == ("main", "main")
    git(git_repo, "checkout", "-q", "-b", "feature/auth")
    ctx = detect_context(git_repo)
    assert (ctx.branch, ctx.default_branch) == ("feature/auth", "main")
    assert ctx.visible_branches() == ("feature/auth", "main")
    sha = git(git_repo, "rev-parse", "HEAD")
    git(git_repo, "checkout", "-q", sha)
    assert detect_context(git_repo).branch == f"detached@{sha[:8]}"


def test_worktree_branch(git_repo, tmp_path):
    wt = tmp_path / "wt"
    git(git_repo, "worktree", "add", "-q", "-b", "wt-branch", str(wt))
    ctx = detect_context(wt)
    assert ctx.branch == "wt-branch"
    assert ctx.project_id == detect_context(git_repo).project_id  # same origin -> same project


def test_visible_branches_are_worked_out_once_and_stay_out_of_the_fields():
    """Recall asks a context for its visible branches once per candidate: kept after the first time, never part of
    what the context is (equality, hashing, `to_dict`, `replace`)."""
    import dataclasses
    import pickle

    from mnemo.core.models import Context

    feat = Context(project_id="p", project_name="p", branch="feat", default_branch="main")
    assert feat.visible_branches() == ("feat", "main") and feat.visible_branches() is feat.visible_branches()
    same = Context(project_id="p", project_name="p", branch="feat", default_branch="main")
    assert feat == same and hash(feat) == hash(same) and feat.to_dict() == same.to_dict()
    assert "_visible_branches" not in feat.to_dict()
    assert dataclasses.replace(feat, branch="main").visible_branches() == ("main",)
    assert pickle.loads(pickle.dumps(feat)).visible_branches() == ("feat", "main")
    assert Context(project_id="p", project_name="p").visible_branches() == ()
