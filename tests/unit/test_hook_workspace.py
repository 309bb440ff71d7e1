"""The hook's standard-library copy of the workspace context (hooks/workspace.py) gives what `detect_context` gives,
and the owner's socket path what `daemon.paths.socket_path` gives: the hook and every other client must land in the
same project, branch and store."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import git
from mnemo.core.identity import detect_context
from mnemo.daemon.paths import socket_path
from mnemo.hooks import workspace

ENV = ("MNEMO_PROJECT_ROOT", "MNEMO_PROJECT_ID", "MNEMO_PROJECT_NAME", "MNEMO_DEFAULT_BRANCH", "MNEMO_USER",
       "MNEMO_WRITE_POLICY", "MNEMO_ON_CONFLICT", "MNEMO_SECRETS")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


def same(start: Path | str) -> dict:
    theirs = detect_context(start).to_dict()
    assert workspace.context(str(start)) == theirs
    return theirs


def test_a_repository_with_an_ssh_origin_and_a_subdirectory(git_repo):
    (git_repo / "src" / "api").mkdir(parents=True)
    ctx = same(git_repo / "src" / "api")
    assert ctx["project_name"] == "payments" and ctx["branch"] == "main"


@pytest.mark.parametrize("url", ["https://github.com/Acme/Payments.git/", "ssh://git@github.com:22/acme/payments",
                                 "git@github.com:acme/payments"])
def test_origin_forms(git_repo, url):
    git(git_repo, "remote", "set-url", "origin", url)
    same(git_repo)


def test_no_origin_no_git_detached_head_and_other_branches(git_repo, tmp_path):
    git(git_repo, "remote", "remove", "origin")
    same(git_repo)
    plain = tmp_path / "not-a-repo"
    plain.mkdir()
    same(plain)
    git(git_repo, "checkout", "-q", "-b", "feature/retry")
    assert same(git_repo)["branch"] == "feature/retry"
    git(git_repo, "checkout", "-q", "--detach")
    assert same(git_repo)["branch"].startswith("detached@")


def test_a_linked_worktree(git_repo, tmp_path):
    wt = tmp_path / "wt"
    git(git_repo, "worktree", "add", "-q", "-b", "wt-branch", str(wt))
    assert same(wt)["branch"] == "wt-branch"


def test_the_environment_overrides(git_repo, monkeypatch):
    for name, value in (("MNEMO_PROJECT_ID", "p-1"), ("MNEMO_PROJECT_NAME", "Pay"), ("MNEMO_DEFAULT_BRANCH", "dev"),
                        ("MNEMO_USER", "ana"), ("MNEMO_WRITE_POLICY", "Confirm"), ("MNEMO_SECRETS", "redact")):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MNEMO_PROJECT_ROOT", str(git_repo))
    ctx = same("/")
    assert (ctx["project_id"], ctx["write_policy"], ctx["default_branch"]) == ("p-1", "confirm", "dev")


@pytest.mark.parametrize("length", [10, 200])
def test_the_socket_path(tmp_path, length):
    home = tmp_path / ("h" * length)
    home.mkdir()
    assert workspace.socket_path(str(home)) == str(socket_path(home))
