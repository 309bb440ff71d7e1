"""`mnemo publish` through the real CLI and owner process on a real git repository: every target written in its
tool's format, publishing again changes nothing, a person's text outside the sections stays byte for byte, a file
the person owns is never overwritten, hand edits of every kind of file come back (edits with history, deletions
to Review, additions as memories), pending notes and secrets never published, and the published files activate
for the right paths through `mnemo skills activate` without being injected twice."""

from __future__ import annotations

import dataclasses
import json
import os
import time
import uuid
from pathlib import Path

import pytest

from conftest import git, run_cli
from mnemo.daemon.client import DaemonService

ENV = {"MNEMO_EMBEDDER": "hash", "MNEMO_MIN_CONFIDENCE": "0", "MNEMO_STARTER_SKILLS": "0"}
PERSON_CLAUDE = "# Payments service\n\nHand-written rules: keep functions short.\n"
PERSON_MDC = "---\ndescription: our own rule\nalwaysApply: true\n---\n\nNever edit generated protobufs.\n"
PERSON_COPILOT = "Answer in English.\n"
PERSON_CONTINUE_MNEMO = "---\nname: my notes\n---\n\nThis file is mine, though it is called mnemo.md.\n"
SECRET = "ghp_" + "Zq9xR4tLmW2vB7nK1pYc8dFj3sHa6gUe0oTi"  # a GitHub token's shape (not a real one)


@pytest.fixture
def repo(git_repo):
    (git_repo / "src" / "payments").mkdir(parents=True)
    (git_repo / "src" / "payments" / "charge.py").write_text("def charge(amount):\n    return amount\n")
    (git_repo / "README.md").write_text("# service\n")
    (git_repo / "CLAUDE.md").write_text(PERSON_CLAUDE)
    (git_repo / ".cursor" / "rules").mkdir(parents=True)
    (git_repo / ".cursor" / "rules" / "team.mdc").write_text(PERSON_MDC)
    (git_repo / ".github").mkdir()
    (git_repo / ".github" / "copilot-instructions.md").write_text(PERSON_COPILOT)
    (git_repo / ".continue" / "rules").mkdir(parents=True)
    (git_repo / ".continue" / "rules" / "mnemo.md").write_text(PERSON_CONTINUE_MNEMO)
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "start")
    return git_repo


@pytest.fixture
def cli(tmp_path, repo):
    home = tmp_path / "home"

    def run(*args, json_out=True, ok=True, env=None):
        r = run_cli(*args, *(["--json"] if json_out else []), home=home, cwd=repo, env={**ENV, **(env or {})})
        if ok:
            assert r.returncode == 0, r.stderr + r.stdout
        return json.loads(r.stdout) if json_out and ok and r.stdout.strip() else r

    run.home = home
    yield run
    DaemonService(home, autostart=False).shutdown()


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts}


def _insert_secret_memory(home: Path, like_id: str) -> str:
    """A note holding a secret, as if an older scanner had let it in (today's writes refuse it): published never."""
    from mnemo.core.engine import Engine
    from mnemo.core.errors import StoreLocked
    from mnemo.core.text import content_hash

    DaemonService(home, autostart=False).shutdown()
    deadline = time.monotonic() + 30
    old = os.environ.get("MNEMO_EMBEDDER")
    os.environ["MNEMO_EMBEDDER"] = "hash"
    try:
        while True:  # the owner lets go of the store as it exits
            try:
                engine = Engine(home)
                break
            except StoreLocked:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        try:
            m = engine.store.get_memory(like_id)
            text = f"Deploy with the token {SECRET} from the vault."
            sec = dataclasses.replace(m, id="mem-" + uuid.uuid4().hex[:20], text=text, anchors=[],
                                      content_hash=content_hash(text))
            with engine.store.write() as c:
                engine.store.insert_memory(c, sec, engine.embed([text])[0], engine.model_id)
            engine.changed()
            return sec.id
        finally:
            engine.close()
    finally:
        if old is None:
            os.environ.pop("MNEMO_EMBEDDER", None)
        else:
            os.environ["MNEMO_EMBEDDER"] = old


def _line_of(path: Path, words: str) -> str:
    return next(ln for ln in path.read_text().split("\n") if words in ln)


def test_publish_every_target_round_trip_and_activation(cli, repo):
    mem = {}
    for key, text, typ, kind in (
            ("money", "Use Decimal for money amounts, never float.", "feedback", "decision"),
            ("refund", "Refunds must log the reason code.", "project", "pattern"),
            ("pr", "Prefer small pull requests.", "feedback", "pattern"),
            ("errors", "API errors return problem+json bodies.", "project", "decision"),
            ("tests", "Tests use pytest fixtures, not setUp methods.", "feedback", "lesson"),
            ("old", "The nightly job runs at 3am.", "project", "decision"),
            ("handoff", "Session ended while fixing the refund bug.", "project", "handoff")):
        mem[key] = cli("remember", text, "--type", typ, "--kind", kind)["memory"]["id"]
    cli("anchor", mem["refund"], "--file", "src/payments/charge.py")
    cli("deprecate", mem["old"])
    pending = cli("remember", "PENDING-NOTE always squash merges", "--type", "feedback", "--kind", "decision",
                  "--source", "agent", env={"MNEMO_WRITE_POLICY": "confirm"})
    assert pending["memory"]["status"] == "pending"
    agent = cli("remember", "AGENT-NOTE cache everything in redis", "--type", "feedback", "--kind", "decision",
                "--source", "agent")["memory"]["id"]
    secret = _insert_secret_memory(cli.home, mem["pr"])

    # -- the first publish: every target ------------------------------------------------------------------------
    before = _snapshot(repo)
    res = cli("publish", "--to", "all")
    files = {f["path"]: f for f in res["files"]}
    assert set(files) == {
        "CLAUDE.md", "AGENTS.md", ".cursor/rules/mnemo.mdc", ".cursor/rules/mnemo-src-payments.mdc",
        ".github/instructions/mnemo.instructions.md", ".github/instructions/mnemo-src-payments.instructions.md",
        ".windsurf/rules/mnemo.md", ".windsurf/rules/mnemo-src-payments.md", ".continue/rules/mnemo.md",
        ".continue/rules/mnemo-src-payments.md"}
    assert files[".continue/rules/mnemo.md"]["status"] == "skipped"  # the person's file of that name
    assert res["published"] == 5
    left = {d["id"]: d["reason"] for d in res["left_out"]}
    assert "pending" in left[pending["memory"]["id"]] and "secret" in left[secret]
    assert "agent" in left[agent] and mem["old"] not in left and mem["handoff"] not in left
    after = _snapshot(repo)
    everything = "".join(v.decode() for k, v in after.items())
    for never in ("PENDING-NOTE", "AGENT-NOTE", SECRET, "nightly job", "Session ended"):
        assert never not in everything
    # the person's files and text: byte for byte
    for own in (".cursor/rules/team.mdc", ".github/copilot-instructions.md", ".continue/rules/mnemo.md",
                "README.md", "src/payments/charge.py"):
        assert after[own] == before[own]
    claude = (repo / "CLAUDE.md").read_text()
    assert claude.startswith(PERSON_CLAUDE + "\n<!-- mnemo:begin")
    assert "### When working in `src/payments/**`\n\n- Refunds must log the reason code. <!-- mnemo:" in claude
    # each tool's header
    mdc = (repo / ".cursor/rules/mnemo-src-payments.mdc").read_text()
    assert "\nglobs: src/payments/**\nalwaysApply: false\nmnemo: published\n" in mdc
    assert "alwaysApply: true" in (repo / ".cursor/rules/mnemo.mdc").read_text()
    assert "applyTo: 'src/payments/**'" in (repo / ".github/instructions/mnemo-src-payments.instructions.md"
                                            ).read_text()
    assert "applyTo: '**'" in (repo / ".github/instructions/mnemo.instructions.md").read_text()
    ws = (repo / ".windsurf/rules/mnemo-src-payments.md").read_text()
    assert ws.startswith("---\ntrigger: glob\nglobs: src/payments/**\n")
    assert (repo / ".windsurf/rules/mnemo.md").read_text().startswith("---\ntrigger: always_on\n")
    cont = (repo / ".continue/rules/mnemo-src-payments.md").read_text()
    assert cont.startswith("---\nname: 'Mnemo: src/payments/**'\n") and "alwaysApply: false" in cont

    # -- again: nothing changes ---------------------------------------------------------------------------------
    with (repo / "CLAUDE.md").open("a") as f:  # the person writes after the section: theirs too
        f.write("\n## Later notes\n\nAsk before deleting data.\n")
    mine = _snapshot(repo)
    again = cli("publish", "--to", "all")
    assert again["written"] == [] and all(f["status"] in ("unchanged", "skipped") for f in again["files"])
    assert _snapshot(repo) == mine
    dry = cli("publish", "--dry-run", json_out=False).stdout
    assert "no change" in dry

    # -- a memory changes: the dry run shows the diff, writes nothing ------------------------------------------
    cli("edit", mem["tests"], "--text", "Tests use pytest fixtures, never unittest setUp methods.")
    dry = cli("publish", "--dry-run", json_out=False).stdout
    assert "-- a/AGENTS.md" in dry and "+- Tests use pytest fixtures, never unittest setUp methods." in dry
    assert _snapshot(repo) == mine
    cli("publish")
    mine = _snapshot(repo)

    # -- hand edits in every kind of file ----------------------------------------------------------------------
    def edit(rel, old, new):
        p = repo / rel
        text = p.read_text()
        assert old in text, (rel, old)
        p.write_text(text.replace(old, new, 1))

    edit("CLAUDE.md", "Use Decimal for money amounts", "Use Decimal for money values")  # fix a word
    agents_line = _line_of(repo / "AGENTS.md", "Prefer small pull requests.")
    edit("AGENTS.md", agents_line, agents_line + "\n- Run ruff before every commit.")  # a new line
    edit(".cursor/rules/mnemo-src-payments.mdc", _line_of(repo / ".cursor/rules/mnemo-src-payments.mdc",
                                                          "Refunds must log") + "\n", "")  # a deleted line
    edit(".github/instructions/mnemo.instructions.md",
         _line_of(repo / ".github/instructions/mnemo.instructions.md", "problem+json") + "\n", "")
    edit(".windsurf/rules/mnemo.md", "Prefer small pull requests.", "Prefer small, focused pull requests.")
    line = _line_of(repo / ".continue/rules/mnemo-src-payments.md", "Refunds must log")
    edit(".continue/rules/mnemo-src-payments.md", line, line + "\n- Payment amounts are integers in cents.")
    edit(".cursor/rules/mnemo.mdc", "never unittest setUp", "never unittest-style setUp")
    outside = (repo / "CLAUDE.md").read_text().split("<!-- mnemo:end -->")[1]

    res = cli("publish", "--sync")
    s = res["sync"]
    assert {e["id"]: e["status"] for e in s["edited"]} == {mem["money"]: "updated", mem["pr"]: "updated",
                                                           mem["tests"]: "updated"}
    assert {r["id"] for r in s["removed"]} == {mem["refund"], mem["errors"]}
    assert all(r["review_id"] for r in s["removed"])
    added = {a["text"]: a for a in s["added"]}
    assert set(added) == {"Run ruff before every commit.", "Payment amounts are integers in cents."}
    assert all(a["status"] == "created" for a in added.values())
    # the edits landed through update, with history
    hist = cli("history", mem["money"])
    assert [v["text"] for v in hist["versions"]][-2:] == ["Use Decimal for money amounts, never float.",
                                                         "Use Decimal for money values, never float."]
    assert cli("history", mem["pr"])["versions"][-1]["text"] == "Prefer small, focused pull requests."
    # deletions wait in Review; the memories are withheld meanwhile
    items = {i["item_id"]: i for i in cli("review", "--kind", "publish_removed")["items"]}
    assert set(items) == {mem["refund"], mem["errors"]} and "deprecate?" in items[mem["refund"]]["summary"]
    files_text = {k: v.decode() for k, v in _snapshot(repo).items()}
    for rel in ("CLAUDE.md", "AGENTS.md", ".cursor/rules/mnemo.mdc", ".windsurf/rules/mnemo.md"):
        assert "Use Decimal for money values" in files_text[rel] and "Run ruff before every commit." in \
            files_text[rel] and "problem+json" not in files_text[rel], rel
    assert "Refunds must log" not in files_text["AGENTS.md"]
    assert files_text["CLAUDE.md"].startswith(PERSON_CLAUDE)
    assert files_text["CLAUDE.md"].split("<!-- mnemo:end -->")[1] == outside  # after the section: byte for byte
    # the new lines carry their ids now; a second sync finds nothing to do
    assert cli("publish", "--sync")["sync"] == {"edited": [], "removed": [], "added": [], "skipped": [],
                                               "sections_missing": []}

    # -- Review answers: keep brings a memory back, deprecate keeps it out --------------------------------------
    cli("review", "resolve", str(items[mem["refund"]]["id"]), "keep")
    cli("review", "resolve", str(items[mem["errors"]]["id"]), "deprecate")
    cli("publish")
    text = (repo / ".cursor/rules/mnemo-src-payments.mdc").read_text()
    assert "Refunds must log the reason code." in text and "problem+json" not in (repo / "AGENTS.md").read_text()
    listed = {m["id"]: m for m in cli("list", "--deprecated")["memories"]}
    assert listed[mem["errors"]]["deprecated"] is True and listed[mem["refund"]]["deprecated"] is False

    # -- the published files activate for their paths, and are never injected twice ---------------------------
    act = cli("skills", "activate", "--file", "src/payments/charge.py")
    by_path = {Path(a["source_path"]).relative_to(repo).as_posix(): a for a in act["activations"]}
    for rel in (".cursor/rules/mnemo-src-payments.mdc", ".github/instructions/mnemo-src-payments.instructions.md",
                ".windsurf/rules/mnemo-src-payments.md", ".continue/rules/mnemo-src-payments.md",
                ".cursor/rules/mnemo.mdc", ".github/instructions/mnemo.instructions.md", ".windsurf/rules/mnemo.md",
                "AGENTS.md"):
        assert by_path[rel]["published"] is True and by_path[rel]["injected"] is False, rel
    assert by_path["CLAUDE.md"]["published"] is False  # the person's text of CLAUDE.md is a rule as before
    other = cli("skills", "activate", "--file", "README.md")
    paths = {Path(a["source_path"]).relative_to(repo).as_posix() for a in other["activations"]}
    assert ".cursor/rules/mnemo.mdc" in paths and ".cursor/rules/mnemo-src-payments.mdc" not in paths
    assert ".continue/rules/mnemo-src-payments.md" not in paths and ".windsurf/rules/mnemo-src-payments.md" \
        not in paths
    prompt = cli("skills", "activate", "--file", "src/payments/charge.py", "--prompt", json_out=False).stdout
    assert "Hand-written rules" in prompt and "Ask before deleting data." in prompt
    assert "mnemo:begin" not in prompt and "Refunds must log" not in prompt  # no loop: not read back as a rule
    block = cli("context", "--file", "src/payments/charge.py", "--message", "how are refunds logged?")
    assert "mnemo:begin" not in block["markdown"] and "mnemo-src-payments" not in block["markdown"]


def test_publish_on_change_and_status(cli, repo):
    mid = cli("remember", "Use Decimal for money amounts, never float.", "--type", "feedback",
              "--kind", "decision")["memory"]["id"]
    cli("publish", "--to", "claude,cursor")
    st = cli("hooks", "status")
    assert st["published"]["out_of_date"] == 0
    cli("config", "set", "publish_on_change", "claude,cursor")
    bad = cli("config", "set", "publish_on_change", "vim", json_out=False, ok=False)
    assert bad.returncode == 2 and "claude" in bad.stderr
    cli("edit", mid, "--text", "Use Decimal for every money amount, never float.")
    deadline = time.monotonic() + 30
    while "every money amount" not in (repo / "CLAUDE.md").read_text():
        assert time.monotonic() < deadline, (repo / "CLAUDE.md").read_text()
        time.sleep(0.2)
    assert "every money amount" in (repo / ".cursor/rules/mnemo.mdc").read_text()
    cli("config", "set", "publish_on_change", "off")
    cli("remember", "Prefer small pull requests.", "--type", "feedback", "--kind", "pattern")
    st = cli("hooks", "status")
    out = {f["path"]: f["state"] for f in st["published"]["files"]}
    assert out["CLAUDE.md"] == "out of date" and out[".cursor/rules/mnemo.mdc"] == "out of date"
    doc = json.loads(cli("doctor", ok=False).stdout)
    check = next(c for c in doc["checks"] if c["name"] == "published files")
    assert check["status"] == "warn" and "CLAUDE.md" in check["detail"] and "mnemo publish" in check["fix"]
