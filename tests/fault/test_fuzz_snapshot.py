"""Fuzzing snapshot import (hypothesis): byte-level damage, and hostile content behind valid checksums.

Every example merges a mutated snapshot into a fresh copy of one local store. The import must either refuse with a
clear error (SnapshotError, InvalidInput, NotFound) leaving the store byte-for-byte the same (rows of every table),
or succeed with only valid, untrusted memories; it must never raise anything else, and never take more than 2 s.
Structure-aware mutations recompute every checksum (record, body, manifest), so hostile fields (path tricks in
anchors, huge or deeply nested values, wrong types, invisible characters, ids with slashes) reach the validator
instead of being stopped by the checksum. Each test reports its own figures, as measured, when its examples have
run (also when one failed).
"""

from __future__ import annotations

import copy
import json
import shutil
import time
from pathlib import Path

import pytest
from _helpers import FULL, figure
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemo.core import lifecycle, sharing
from mnemo.core.embedding.embedder import HashEmbedder
from mnemo.core.engine import Engine
from mnemo.core.errors import InvalidInput, NotFound, SnapshotError
from mnemo.core.memory.manage import promote
from mnemo.core.memory.write import remember
from mnemo.core.models import Context

CTX = Context(project_id="git-fuzz", project_name="fuzz", root=None, branch="main", default_branch="main")
EMB = HashEmbedder()
EXAMPLES = 1500 if FULL else 150
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=not FULL, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.data_too_large])
ALLOWED = (SnapshotError, InvalidInput, NotFound)


def dump(engine: Engine) -> dict:
    conn = engine.store.conn()
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE "
                                         "'fts_%' AND name NOT LIKE 'sqlite_%'")]
    return {t: sorted(map(tuple, conn.execute(f"SELECT * FROM {t}"))) for t in tables}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("fuzz-snap")
    src = Engine(base / "src", embedder=EMB, lock=False, start_indexer=False)
    local = Engine(base / "local", embedder=EMB, lock=False, start_indexer=False)
    try:
        for i, text in enumerate(["payments API requires idempotency keys on every POST",
                                  "retries are capped at 3 with exponential backoff",
                                  "the CI runs on two shared cores", "use structlog in services",
                                  "front-end state lives in a Redux store", "pin torch to the CPU wheel"]):
            m = remember(src, CTX, text, kind="decision", tags=["t"], importance=0.4 + i / 20)["memory"]
            if i == 0:
                lifecycle.anchor(src, CTX, m["id"], {"path": "src/pay.py", "symbol": "charge", "hash": "abc"})
        g = remember(src, CTX, "global rule: never log request bodies")["memory"]
        promote(src, CTX, g["id"])
        for text in ("retries are capped at 5", "local note about the deploy window"):
            remember(local, CTX, text)
        good = base / "good.mnemo"
        sharing.export_snapshot(src, CTX, str(good), scopes=["project", "global"])
    finally:
        src.close()
        local.close()
    raw = good.read_bytes()
    head_line, body = raw.split(b"\n", 1)
    head = json.loads(head_line)
    records = [json.loads(line) for line in body.split(b"\n") if line]
    return {"base": base, "template": base / "local", "good": raw, "head": head, "records": records}


def build(head: dict, records: list[dict], version: int = sharing.FORMAT_VERSION) -> bytes:
    """A snapshot with correct checksums for whatever the records hold."""
    lines = []
    for rec in records:
        lines.append(sharing.canonical({"record": rec, "sha256": sharing.sha256(sharing.canonical(rec))}) + b"\n")
    body = b"".join(lines)
    manifest = copy.deepcopy(head["manifest"])
    manifest["counts"]["records"] = len(records)
    manifest["body_bytes"], manifest["body_sha256"] = len(body), sharing.sha256(body)
    h = {"format": sharing.MAGIC, "version": version, "manifest": manifest,
         "manifest_sha256": sharing.sha256(sharing.canonical(manifest))}
    return sharing.canonical(h) + b"\n" + body


_counter = [0]


def new_stats() -> dict:
    return {"examples": 0, "refused": 0, "imported": 0, "crashes": 0, "changed": 0, "max_s": 0.0, "by_error": {}}


def report(stats: dict, what: str) -> None:
    name = f"test_fuzz_snapshot[{what}]" + ("[full]" if FULL else "")
    figure(name, "examples (refused / imported)", f"{stats['examples']} ({stats['refused']} / {stats['imported']})",
           errors=stats["by_error"])
    figure(name, "crashes (an error other than SnapshotError / InvalidInput / NotFound)", stats["crashes"])
    figure(name, "refusals that changed the store", stats["changed"])
    figure(name, "slowest import", f"{stats['max_s'] * 1000:.0f}", unit="ms")


def try_merge(world, data: bytes, stats: dict, strategy: str = "newer_wins") -> str:
    _counter[0] += 1
    home = world["base"] / f"ex-{_counter[0]}"
    shutil.copytree(world["template"], home)
    path = home / "in.mnemo"
    path.write_bytes(data)
    e = Engine(home, embedder=EMB, lock=False, start_indexer=False)
    try:
        before = dump(e)
        t0 = time.perf_counter()
        try:
            res = sharing.merge_snapshot(e, CTX, str(path), strategy)
            outcome = "imported"
        except ALLOWED as exc:
            outcome = "refused"
            res = None
            name = type(exc).__name__
            stats["by_error"][name] = stats["by_error"].get(name, 0) + 1
            assert exc.message and (exc.hint or "nothing was changed" in exc.message)
        except Exception:
            stats["crashes"] += 1
            raise
        took = time.perf_counter() - t0
        stats["max_s"] = max(stats["max_s"], took)
        assert took < 2.0, f"import took {took:.2f} s"
        if outcome == "refused":
            changed = dump(e) != before
            stats["changed"] += changed
            assert not changed, "a refused snapshot changed the store"
        else:
            for m in e.store.query_memories("json_extract(provenance, '$.imported_from') IS NOT NULL"):
                assert m.trust == "untrusted"
                for a in m.anchors:
                    p = a["path"]
                    assert not p.startswith("/") and ".." not in p.split("/")
            assert e.store.integrity_check() == "ok"
            assert res["dry_run"] is False
        stats["examples"] += 1
        stats[outcome] += 1
        return outcome
    finally:
        e.close()
        shutil.rmtree(home, ignore_errors=True)


# -- byte-level damage ----------------------------------------------------------------------------------------
byte_mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(1, 255)),
    st.tuples(st.just("truncate"), st.integers(0, 10**6), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, 10**6), st.binary(min_size=1, max_size=40)),
    st.tuples(st.just("delete"), st.integers(0, 10**6), st.integers(1, 200)),
    st.tuples(st.just("dup_line"), st.integers(0, 100), st.just(0)),
    st.tuples(st.just("drop_line"), st.integers(0, 100), st.just(0)),
    st.tuples(st.just("append"), st.just(0), st.binary(min_size=1, max_size=200)),
)


def apply_bytes(data: bytes, muts) -> bytes:
    b = bytearray(data)
    for kind, pos, arg in muts:
        if not b:
            break
        p = pos % len(b)
        if kind == "flip":
            b[p] ^= arg
        elif kind == "truncate":
            del b[p:]
        elif kind == "insert":
            b[p:p] = arg
        elif kind == "delete":
            del b[p:p + arg]
        elif kind == "append":
            b += arg
        else:
            lines = bytes(b).split(b"\n")
            i = pos % len(lines)
            if kind == "dup_line":
                lines.insert(i, lines[i])
            else:
                del lines[i]
            b = bytearray(b"\n".join(lines))
    return bytes(b)


def test_damaged_bytes_are_refused_and_change_nothing(world):
    stats = new_stats()

    @SETTINGS
    @given(muts=st.lists(byte_mutation, min_size=1, max_size=4))
    def check(muts):
        data = apply_bytes(world["good"], muts)
        outcome = try_merge(world, data, stats)
        if data != world["good"]:
            assert outcome == "refused", f"a damaged file was imported: {muts}"

    try:
        check()
    finally:
        report(stats, "damaged bytes")


# -- hostile content behind valid checksums ----------------------------------------------------------------------
FIELDS = ["id", "text", "type", "kind", "scope", "project_id", "project_name", "branch", "importance",
          "confirmations", "created_at", "updated_at", "last_accessed", "access_count", "content_hash", "source",
          "provenance", "anchors", "superseded_by", "deprecated", "deprecated_reason", "tier", "tags", "trust",
          "status", "author", "flags", "vector", "record_type", "decayed_at"]
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                      st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=50))
hostile_strings = st.sampled_from([
    "../../etc/passwd", "/etc/passwd", "C:\\Windows\\system32", "a/../../b", "\x00", "mem-\u202eabc",
    "x" * 300_000, "", " ", "mem-../../x", "\ufeff\u200b", "ignore previous instructions",
    "<|im_start|>system", "AKIAIOSFODNN7EXAMPLE", "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
])
json_value = st.recursive(json_leaf | hostile_strings,
                          lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids,
                                                                                   max_size=4), max_leaves=12)


@st.composite
def record_mutation(draw):
    field = draw(st.sampled_from(FIELDS))
    kind = draw(st.sampled_from(["set", "set", "delete", "anchor_path", "nest"]))
    if kind == "set":
        return (field, "set", draw(json_value))
    if kind == "anchor_path":
        return ("anchors", "set", [{"path": draw(hostile_strings | st.text(max_size=30)), "symbol": "f"}])
    if kind == "nest":
        depth = draw(st.sampled_from([50, 5000, 100_000]))
        return (field, "raw_nest", depth)
    return (field, "delete", None)


def apply_record(rec: dict, mut) -> tuple[dict, str | None]:
    field, kind, value = mut
    rec = copy.deepcopy(rec)
    if kind == "set":
        rec[field] = value
        if field == "text" and isinstance(value, str):  # keep the hash consistent so the text itself is tested
            from mnemo.core.text import content_hash
            rec["content_hash"] = content_hash(value)
    elif kind == "delete":
        rec.pop(field, None)
    elif kind == "raw_nest":
        rec[field] = "@@NEST@@"
        return rec, "[" * value + "]" * value
    return rec, None


def test_hostile_fields_behind_valid_checksums(world):
    stats = new_stats()

    @SETTINGS
    @given(which=st.integers(0, 6), muts=st.lists(record_mutation(), min_size=1, max_size=3),
           strategy=st.sampled_from(sharing.STRATEGIES))
    def check(which, muts, strategy):
        records = [copy.deepcopy(r["record"]) for r in world["records"]]
        i = which % len(records)
        nest = None
        for m in muts:
            records[i], n = apply_record(records[i], m)
            nest = n or nest
        try:
            data = build(world["head"], records)
        except (TypeError, ValueError):  # not representable as canonical JSON (e.g. a huge float): nothing to test
            return
        if nest:  # a JSON bomb: deeply nested arrays where a value was (checksums then cannot match either)
            data = data.replace(b'"@@NEST@@"', nest.encode(), 1)
        try_merge(world, data, stats, strategy)

    try:
        check()
    finally:
        report(stats, "hostile fields")


# -- targeted hostile files ---------------------------------------------------------------------------------
def test_hostile_files(world, tmp_path, monkeypatch):
    cases = {
        "empty": b"",
        "not json": b"hello world\n",
        "manifest bomb": b"[" * 60_000 + b"\n",
        "record bomb": world["good"].split(b"\n", 1)[0] + b"\n" + b"[" * 100_000 + b"\n",
        "huge manifest line": b'{"format":"mnemo-snapshot",' + b" " * 200_000 + b"\n",
        "future version": build(world["head"], [r["record"] for r in world["records"]], version=999),
        "absurd record count": world["good"].replace(
            f'"records":{len(world["records"])}'.encode(), b'"records":1000000000000', 1),
        "duplicate ids": build(world["head"], [world["records"][0]["record"]] * 2),
        "binary": bytes(range(256)) * 40,
    }
    stats = new_stats()
    try:
        outcomes = {name: try_merge(world, data, stats) for name, data in cases.items()}
    finally:
        report(stats, "hostile files")
    assert outcomes == dict.fromkeys(cases, "refused")
    monkeypatch.setenv("MNEMO_SNAPSHOT_MAX_BYTES", "1000")
    with pytest.raises(SnapshotError) as err:
        big = tmp_path / "big.mnemo"
        big.write_bytes(world["good"])
        sharing.read_snapshot(str(big))
    assert "MNEMO_SNAPSHOT_MAX_BYTES" in (err.value.hint or "")
    monkeypatch.delenv("MNEMO_SNAPSHOT_MAX_BYTES")
    monkeypatch.setenv("MNEMO_SNAPSHOT_MAX_RECORDS", "2")
    with pytest.raises(SnapshotError) as err:
        sharing.read_snapshot(str(_write(tmp_path, world["good"])))
    assert "MNEMO_SNAPSHOT_MAX_RECORDS" in (err.value.hint or "")


def _write(tmp_path: Path, data: bytes) -> Path:
    p = tmp_path / "w.mnemo"
    p.write_bytes(data)
    return p
