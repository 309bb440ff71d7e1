"""Every memory command through the real CLI and owner process, human and --json output, and `mnemo doctor`."""

from __future__ import annotations

import json
import time

import pytest

from conftest import run_cli
from mnemo.daemon.client import DaemonService

ENV = {"MNEMO_EMBEDDER": "hash"}


@pytest.fixture
def cli(home, git_repo):
    def run(*args, json_out=True, ok=True):
        r = run_cli(*args, *(["--json"] if json_out else []), home=home, cwd=git_repo, env=ENV)
        if ok:
            assert r.returncode == 0, r.stderr + r.stdout
        return (json.loads(r.stdout) if json_out and r.stdout.strip() else r)

    yield run
    DaemonService(home, autostart=False).shutdown()


def test_every_memory_command(cli, git_repo):
    (git_repo / "docs").mkdir()
    (git_repo / "docs" / "deploy.md").write_text("# Deploy\n\n## Staging\n\nRun make deploy-staging.\n")
    idx = cli("index")
    assert idx["files"] == 2 and idx["blocks_written"] >= 2
    human = cli("index", json_out=False)
    assert "indexed 2 Markdown files" in human.stdout
    m = cli("remember", "staging deploys need the VPN", "--kind", "lesson", "--tag", "ops")["memory"]
    assert m["kind"] == "lesson" and m["tags"] == ["ops"]
    again = cli("remember", "Staging deploys need the VPN.")
    assert again["status"] == "confirmed" and again["memory"]["confirmations"] == 2
    rec = cli("recall", "staging deploy VPN")
    kinds = {c["source_kind"] for c in rec["cards"]}
    assert m["id"] in {c["item_id"] for c in rec["cards"]} and kinds == {"note", "markdown"}
    block = next(c for c in rec["cards"] if c["source_kind"] == "markdown")
    assert block["heading_path"] == ["Deploy", "Staging"]
    assert cli("hydrate", block["item_id"])["source_path"] == "docs/deploy.md"
    assert cli("hydrate", m["id"], "--mode", "related")["memory"]["id"] == m["id"]
    lst = cli("list")
    assert lst["total"] == 1 and lst["memories"][0]["id"] == m["id"]
    st = cli("stats")
    assert st["memories"]["project"] == 1 and st["docs"]["files"] == 2 and st["by_branch"] == {"main": 1}
    assert cli("promote", m["id"])["memory"]["scope"] == "global"
    assert cli("list", "--scope", "global")["total"] == 1
    assert cli("deprecate", m["id"], "--reason", "VPN retired")["memory"]["deprecated"]
    assert cli("list")["total"] == 0 and cli("list", "--deprecated")["total"] == 1
    assert cli("forget", m["id"])["tombstone"]
    assert cli("list", "--deprecated")["total"] == 0
    # human output of the main commands
    for args in (["stats"], ["list"], ["recall", "deploy"]):
        assert cli(*args, json_out=False).stdout.strip()


def test_errors_are_clear_with_exit_code_2(cli):
    r = cli("remember", "x", "--scope", "global", ok=False)
    assert r["error"]["code"] == "scope_error" and "promote" in r["error"]["hint"]
    r = cli("remember", "", json_out=False, ok=False)
    assert r.returncode == 2 and "empty" in r.stderr and "what to do" in r.stderr
    r = cli("recall", "x", "--scope", "moon", ok=False)
    assert r["error"]["type"] == "InvalidInput"
    r = cli("promote", "mem-doesnotexist", ok=False)
    assert r["error"]["type"] == "NotFound"


def test_doctor_reports_and_repairs_a_damaged_index(cli, home):
    cli("remember", "doctor needs something to check")
    deadline = time.time() + 30
    while time.time() < deadline and not (home / "chroma" / "mnemo-index.json").exists():
        time.sleep(0.1)
    rep = cli("doctor")
    names = {c["name"]: c["status"] for c in rep["checks"]}
    assert rep["ok"] and names["store"] == "ok" and names["index"] == "ok" and names["model"] == "ok"
    DaemonService(home, autostart=False).shutdown()
    time.sleep(0.5)
    import shutil

    shutil.rmtree(home / "chroma")
    rep = cli("doctor")
    assert rep["ok"], rep
    idx = next(c for c in rep["checks"] if c["name"] == "index")
    assert "1 vectors" in idx["detail"] and "rebuild" in idx["detail"]
    human = cli("doctor", json_out=False)
    assert "store" in human.stdout and "ok" in human.stdout


def test_quickstart_never_touches_the_users_store_or_repository(home, git_repo):
    """Issue 13: quickstart wrote demo notes (one of them false) into the user's store for the repository it ran
    in. It now runs in its own temporary store and demo project, removes both, and says so."""
    import re
    from pathlib import Path

    from conftest import git

    r = run_cli("quickstart", home=home, cwd=git_repo, env=ENV)
    assert r.returncode == 0, r.stderr + r.stdout
    where = re.search(r"The demo runs in (\S+) ", r.stdout)
    assert where and "removed" in r.stdout and "not touched" in r.stdout
    assert not Path(where.group(1)).exists()  # the demo store and project are gone
    assert "payments API requires idempotency keys" in r.stdout  # the demo did run: notes and cards
    assert "Payments › Retries" in r.stdout
    assert not (home / "mnemo.db").exists() and not list(home.iterdir())  # nothing in the user's store
    assert git(git_repo, "status", "--porcelain") == ""  # nothing in the repository
