"""The language server's kept workspace contexts (`WorkspaceContexts`, issue 22's fourth pass) and the owner's kept
look at the default branch's head (`identity.read_ref_kept`): each is what reading `.git` again would give, after
a checkout, a new origin, a commit, a new worktree, a change of the process's variables, a `git init`."""

from __future__ import annotations

from pathlib import Path

from conftest import git
from mnemo.core.identity import detect_context, read_ref, read_ref_kept
from mnemo.lsp.language_server import WorkspaceContexts


def same(contexts: WorkspaceContexts, root: Path) -> dict:
    got = contexts.get(root)
    assert got == detect_context(root).to_dict()
    return got


def test_a_checkout_and_a_new_origin_are_seen(git_repo):
    contexts = WorkspaceContexts()
    first = same(contexts, git_repo)
    assert first["branch"] == "main"
    assert contexts.get(git_repo) is first  # kept: nothing changed
    git(git_repo, "checkout", "-q", "-b", "feature/retry")
    assert same(contexts, git_repo)["branch"] == "feature/retry"
    git(git_repo, "checkout", "-q", "main")
    assert same(contexts, git_repo)["branch"] == "main"
    git(git_repo, "remote", "set-url", "origin", "git@github.com:acme/other-repo.git")
    moved = same(contexts, git_repo)
    assert moved["project_id"] != first["project_id"] and moved["project_name"] == "other-repo"
    git(git_repo, "checkout", "-q", "--detach")
    assert same(contexts, git_repo)["branch"].startswith("detached@")


def test_a_subdirectory_a_worktree_and_the_variables(git_repo, tmp_path, monkeypatch):
    contexts = WorkspaceContexts()
    sub = git_repo / "src"
    sub.mkdir(exist_ok=True)
    assert same(contexts, sub)["root"] == str(git_repo.resolve())
    wt = tmp_path / "wt"
    git(git_repo, "worktree", "add", "-q", "-b", "side", str(wt))
    assert same(contexts, wt)["branch"] == "side"
    git(wt, "checkout", "-q", "-b", "side-2")
    assert same(contexts, wt)["branch"] == "side-2"
    monkeypatch.setenv("MNEMO_PROJECT_ID", "pinned")
    assert same(contexts, git_repo)["project_id"] == "pinned"
    monkeypatch.setenv("MNEMO_USER", "someone-else")
    assert same(contexts, git_repo)["user"] == "someone-else"


def test_a_plain_directory_that_becomes_a_repository(tmp_path):
    contexts = WorkspaceContexts()
    plain = tmp_path / "plain" / "deep"
    plain.mkdir(parents=True)
    assert same(contexts, plain)["branch"] is None
    git(tmp_path / "plain", "init", "-q", "-b", "trunk")
    (tmp_path / "plain" / "f").write_text("x")
    git(tmp_path / "plain", "add", "f")
    git(tmp_path / "plain", "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "one")
    now = same(contexts, plain)
    assert now["branch"] == "trunk" and now["root"] == str((tmp_path / "plain").resolve())


def test_the_default_branch_head_is_read_again_when_it_moves(git_repo):
    head = read_ref_kept(git_repo, "main")
    assert head == read_ref(git_repo, "main") and head is not None
    (git_repo / "moved.txt").write_text("a commit on main")
    git(git_repo, "add", "moved.txt")
    git(git_repo, "commit", "-q", "-m", "move main")
    assert read_ref_kept(git_repo, "main") == read_ref(git_repo, "main") != head
    git(git_repo, "pack-refs", "--all")  # the loose ref is gone: the head is in packed-refs now
    assert read_ref_kept(git_repo, "main") == read_ref(git_repo, "main")
    assert read_ref_kept(git_repo, "no-such-branch") is None
