"""Issue 21 item 15: a git merge of a branch with memories is noticed by the owner at the next call (a CLI command,
a hook, an editor request) and offered in Review once; after the offer is taken, every note shows once, on the
default branch and back on the feature branch. A real git repository, the real CLI and hook commands (subprocesses)
and a real owner process."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, git, run_cli
from mnemo.daemon.client import DaemonService

ENV = {"MNEMO_EMBEDDER": "hash", "MNEMO_STARTER_SKILLS": "0"}
NOTES = ["Retries use exponential backoff with full jitter, capped at 30 seconds",
         "The retry budget is five attempts per request, then the job is parked",
         "Only idempotent POST calls that carry an Idempotency-Key header are retried"]


@pytest.fixture
def repo(tmp_path, home):
    r = tmp_path / "shop"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    (r / "README.md").write_text("# shop\n")
    git(r, "add", "-A")
    git(r, "commit", "-q", "-m", "init")
    yield r
    DaemonService(home, autostart=False).shutdown()


def cli(home: Path, repo: Path, *args: str):
    r = run_cli(*args, "--json", home=home, cwd=repo, env=ENV)
    assert r.returncode == 0, r.stderr + r.stdout
    return json.loads(r.stdout) if r.stdout.strip() else None


def offers(home: Path, repo: Path, **kw) -> list[dict]:
    return [i for i in cli(home, repo, "review", *(["--all"] if kw.get("all") else []))["items"]
            if i["kind"] == "branch_merge"]


def texts(home: Path, repo: Path) -> list[str]:
    return sorted(m["text"] for m in cli(home, repo, "list", "--limit", "100")["memories"])


def work_on_branch(repo: Path, home: Path, branch: str, notes: list[str]) -> None:
    git(repo, "checkout", "-q", "-b", branch)
    (repo / f"{branch.replace('/', '_')}.py").write_text("RETRIES = 5\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"work on {branch}")
    for n in notes:
        cli(home, repo, "remember", n, "--kind", "decision")


def test_a_git_merge_is_offered_once_and_leaves_no_duplicates(repo, home):
    cli(home, repo, "remember", "The shop runs on Python 3.12")
    work_on_branch(repo, home, "feature/retry", NOTES)
    assert len(texts(home, repo)) == 4  # the branch's notes and main's
    git(repo, "checkout", "-q", "main")
    assert offers(home, repo) == []  # not merged yet: nothing offered
    git(repo, "merge", "-q", "feature/retry")  # a fast-forward: main's head is now the branch's head

    # The next owner call notices it, without `mnemo branch merged`; asked again, the same single offer.
    items = offers(home, repo)
    assert len(items) == 1, items
    assert items[0]["summary"] == "feature/retry was merged: bring its 3 memories to main?"
    assert offers(home, repo) == items

    res = cli(home, repo, "review", "resolve", str(items[0]["id"]), "merge")
    assert res["merge"]["imported"] == 3
    assert texts(home, repo) == sorted([*NOTES, "The shop runs on Python 3.12"])  # on main: each once
    assert offers(home, repo) == []

    git(repo, "checkout", "-q", "feature/retry")  # back on the branch: still each once, no second offer
    assert texts(home, repo) == sorted([*NOTES, "The shop runs on Python 3.12"])
    assert offers(home, repo) == []
    lst = cli(home, repo, "list", "--limit", "100")["memories"]
    assert {m["branch"] for m in lst if m["text"] in NOTES} == {"main"}
    git(repo, "checkout", "-q", "main")
    assert offers(home, repo) == [] and len(offers(home, repo, all=True)) == 1

    # A branch just created from main, with notes but no commit of its own, is not "merged".
    git(repo, "checkout", "-q", "-b", "spike/cache")
    cli(home, repo, "remember", "Cache the catalog for five minutes")
    git(repo, "checkout", "-q", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "main moves on")
    assert offers(home, repo) == []


def test_a_hook_is_the_call_that_notices_the_merge(repo, home, tmp_path):
    work_on_branch(repo, home, "feature/retry", NOTES[:2])
    git(repo, "checkout", "-q", "main")
    cli(home, repo, "list")  # the owner runs and has looked at main's current head
    git(repo, "merge", "-q", "--no-ff", "-m", "merge feature/retry", "feature/retry")
    hook_input = json.loads((REPO / "tests" / "fixtures" / "claude_code" / "session_start.json").read_text()
                            .replace("$CWD", str(repo)).replace("$SESSION", "s-merge")
                            .replace("$TRANSCRIPT", str(tmp_path / "none.jsonl")))
    t0 = time.time()
    r = subprocess.run([sys.executable, "-m", "mnemo", "hook", "session-start"], input=json.dumps(hook_input),
                       capture_output=True, text=True, cwd=repo, timeout=60,
                       env={**os.environ, "MNEMO_HOME": str(home), "MNEMO_HOOK_TIMEOUT": "20", **ENV})
    assert r.returncode == 0, r.stderr
    # No other call reaches the owner until the offer is there: the hook's call noticed the merge (in the
    # background: the hook did not wait for git).
    rows = wait_rows(home / "mnemo.db")
    assert len(rows) == 1 and json.loads(rows[0][1])["source"] == "feature/retry" and rows[0][0] >= t0
    items = offers(home, repo)
    assert len(items) == 1 and items[0]["summary"] == "feature/retry was merged: bring its 2 memories to main?"


def wait_rows(db: Path, timeout: float = 20.0) -> list[tuple]:
    deadline = time.monotonic() + timeout
    while True:
        con = sqlite3.connect(db, timeout=10)
        try:
            rows = con.execute("SELECT created_at, payload FROM review WHERE kind='branch_merge'").fetchall()
        finally:
            con.close()
        if rows or time.monotonic() > deadline:
            return rows
        time.sleep(0.1)
