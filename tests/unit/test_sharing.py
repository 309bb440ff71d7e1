"""Sharing: snapshot export / diff / merge (strategies, provenance, hostile files), branch memory, merged branches."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import git
from mnemo.core import lifecycle, review, sharing
from mnemo.core.engine import Engine
from mnemo.core.errors import InvalidInput, NotFound, SnapshotError
from mnemo.core.memory.manage import forget, list_memories, promote
from mnemo.core.memory.recall import recall
from mnemo.core.memory.write import remember
from mnemo.core.text import content_hash


def dump(engine) -> dict:
    conn = engine.store.conn()
    out = {}
    for table in ("memories", "vectors", "review", "tombstones", "fts"):
        rows = conn.execute(f"SELECT * FROM {table}").fetchall()
        out[table] = sorted(tuple(r) for r in rows)
    has_decay = conn.execute("SELECT name FROM sqlite_master WHERE name='decay_state'").fetchone()
    out["decay_state"] = sorted(tuple(r) for r in conn.execute("SELECT * FROM decay_state")) if has_decay else []
    return out


@pytest.fixture
def other(tmp_path, hash_embedder):
    e = Engine(tmp_path / "other-home", embedder=hash_embedder, start_indexer=False)
    yield e
    e.close()


def fill(engine, ctx):
    a = remember(engine, ctx, "payments API requires idempotency keys on every POST", kind="decision",
                        tags=["payments"])["memory"]
    b = remember(engine, ctx, "I prefer small commits", type="user")["memory"]
    c = remember(engine, replace(ctx, branch="feature/auth"), "OAuth2 with PKCE for mobile clients")["memory"]
    g = remember(engine, ctx, "Always pin torch to the CPU wheel")["memory"]
    promote(engine, ctx, g["id"])
    lifecycle.anchor(engine, ctx, a["id"], {"path": "src/pay.py", "symbol": "charge", "hash": "abc"})
    return a, b, c, g


def test_export_import_roundtrip_keeps_ids_text_metadata_provenance(engine, other, ctx, tmp_path):
    fill(engine, ctx)
    lifecycle.decay(engine, ctx)
    path = tmp_path / "out.mnemo"
    res = sharing.export_snapshot(engine, ctx, str(path))
    assert res["memories"] == 4 and res["by_scope"] == {"project": 3, "global": 1}
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.mnemo")]  # no temp file left
    m = sharing.merge_snapshot(other, ctx, str(path))
    assert (m["imported"], m["skipped_duplicates"], m["conflicts"]) == (4, 0, 0)
    src = {r[0]: r for r in engine.store.conn().execute("SELECT * FROM memories")}
    dst = {r[0]: r for r in other.store.conn().execute("SELECT * FROM memories")}
    assert src.keys() == dst.keys()
    for mid, row in src.items():
        a, b = dict(row), dict(dst[mid])
        pa, pb = json.loads(a.pop("provenance")), json.loads(b.pop("provenance"))
        assert pb.pop("imported_from")["id"] == mid
        a.pop("trust")
        assert b.pop("trust") == "untrusted"  # imports are untrusted until a person accepts them (SPEC §7)
        assert pa == pb and a == b
    assert engine.store.vectors(list(src)) == other.store.vectors(list(dst))  # no re-embedding
    card = recall(other, ctx, "idempotency keys POST", limit=1)["cards"][0]
    assert card["imported_from"]["snapshot"] == "out.mnemo"
    assert list_memories(other, ctx)["total"] == 3  # main view: not the feature branch's memory


def test_diff_writes_nothing_and_matches_the_merge(engine, other, ctx, tmp_path):
    fill(engine, ctx)
    path = tmp_path / "s.mnemo"
    sharing.export_snapshot(engine, ctx, str(path))
    remember(other, ctx, "I prefer small commits", type="user")
    before = dump(other)
    d = sharing.diff_snapshot(other, ctx, str(path))
    assert dump(other) == before
    assert d["dry_run"] and (d["imported"], d["skipped_duplicates"]) == (3, 1)
    m = sharing.merge_snapshot(other, ctx, str(path))
    assert (m["imported"], m["skipped_duplicates"]) == (3, 1)
    assert other.store.get_memory(m["new"][0]["id"]) is not None
    again = sharing.merge_snapshot(other, ctx, str(path))
    assert again["imported"] == 0 and again["skipped_duplicates"] == 4 and again["changes"] == 0


def test_export_filters_by_scope_and_branch(engine, ctx, tmp_path):
    fill(engine, ctx)
    r = sharing.export_snapshot(engine, ctx, str(tmp_path / "g.mnemo"), scopes=["global"])
    assert r["by_scope"] == {"global": 1}
    r = sharing.export_snapshot(engine, ctx, str(tmp_path / "b.mnemo"), branches=["feature/auth"])
    assert r["memories"] == 1 and r["by_branch"] == {"feature/auth": 1}
    with pytest.raises(InvalidInput):
        sharing.export_snapshot(engine, ctx, str(tmp_path / "x.mnemo"), scopes=["team"])
    with pytest.raises(InvalidInput):
        sharing.export_snapshot(engine, ctx, "relative.mnemo")


def _conflict_setup(engine, other, ctx, tmp_path, remote_newer: bool):
    """Same memory id on both sides, different text: local edited after (or before) the exported version."""
    m = remember(engine, ctx, "the build uses make")["memory"]
    path = tmp_path / "s.mnemo"
    sharing.export_snapshot(engine, ctx, str(path))
    sharing.merge_snapshot(other, ctx, str(path))
    # remote side changes it
    new_text = "the build uses bazel"
    t_remote = m["updated_at"] + (100 if remote_newer else 10)
    with engine.store.write() as c:
        engine.store.update_memory(c, m["id"], text=new_text, content_hash=content_hash(new_text),
                                   updated_at=t_remote)
    sharing.export_snapshot(engine, ctx, str(path))
    local_text = "the build uses cmake"
    with other.store.write() as c:
        other.store.update_memory(other.store.conn(), m["id"], text=local_text, content_hash=content_hash(local_text),
                                  updated_at=m["updated_at"] + 50)
    return m["id"], path, local_text, new_text


@pytest.mark.parametrize("strategy,remote_newer,expect", [
    ("local_wins", True, "local"), ("remote_wins", False, "remote"), ("newer_wins", True, "remote"),
    ("newer_wins", False, "local"), ("keep_both", True, "both"),
])
def test_strategies_keep_the_promised_side(engine, other, ctx, tmp_path, strategy, remote_newer, expect):
    mid, path, local_text, remote_text = _conflict_setup(engine, other, ctx, tmp_path, remote_newer)
    d = sharing.diff_snapshot(other, ctx, str(path), strategy)
    assert d["conflicts"] == 1
    r = sharing.merge_snapshot(other, ctx, str(path), strategy)
    assert r["conflicts"] == 1 and r["conflict_details"][0]["local"]["text"] == local_text
    texts = {m["text"] for m in list_memories(other, ctx)["memories"]}
    assert other.store.get_memory(mid).text == (remote_text if expect == "remote" else local_text)
    if expect == "both":
        assert texts == {local_text, remote_text} and r["resolutions"]["kept_both"] == 1
        copy = [m for m in list_memories(other, ctx)["memories"] if m["text"] == remote_text][0]
        assert copy["provenance"]["imported_from"]["id"] == mid
    else:
        assert texts == {remote_text if expect == "remote" else local_text}
    before = dump(other)
    r2 = sharing.merge_snapshot(other, ctx, str(path), strategy)
    assert r2["changes"] == 0 and dump(other) == before  # merging twice changes nothing


def test_merge_skips_what_was_forgotten_here(engine, other, ctx, tmp_path):
    m = remember(engine, ctx, "an old note nobody needs")["memory"]
    path = tmp_path / "s.mnemo"
    sharing.export_snapshot(engine, ctx, str(path))
    forget(engine, ctx, m["id"])
    r = sharing.merge_snapshot(engine, ctx, str(path))
    assert r["skipped_forgotten"] == 1 and r["imported"] == 0


def test_merge_reembeds_when_the_model_differs(engine, ctx, tmp_path, real_embedder):
    remember(engine, ctx, "payments API requires idempotency keys on every POST")
    path = tmp_path / "s.mnemo"
    sharing.export_snapshot(engine, ctx, str(path))
    e = Engine(tmp_path / "real", embedder=real_embedder, start_indexer=False)
    try:
        sharing.merge_snapshot(e, ctx, str(path))
        rows = e.store.conn().execute("SELECT model_id, length(vec) FROM vectors").fetchall()
        assert [tuple(r) for r in rows] == [(real_embedder.model_id, 384 * 4)]
    finally:
        e.close()


def test_merge_writes_a_review_record(engine, other, ctx, tmp_path):
    fill(engine, ctx)
    path = tmp_path / "s.mnemo"
    sharing.export_snapshot(engine, ctx, str(path))
    r = sharing.merge_snapshot(other, ctx, str(path))
    items = review.review_list(other, ctx, kind="snapshot_merge")["items"]
    assert [i["id"] for i in items] == [r["review_id"]] and "imported 4" in items[0]["summary"]


def test_atomic_export_never_leaves_a_half_file(engine, ctx, tmp_path, monkeypatch):
    remember(engine, ctx, "first version")
    path = tmp_path / "s.mnemo"
    sharing.export_snapshot(engine, ctx, str(path))
    good = path.read_bytes()
    remember(engine, ctx, "second note")

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        sharing.export_snapshot(engine, ctx, str(path))
    assert path.read_bytes() == good
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == ["s.mnemo"]


# -- hostile snapshots -----------------------------------------------------------------------------------------
def _rebuild(head: dict, records: list[dict], *, fix_manifest=True, fix_records=True) -> bytes:
    lines = []
    for rec in records:
        sha = sharing.sha256(sharing.canonical(rec)) if fix_records else "0" * 64
        lines.append(sharing.canonical({"record": rec, "sha256": sha}) + b"\n")
    body = b"".join(lines)
    man = dict(head["manifest"])
    if fix_manifest:
        man["body_bytes"], man["body_sha256"] = len(body), sharing.sha256(body)
        man["counts"] = dict(man["counts"], records=len(records))
    h = dict(head, manifest=man, manifest_sha256=sharing.sha256(sharing.canonical(man)))
    return sharing.canonical(h) + b"\n" + body


@pytest.fixture
def good_snapshot(engine, ctx, tmp_path):
    fill(engine, ctx)
    path = tmp_path / "good.mnemo"
    sharing.export_snapshot(engine, ctx, str(path))
    data = path.read_bytes()
    head = json.loads(data.split(b"\n", 1)[0])
    records = [json.loads(line)["record"] for line in data.split(b"\n")[1:] if line]
    return data, head, records


def _refused(other, ctx, tmp_path, data: bytes, name="bad.mnemo", match=None):
    p = tmp_path / name
    p.write_bytes(data)
    before = dump(other)
    with pytest.raises(SnapshotError) as exc:
        sharing.merge_snapshot(other, ctx, str(p))
    with pytest.raises(SnapshotError):
        sharing.diff_snapshot(other, ctx, str(p))
    assert dump(other) == before
    assert "nothing was changed" in exc.value.message and exc.value.hint
    if match:
        assert match in exc.value.message, exc.value.message
    return exc.value


def test_truncated_at_every_offset_is_refused(other, ctx, tmp_path, good_snapshot):
    data = good_snapshot[0]
    offsets = sorted(set(range(0, len(data), max(1, len(data) // 150))) | {len(data) - 1, data.index(b"\n"),
                                                                          data.index(b"\n") + 1})
    for off in offsets:
        _refused(other, ctx, tmp_path, data[:off])
    assert len(offsets) >= 150


def test_bit_flips_are_refused(other, ctx, tmp_path, good_snapshot):
    data = good_snapshot[0]
    step = max(1, len(data) // 200)
    n = 0
    for pos in range(0, len(data), step):
        for bit in (0, 5):
            b = bytearray(data)
            b[pos] ^= 1 << bit
            _refused(other, ctx, tmp_path, bytes(b))
            n += 1
    assert n >= 400


def test_wrong_record_checksum_is_refused(other, ctx, tmp_path, good_snapshot):
    _, head, records = good_snapshot
    _refused(other, ctx, tmp_path, _rebuild(head, records, fix_records=False), match="checksum")
    # whole-file checksum stale (a record edited without updating the manifest)
    data = good_snapshot[0]
    tampered = data.replace(b"idempotency", b"IDEMPOTENCY", 1)
    _refused(other, ctx, tmp_path, tampered, match="checksum")


def test_huge_record_and_huge_file_are_refused(other, ctx, tmp_path, good_snapshot, monkeypatch):
    _, head, records = good_snapshot
    big = dict(records[0], text="x" * 1_000_000)
    big["content_hash"] = content_hash(big["text"])
    _refused(other, ctx, tmp_path, _rebuild(head, [big]), match="over the record limit")
    monkeypatch.setenv("MNEMO_SNAPSHOT_MAX_RECORD_BYTES", str(10**8))
    _refused(other, ctx, tmp_path, _rebuild(head, [big]), match="text")  # the text cap still holds
    monkeypatch.setenv("MNEMO_SNAPSHOT_MAX_BYTES", "1000")
    _refused(other, ctx, tmp_path, good_snapshot[0], match="over the snapshot limit")


def test_future_format_version_is_refused(other, ctx, tmp_path, good_snapshot):
    _, head, records = good_snapshot
    err = _refused(other, ctx, tmp_path, _rebuild(dict(head, version=2), records), match="newer")
    assert "upgrade" in err.hint


@pytest.mark.parametrize("content", [
    b"", b"hello world\n", b'{"some": "json"}\n', b"\x00\x01\x02\xff" * 100, b"[1,2,3]\n{}\n",
    b"SQLite format 3\x00" + b"\x00" * 200, b'{"format":"mnemo-snapshot"',
])
def test_not_a_snapshot_is_refused(other, ctx, tmp_path, content):
    _refused(other, ctx, tmp_path, content)


def test_bad_records_are_refused(other, ctx, tmp_path, good_snapshot):
    _, head, records = good_snapshot
    r0 = records[0]
    cases = {
        "content_hash": dict(r0, content_hash="0" * 32),
        "outside the project": dict(r0, anchors=[{"path": "../../etc/passwd"}]),
        "importance": dict(r0, importance=7),
        "scope": dict(r0, scope="team"),
        "valid id": dict(r0, id="../../x"),
        "vector": dict(r0, vector={"model_id": "m", "dim": 384, "b64": base64.b64encode(b"\x00" * 12).decode()}),
    }
    for match, rec in cases.items():
        _refused(other, ctx, tmp_path, _rebuild(head, [rec]), match=match)
    _refused(other, ctx, tmp_path, _rebuild(head, [r0, r0]), match="twice")
    nan = dict(r0, vector={"model_id": "m", "dim": 1,
                           "b64": base64.b64encode(bytes.fromhex("0000c07f")).decode()})
    _refused(other, ctx, tmp_path, _rebuild(head, [nan]), match="non-finite")


def test_missing_file_and_directory(other, ctx, tmp_path):
    with pytest.raises(NotFound):
        sharing.merge_snapshot(other, ctx, str(tmp_path / "nope.mnemo"))
    with pytest.raises(SnapshotError):
        sharing.merge_snapshot(other, ctx, str(tmp_path))


def test_invisible_unicode_in_a_snapshot_is_stripped_and_flagged(other, ctx, tmp_path, good_snapshot):
    _, head, records = good_snapshot
    rec = dict(records[0], text="pay\u200bments use Stripe")
    rec["content_hash"] = content_hash(rec["text"])
    p = tmp_path / "u.mnemo"
    p.write_bytes(_rebuild(head, [rec]))
    sharing.merge_snapshot(other, ctx, str(p))
    m = other.store.get_memory(rec["id"])
    assert m.text == "payments use Stripe" and "invisible_unicode_stripped" in m.flags


# -- branch memory ---------------------------------------------------------------------------------------------
def _texts(engine, ctx):
    return {m["text"] for m in list_memories(engine, ctx)["memories"]}


def test_design_notes_scenario(engine, ctx):
    """main: "FastAPI backend"; feature/auth: "OAuth2 with PKCE"; merge; delete; user memories untouched."""
    remember(engine, ctx, "FastAPI backend")
    pref = remember(engine, ctx, "I prefer type hints", type="user")["memory"]
    feature = replace(ctx, branch="feature/auth")
    remember(engine, feature, "OAuth2 with PKCE for mobile clients")
    assert _texts(engine, feature) == {"FastAPI backend", "OAuth2 with PKCE for mobile clients",
                                       "I prefer type hints"}
    assert _texts(engine, ctx) == {"FastAPI backend", "I prefer type hints"}
    d = sharing.branch_diff(engine, ctx, "feature/auth")
    assert d["imported"] == 1 and _texts(engine, ctx) == {"FastAPI backend", "I prefer type hints"}
    m = sharing.branch_merge(engine, ctx, "feature/auth")
    assert (m["imported"], m["skipped_duplicates"]) == (1, 0)
    assert _texts(engine, ctx) == {"FastAPI backend", "OAuth2 with PKCE for mobile clients",
                                   "I prefer type hints"}
    copy = next(x for x in list_memories(engine, ctx)["memories"] if x["text"].startswith("OAuth2"))
    assert copy["branch"] == "main" and copy["provenance"]["merged_from"]["branch"] == "feature/auth"
    assert sharing.branch_merge(engine, ctx, "feature/auth")["imported"] == 0  # idempotent
    r = sharing.branch_delete(engine, ctx, "feature/auth")
    assert r["deleted"] == 1 and r["unmerged"] == 0
    assert _texts(engine, ctx) == {"FastAPI backend", "OAuth2 with PKCE for mobile clients",
                                   "I prefer type hints"}
    assert engine.store.get_memory(pref["id"]).to_dict() == pref | {"last_accessed": engine.store.get_memory(
        pref["id"]).last_accessed, "access_count": engine.store.get_memory(pref["id"]).access_count}
    assert engine.store.conn().execute("SELECT COUNT(*) FROM memories WHERE branch='feature/auth'").fetchone()[0] == 0


def test_branch_override_becomes_a_supersede_on_merge(engine, ctx):
    old = remember(engine, ctx, "API timeout is 30 seconds for payment calls")["memory"]
    feature = replace(ctx, branch="feature/slow")
    new = remember(engine, feature, "API timeout is 60 seconds for payment calls")["memory"]
    d = sharing.branch_diff(engine, ctx, "feature/slow")
    assert d["supersedes"] == 1 and d["superseded"][0]["memory"]["id"] == old["id"]
    m = sharing.branch_merge(engine, ctx, "feature/slow")
    assert engine.store.get_memory(old["id"]).superseded_by == m["copies"][new["id"]]
    assert _texts(engine, ctx) == {"API timeout is 60 seconds for payment calls"}


def test_after_a_merge_into_main_the_branch_shows_each_note_once(engine, ctx):
    """Issue 21 item 15: a feature branch sees main's memories too, so after a merge its own notes give way to
    their copies on main (superseded, `merged_into`); a merge into another feature branch leaves them alone."""
    feature = replace(ctx, branch="feature/retry")
    notes = ["Retries use exponential backoff with full jitter", "The retry budget is five attempts per request"]
    mine = [remember(engine, feature, t)["memory"]["id"] for t in notes]
    other = replace(ctx, branch="feature/other")
    assert sharing.branch_merge(engine, other, "feature/retry")["imported"] == 2
    assert all(engine.store.get_memory(i).superseded_by is None for i in mine)
    m = sharing.branch_merge(engine, ctx, "feature/retry")
    assert m["imported"] == 2
    for view in (ctx, feature):
        shown = [x["text"] for x in list_memories(engine, view)["memories"]]
        assert sorted(shown) == sorted(notes), (view.branch, shown)
        cards = recall(engine, view, "retry backoff attempts", limit=10)["cards"]
        assert len([c for c in cards if c["compressed_summary"] in notes]) == len(
            {c["compressed_summary"] for c in cards if c["compressed_summary"] in notes})
    gone = engine.store.get_memory(mine[0])
    assert gone.superseded_by == m["copies"][mine[0]] and gone.provenance["merged_into"]["branch"] == "main"
    assert sharing.branch_merge(engine, ctx, "feature/retry")["imported"] == 0
    assert sharing.branch_delete(engine, ctx, "feature/retry")["unmerged"] == 0


def test_branch_guards(engine, ctx):
    with pytest.raises(InvalidInput):
        sharing.branch_merge(engine, ctx, "main")  # into itself
    with pytest.raises(InvalidInput):
        sharing.branch_delete(engine, ctx, "main")  # default branch
    with pytest.raises(InvalidInput):
        sharing.branch_delete(engine, ctx, "--all")
    feature = replace(ctx, branch="feature/x")
    remember(engine, feature, "only on x")
    with pytest.raises(InvalidInput):
        sharing.branch_delete(engine, feature, "feature/x")  # checked out
    r = sharing.branch_delete(engine, ctx, "feature/x")
    assert r["unmerged"] == 1 and r["unmerged_memories"][0]["text"] == "only on x"


def test_merged_branch_is_offered_once_and_resolves_into_a_merge(engine, ctx, git_repo):
    git(git_repo, "checkout", "-q", "-b", "feature/auth")
    (git_repo / "auth.py").write_text("x = 1\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "auth")
    remember(engine, replace(ctx, branch="feature/auth"), "OAuth2 with PKCE for mobile clients")
    git(git_repo, "checkout", "-q", "main")
    r = sharing.merged_branches(engine, ctx)
    assert [(b["branch"], b["state"]) for b in r["branches"]] == [("feature/auth", "unmerged")]
    git(git_repo, "merge", "-q", "--no-ff", "-m", "merge auth", "feature/auth")
    r = sharing.merged_branches(engine, ctx)
    b = r["branches"][0]
    assert b["state"] == "merged" and b["unmerged_memories"] == 1 and b["review_id"]
    assert sharing.merged_branches(engine, ctx)["branches"][0]["review_id"] == b["review_id"]  # once
    items = review.review_list(engine, ctx, kind="branch_merge")["items"]
    assert [i["id"] for i in items] == [b["review_id"]] and "feature/auth" in items[0]["summary"]
    res = review.review_resolve(engine, ctx, b["review_id"], "merge")
    assert res["merge"]["imported"] == 1
    assert "OAuth2 with PKCE for mobile clients" in _texts(engine, ctx)
    assert review.review_list(engine, ctx, kind="branch_merge")["total"] == 0
    # the branch's notes gave way to their copies on main: nothing of it is left to list
    assert sharing.merged_branches(engine, ctx)["branches"] == []
    remember(engine, replace(ctx, branch="feature/auth"), "Refresh tokens rotate on every use")
    git(git_repo, "branch", "-q", "-d", "feature/auth")
    assert sharing.merged_branches(engine, ctx)["branches"][0]["state"] == "gone"


def test_snapshot_file_is_plain_jsonl_with_checksums(engine, ctx, tmp_path):
    remember(engine, ctx, "payments API requires idempotency keys")
    p = tmp_path / "s.mnemo"
    sharing.export_snapshot(engine, ctx, str(p))
    lines = p.read_bytes().split(b"\n")
    head = json.loads(lines[0])
    assert head["format"] == "mnemo-snapshot" and head["version"] == 1
    man = head["manifest"]
    assert man["model_id"] == engine.model_id and man["counts"]["memories"] == 1
    body = b"\n".join(lines[1:])
    assert hashlib.sha256(body).hexdigest() == man["body_sha256"]
    rec = json.loads(lines[1])
    assert rec["sha256"] == hashlib.sha256(sharing.canonical(rec["record"])).hexdigest()
    assert rec["record"]["vector"]["dim"] == 384
    # and it is not a SQLite file or anything executable: plain data
    with pytest.raises(sqlite3.DatabaseError):
        sqlite3.connect(p).execute("SELECT 1 FROM sqlite_master").fetchall()


def test_service_and_cli_end_to_end(home, git_repo, capsys, monkeypatch):
    from mnemo.cli import main

    monkeypatch.setenv("MNEMO_EMBEDDER", "hash")
    monkeypatch.chdir(git_repo)
    base = ["--no-daemon", "--home", str(home), "--json"]

    def run(*args):
        rc = main([*args, *base])
        out = capsys.readouterr().out
        assert rc == 0, out
        return json.loads(out)

    run("remember", "The database is PostgreSQL 14 in production")
    run("remember", "The database is PostgreSQL 16 in production")
    items = run("review")["items"]
    assert items[0]["kind"] == "conflict"
    assert run("review", "resolve", str(items[0]["id"]), "supersede")["resolution"] == "supersede"
    snap = str(Path(git_repo) / "s.mnemo")
    assert run("snapshot", "export", snap)["memories"] == 2
    assert run("snapshot", "diff", snap)["skipped_duplicates"] == 2
    assert run("snapshot", "merge", snap, "--strategy", "keep_both")["changes"] == 0
    assert run("decay")["scanned"] == 1
    assert run("compact")["merged"] == []
    assert run("stats")["tiers"]["warm"]["count"] == 1
    git(git_repo, "checkout", "-q", "-b", "feature/auth")
    run("remember", "OAuth2 with PKCE for mobile clients")
    git(git_repo, "checkout", "-q", "main")
    assert run("branch", "diff", "feature/auth")["imported"] == 1
    assert run("branch", "merge", "feature/auth")["imported"] == 1
    assert run("branch", "delete", "feature/auth")["deleted"] == 1
    assert run("branch", "merged")["branches"] == []
    rc = main(["snapshot", "merge", str(Path(git_repo) / "README.md"), *base])
    err = json.loads(capsys.readouterr().out)["error"]
    assert rc == 2 and err["type"] == "SnapshotError" and "not a Mnemo snapshot" in err["message"]


def test_secrets_never_leave_or_enter_through_snapshots(engine, other, ctx, tmp_path, good_snapshot):
    with engine.store.write() as c:  # as if stored before the secret check existed
        m = remember(engine, ctx, "deploy notes")["memory"]
        text = "the deploy key is AKIAIOSFODNN7EXAMPLE"
        engine.store.update_memory(c, m["id"], text=text, content_hash=content_hash(text))
    r = sharing.export_snapshot(engine, ctx, str(tmp_path / "s.mnemo"))
    assert [w["id"] for w in r["withheld_secrets"]] == [m["id"]] and "AKIA" not in (tmp_path / "s.mnemo").read_text()
    _, head, records = good_snapshot
    rec = dict(records[0], text="token ghp_" + "a1B2c3D4e5" * 4)
    rec["content_hash"] = content_hash(rec["text"])
    p = tmp_path / "secret.mnemo"
    p.write_bytes(_rebuild(head, [rec]))
    res = sharing.merge_snapshot(other, ctx, str(p))
    assert res["skipped_secrets"] == 1 and res["imported"] == 0 and other.store.get_memory(rec["id"]) is None
