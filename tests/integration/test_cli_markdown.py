"""`mnemo export --format md DIR` and `mnemo import DIR|FILE.md` through the real CLI and owner process: the files
a person reads, their edits coming back as edits, new entries as memories, removed ones reported; into a fresh
store the same files come out again."""

from __future__ import annotations

import json

import pytest

from conftest import git, run_cli
from mnemo.daemon.client import DaemonService

ENV = {"MNEMO_EMBEDDER": "hash", "MNEMO_MIN_CONFIDENCE": "0"}


@pytest.fixture
def cli(tmp_path, git_repo):
    (git_repo / "pay.py").write_text("def charge(amount):\n    return amount\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "pay")
    homes = []

    def run(*args, home="a", json_out=True, ok=True):
        h = tmp_path / f"home-{home}"
        if h not in homes:
            homes.append(h)
        r = run_cli(*args, *(["--json"] if json_out else []), home=h, cwd=git_repo, env=ENV)
        if ok:
            assert r.returncode == 0, r.stderr + r.stdout
        return json.loads(r.stdout) if json_out and ok and r.stdout.strip() else r

    yield run
    for h in homes:
        DaemonService(h, autostart=False).shutdown()


def test_export_edit_import(cli, tmp_path):
    a = cli("remember", "charge retries reuse the idempotency key", "--kind", "decision", "--tag", "payments")
    mid = a["memory"]["id"]
    cli("anchor", mid, "--file", "pay.py", "--symbol", "charge")
    gone = cli("remember", "the old billing cron runs at 3am")["memory"]["id"]
    cli("remember", "answer in short sentences", "--type", "user")
    out = tmp_path / "md"
    res = cli("export", "--format", "md", str(out))
    assert res["memories"] == 3 and [f["name"] for f in res["files"]] == ["project-project.md", "project-user.md"]
    text = (out / "project-project.md").read_text()
    assert f"## charge retries reuse the idempotency key\n`id: {mid} · kind: decision · tags: payments · " \
           "branch: main · anchors: pay.py?symbol=charge&lines=1-2&hash=" in text

    # into a fresh store: new memories (that store never held these ids), and the same files come out again but
    # for the ids
    fresh = cli("import", str(out), home="b")
    assert fresh["restored"] == [] and len(fresh["created"]) == 3 and fresh["skipped"] == fresh["removed"] == []
    renamed = {c["requested_id"]: c["id"] for c in fresh["created"]}
    cli("export", "--format", "md", str(tmp_path / "again"), home="b")
    for name in ("project-project.md", "project-user.md"):
        want = (out / name).read_text()
        for old_id, new_id in renamed.items():
            want = want.replace(old_id, new_id)
        got = (tmp_path / "again" / name).read_text()
        assert sorted(got.split("\n## ")) == sorted(want.split("\n## "))  # the same entries (in creation order)

    # a person edits the file: a changed text, a new entry, a removed one
    edited = text.replace("reuse the idempotency key", "reuse the idempotency key of the first attempt")
    start = edited.index("## the old billing cron")
    end = edited.index("\n## ", start + 1) if "\n## " in edited[start + 1:] else len(edited)
    edited = edited[:start] + edited[end:].lstrip("\n") + "\n## new\n\nrefunds go through the ledger service\n"
    (out / "project-project.md").write_text(edited)
    human = cli("import", str(out / "project-project.md"), "--dry-run", json_out=False).stdout
    assert "dry run" in human and f"edit {mid} (text)" in human and "not in the files" in human
    res = cli("import", str(out / "project-project.md"))
    assert [e["id"] for e in res["edited"]] == [mid] and res["created"][0]["status"] == "created"
    assert res["removed"] == [{"id": gone, "title": "the old billing cron runs at 3am", "file": "project-project.md"}]
    cards = cli("recall", "idempotency key first attempt")["cards"]
    assert any(c["item_id"] == mid and "first attempt" in c["compressed_summary"] for c in cards)
    assert any(c["item_id"] == gone for c in cli("recall", "billing cron 3am")["cards"])  # reported, not deleted

    bad = cli("import", str(tmp_path / "missing"), json_out=False, ok=False)
    assert bad.returncode == 2 and "does not exist" in bad.stderr
    bad = cli("export", "--format", "md", "--scope", "team", str(out), json_out=False, ok=False)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_import_never_invents_an_id_and_keeps_the_current_branch(cli, tmp_path, git_repo):
    """Issue 21, item 3: an entry naming an id this store never held is a new memory with a new id, reported with
    the reason; an entry without a branch lands on the current branch (not on every branch)."""
    cli("remember", "the ledger service owns refunds")
    out = tmp_path / "md"
    cli("export", "--format", "md", str(out))
    text = (out / "project-project.md").read_text()
    text += ("\n## made up\n`id: mem-nonexistent0000000000 · kind: decision`\n\n"
             "invoices are numbered per tenant, never globally\n")
    (out / "project-project.md").write_text(text)
    human = cli("import", str(out), "--dry-run", json_out=False).stdout
    assert "mem-nonexistent0000000000 is not one this store has held" in human and "0 restored" in human
    res = cli("import", str(out))
    assert res["restored"] == [] and len(res["created"]) == 1, res
    made = res["created"][0]
    assert made["requested_id"] == "mem-nonexistent0000000000" and made["id"] != made["requested_id"]
    assert "new memory with a new id" in made["reason"] and made["status"] == "created"
    listed = {m["id"]: m for m in cli("list", "--all-branches")["memories"]}
    assert "mem-nonexistent0000000000" not in listed
    assert listed[made["id"]]["branch"] == git(git_repo, "rev-parse", "--abbrev-ref", "HEAD").strip()
