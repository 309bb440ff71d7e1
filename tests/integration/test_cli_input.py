"""Issue 21, input and messages: what a person types (or pipes) into the real CLI, and what it says back. Every
test runs `python -m mnemo` subprocesses on a temporary store and git repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from team_server import chroma_server  # noqa: F401 - fixture

from mnemo.daemon.client import DaemonService

ENV = {"MNEMO_EMBEDDER": "hash", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.fixture
def mnemo(home, git_repo):
    def run(*args: str, stdin: bytes | None = None, ok: bool | None = True) -> subprocess.CompletedProcess:
        env = dict(os.environ, MNEMO_HOME=str(home), **ENV)
        r = subprocess.run([sys.executable, "-m", "mnemo", *args], cwd=git_repo, env=env, input=stdin or b"",
                           capture_output=True, timeout=120)
        r.out, r.err = r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")
        if ok:
            assert r.returncode == 0, r.err + r.out
        return r

    yield run
    DaemonService(home, autostart=False).shutdown()


def as_json(r) -> dict:
    return json.loads(r.out)


def no_traceback(home: Path, *outputs: str) -> None:
    for text in outputs:
        assert "Traceback" not in text and "codec can't" not in text, text
    for log in home.rglob("*.log"):
        assert "Traceback" not in log.read_text(errors="replace"), log.read_text(errors="replace")[-2000:]


def test_invalid_utf8_in_an_argument_is_refused_clearly(mnemo, home):
    """Item 6: `mnemo remember "$(printf 'a \\xff\\xfe')"` ended in "remember failed: 'utf-8' codec can't encode
    ... see daemon.log" with a traceback in the log."""
    bad = os.fsdecode(b"a \xff\xfe")
    r = mnemo("remember", bad, ok=False)
    assert r.returncode == 2
    assert "the text argument is not valid UTF-8 (byte 0xff" in r.err and "what to do" in r.err, r.err
    r = mnemo("remember", "fine text", "--kind", os.fsdecode(b"k\xe9"), ok=False)
    assert "--kind is not valid UTF-8 (byte 0xe9" in r.err, r.err
    r = mnemo("recall", bad, "--json", ok=False)
    assert as_json(r)["error"]["code"] == "invalid_input"
    no_traceback(home, r.out, r.err)
    assert as_json(mnemo("list", "--json"))["total"] == 0


def test_a_binary_md_file_is_refused_per_file(mnemo, home, tmp_path):
    """Item 6: a binary `.md` ended the whole import in "markdown_import failed: 'utf-8' codec can't decode...";
    now that file is named with the byte, and the other files of the folder still go in."""
    mid = as_json(mnemo("remember", "staging deploys need the VPN", "--json"))["memory"]["id"]
    out = tmp_path / "export"
    mnemo("export", str(out))
    [exported] = list(out.glob("*.md"))
    exported.write_text(exported.read_text().replace("staging deploys need the VPN", "staging deploys need VPN 2"))
    (out / "zz-image.md").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00binary")
    r = mnemo("import", str(out), "--json")
    res = as_json(r)
    assert [e["id"] for e in res["edited"]] == [mid], res
    assert res["unreadable"] == [{"file": "zz-image.md", "reason": "not UTF-8 text (byte 0x89 at offset 0); nothing "
                                                                   "was read from it"}]
    human = mnemo("import", str(out))
    assert "unreadable zz-image.md: not UTF-8 text (byte 0x89" in human.out
    r = mnemo("import", str(out / "zz-image.md"), ok=False)
    assert r.returncode == 2 and "zz-image.md is not UTF-8 text (byte 0x89 at offset 0)" in r.err, r.err
    no_traceback(home, r.out, r.err, human.out, human.err)
    assert as_json(mnemo("list", "--json"))["memories"][0]["text"] == "staging deploys need VPN 2"


def test_remember_dash_reads_standard_input(mnemo):
    """Item 7: `printf x | mnemo remember -` stored the text "-"."""
    res = as_json(mnemo("remember", "-", "--json", stdin=b"deploys go through the blue/green switch\n"))
    assert res["memory"]["text"] == "deploys go through the blue/green switch"
    mid = res["memory"]["id"]
    edited = as_json(mnemo("edit", mid, "--text", "-", "--json", stdin=b"deploys go through the canary first"))
    assert edited["memory"]["text"] == "deploys go through the canary first"
    r = mnemo("remember", "-", stdin=b"", ok=False)
    assert r.returncode == 2 and "standard input is empty" in r.err
    r = mnemo("remember", "-", stdin=b"a \xff", ok=False)
    assert "standard input is not valid UTF-8 text (byte 0xff at offset 2)" in r.err
    assert [m["text"] for m in as_json(mnemo("list", "--json"))["memories"]] == ["deploys go through the canary first"]


def test_tag_and_tags_are_one_spelling_everywhere(mnemo):
    """Item 7: `remember --tags a,b` was refused while `edit --tags a,b` worked."""
    a = as_json(mnemo("remember", "payments retry with backoff", "--tags", "payments,retries", "--json"))["memory"]
    assert a["tags"] == ["payments", "retries"]
    b = as_json(mnemo("remember", "search uses BM25", "--tag", "search", "--tag", "ranking,bm25", "--json"))["memory"]
    assert b["tags"] == ["search", "ranking", "bm25"]
    assert as_json(mnemo("edit", a["id"], "--tag", "payments", "--tags", "api", "--json"))["memory"]["tags"] == \
        ["payments", "api"]
    listed = as_json(mnemo("list", "--tags", "payments,api", "--json"))
    assert [m["id"] for m in listed["memories"]] == [a["id"]]
    recalled = as_json(mnemo("recall", "ranking", "--tags", "bm25", "--min-confidence", "0", "--json"))
    assert {c["item_id"] for c in recalled["cards"]} == {b["id"]}
    assert as_json(mnemo("edit", a["id"], "--tags", "", "--json"))["memory"]["tags"] == []


def test_list_refuses_a_limit_out_of_range(mnemo):
    """Item 7: `list --limit -1` dropped a row and `--limit 0` listed nothing; refused now, as `recall` does."""
    for text in ("one note", "another note", "a third note"):
        mnemo("remember", text)
    for limit in ("-1", "0"):
        r = mnemo("list", "--limit", limit, ok=False)
        assert r.returncode == 2 and f"limit {limit} is out of range" in r.err and "1 or more" in r.err, r.err
    assert as_json(mnemo("list", "--limit", "2", "--json"))["total"] == 3
    assert len(as_json(mnemo("list", "--limit", "2", "--json"))["memories"]) == 2


def test_a_closed_pipe_ends_quietly(mnemo, home, git_repo):
    """Item 8: `mnemo list --json | head -1` ended in a BrokenPipeError traceback. The reader here closes its end
    before the command writes, so every write hits a closed pipe (what `head` does once it has its line)."""
    mnemo("remember", "a note to list")
    env = dict(os.environ, MNEMO_HOME=str(home), **ENV)
    for args in (["list", "--json"], ["list"], ["stats"], ["--help"], ["recall", "note"]):
        proc = subprocess.Popen([sys.executable, "-m", "mnemo", *args], cwd=git_repo, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdout.close()
        err = proc.stderr.read().decode()
        proc.wait(timeout=120)
        assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, (args, err)
        assert proc.returncode in (0, 1, 141), (args, proc.returncode, err)  # rich exits 1 on a closed pipe


@pytest.mark.team
def test_promote_and_deprecate_name_the_scope_they_reached(mnemo, home, chroma_server):  # noqa: F811
    """Item 9: `mnemo promote ID --to team` printed "promoted ID → project" although the note reached the team
    store, and `deprecate` likewise named the local scope only. A real Chroma team server."""
    from mnemo.core.team.address import save_settings

    save_settings(home, chroma_server.url, None, "cli-input")
    mid = as_json(mnemo("remember", "payments retries use exponential backoff", "--json"))["memory"]["id"]
    out = mnemo("promote", mid, "--to", "team").out
    rid = next(w for w in out.split() if w.startswith("team-"))
    assert f"promoted {mid} → team" in out and "project" not in out.splitlines()[0], out
    assert f"shared with the team (cli-input) as {rid}" in out
    as_team = as_json(mnemo("recall", "payments retries backoff", "--scope", "team", "--min-confidence", "0",
                            "--json"))
    assert [c["item_id"] for c in as_team["cards"]] == [rid]
    out = mnemo("deprecate", mid, "--reason", "moved to the gateway").out
    assert f"deprecated {mid} (project scope)" in out, out
    assert f"its team copy {rid} is still shared: `mnemo deprecate {rid}`" in out, out
    out = mnemo("deprecate", rid, "--reason", "moved to the gateway").out
    assert f"deprecated {rid} (team scope)" in out and "for the whole team" in out, out
    mid2 = as_json(mnemo("remember", "search indexes rebuild nightly", "--json"))["memory"]["id"]
    assert f"promoted {mid2} → global" in mnemo("promote", mid2).out


def test_a_queued_promotion_says_team_not_project(mnemo, home):
    """Item 9, the team server down: the promotion is queued for the team; the line says so."""
    from team_server import free_port

    from mnemo.core.team.address import save_settings

    save_settings(home, f"http://127.0.0.1:{free_port()}", None, "cli-input")
    mid = as_json(mnemo("remember", "deploy windows are Tuesday and Thursday", "--json"))["memory"]["id"]
    out = mnemo("promote", mid, "--to", "team").out
    assert f"queued {mid} → team" in out and "unreachable" in out, out


def test_review_update_on_a_vanished_symbol_says_it_and_history_keeps_it(mnemo, home, git_repo):
    """Item 12: `review resolve N update` on an anchor whose symbol vanished dropped the anchor silently, and
    `history` showed neither that nor forget and restore."""
    from mnemo.core.identity import detect_context

    (git_repo / "pay.py").write_text("class Pay:\n    def charge(self, amount):\n        return amount\n")
    mid = as_json(mnemo("remember", "charge must be idempotent: retries reuse the key", "--json"))["memory"]["id"]
    mnemo("anchor", mid, "--file", "pay.py", "--symbol", "charge")
    (git_repo / "pay.py").write_text("class Pay:\n    def bill(self, amount):\n        return amount\n")
    svc = DaemonService(home, autostart=False)  # what the editor sends on save: the file's symbols now
    try:
        checked = svc.check_anchors(detect_context(git_repo).to_dict(), "pay.py", [{"name": "Pay.bill",
                                                                                 "hash": "1" * 64}])
    finally:
        svc.close()
    assert checked["flagged"], checked
    [item] = [it for it in as_json(mnemo("review", "--json"))["items"] if it["kind"] == "stale_anchor"]
    out = mnemo("review", "resolve", str(item["id"]), "update").out
    assert "dropped the anchor pay.py › Pay.charge" in out and "no longer in the file" in out, out
    assert as_json(mnemo("history", mid, "--json"))["events"][0]["event"] == "anchor dropped"
    human = mnemo("history", mid).out
    assert "anchor dropped (pay.py › Pay.charge: the symbol is no longer in the file" in human, human

    mnemo("forget", mid, "--reason", "the charge flow was rewritten")
    hist = as_json(mnemo("history", mid, "--json"))
    assert hist["forgotten"] is True and hist["events"][-1]["event"] == "forgotten"
    assert hist["events"][-1]["detail"] == "the charge flow was rewritten"
    assert "forgotten (`mnemo restore` brings it back)" in mnemo("history", mid).out
    mnemo("restore", mid)
    hist = as_json(mnemo("history", mid, "--json"))
    assert hist["forgotten"] is False
    assert [e["event"] for e in hist["events"]] == ["anchor dropped", "forgotten", "restored"]
    assert "restored (from its tombstone)" in mnemo("history", mid).out


def test_stats_counts_the_write_ahead_log(mnemo, home, tmp_path):
    """Item 13: `mnemo stats` reported db_bytes 4096 while mnemo.db-wal held 2.1 MB."""
    batch = tmp_path / "notes.jsonl"
    batch.write_text("\n".join(json.dumps({"text": f"note {i}: the ledger service shards by account id {i * 7919}"})
                               for i in range(400)))
    mnemo("import", str(batch))
    wal = home / "mnemo.db-wal"
    assert wal.exists() and wal.stat().st_size > 100_000, "the owner's writes are in the WAL"
    store = as_json(mnemo("stats", "--json"))["store"]
    assert store["wal_bytes"] > 100_000 and store["db_bytes"] > 0, store
    assert store["total_bytes"] == store["db_bytes"] + store["wal_bytes"]
    human = mnemo("stats").out
    assert "wal_bytes" in human and "total_bytes" in human


def test_a_filtered_recall_shows_every_match_unless_a_floor_is_asked(mnemo):
    """Item 14: a filtered recall asks for what matches the filter: every match, ranked, with its confidence (the
    store-wide floor hid the README's own example note at 0.11); a floor the call gives still applies."""
    mid = as_json(mnemo("remember", "payments API requires idempotency keys on every POST", "--kind", "decision",
                        "--tag", "payments", "--json"))["memory"]["id"]
    mnemo("remember", "the nightly export writes CSV files to the finance bucket", "--kind", "lesson")
    res = as_json(mnemo("recall", "zebra migration patterns", "--kind", "decision", "--tag", "payments", "--json"))
    assert [c["item_id"] for c in res["cards"]] == [mid] and res["min_confidence"] == 0, res
    assert res["cards"][0]["confidence"] < 0.15, res  # shown although under the default floor, with its confidence
    res = as_json(mnemo("recall", "zebra migration patterns", "--kind", "decision", "--min-confidence", "0.9",
                        "--json"))
    assert res["cards"] == [] and res["hidden_low_confidence"] == 1, res
    res = as_json(mnemo("recall", "zebra migration patterns", "--json"))  # no filter: the floor as before
    assert res["min_confidence"] == 0.15


def test_the_owner_refuses_text_that_is_not_unicode_from_any_client(mnemo, home, git_repo):
    """Item 6, every surface: a lone surrogate reaching the owner (from a client that let bytes that were not UTF-8
    through: an editor, a script on the socket) ended in "remember failed: 'utf-8' codec can't encode ... see
    daemon.log" with a traceback. The owner now refuses it naming the argument; its log stays clean."""
    from mnemo.core.errors import InvalidInput
    from mnemo.core.identity import detect_context

    mnemo("daemon", "start")
    ctx = detect_context(git_repo).to_dict()
    svc = DaemonService(home, autostart=False)  # the owner's socket client, which the CLI, LSP and MCP use
    try:
        with pytest.raises(InvalidInput) as exc:
            svc.remember(ctx, "a \udcff\udcfe")
        assert "`text` is not valid Unicode (it holds a lone surrogate, \\udcff" in exc.value.message
        with pytest.raises(InvalidInput) as exc:
            svc.remember(ctx, "fine text", tags=["ok", "bad \udce9"])
        assert "`tags[1]` is not valid Unicode" in exc.value.message
        assert svc.list_memories(ctx)["total"] == 0
    finally:
        svc.close()
    no_traceback(home)
