"""The relation check's parse of a note, stored with it (core/store/parses.py, core/relation/compare.py `encoded`;
issue 22, fifth pass): a write reads its neighbours' stored parses instead of parsing their texts again, trusts only
a parse made by this parser of this very text, fills in what an older store (or an older parser) lacks, and decides
exactly what it decided when it parsed every text."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from mnemo.core.engine import Engine
from mnemo.core.memory import write
from mnemo.core.relation import compare as relation

PAIRS = Path(__file__).resolve().parents[2] / "bench" / "data" / "conflict_pairs.jsonl"
OLD = "the payments API retries failed webhooks 5 times with exponential backoff"
NEW = "the payments API retries failed webhooks 7 times with exponential backoff"


def _forget_parses() -> None:
    """A fresh process: nothing parsed or primed yet."""
    relation._PRIMED.clear()
    relation._parsed.cache_clear()
    relation.clause_tokens.cache_clear()


def _texts() -> list[str]:
    out: list[str] = []
    for line in PAIRS.read_text().splitlines():
        row = json.loads(line)
        out += [row["old"], row["new"]]
    return list(dict.fromkeys(out))


def test_a_stored_parse_reads_back_equal_to_the_parse():
    """Every field equal (tokens, content words, quantities, ...), and the content and aligned tokens the same
    objects as the note's tokens (`_before` finds a token by identity); the features of every pair of the conflict
    benchmark equal with the stored parses and with parses made afresh."""
    texts = _texts()
    assert len(texts) > 1000
    _forget_parses()
    blobs = {t: relation.encoded(t) for t in texts}
    for t in texts:
        fresh, back = relation._parsed(t), relation.decoded(t, blobs[t])
        assert back == fresh, t
        assert all(any(c is u for u in back.toks) for c in back.content + back.aligned)
    rows = [json.loads(line) for line in PAIRS.read_text().splitlines()]
    _forget_parses()
    parsed = [relation.features(r["old"], r["new"], 0.8) for r in rows]
    _forget_parses()
    for t in texts:
        assert relation.prime(t, blobs[t])
    assert [relation.features(r["old"], r["new"], 0.8) for r in rows] == parsed


def test_a_parse_of_another_text_or_format_is_refused():
    blob = relation.encoded(OLD)
    assert relation.decoded(OLD, blob) is not None
    assert relation.decoded(NEW, blob) is None  # the note was edited since: its text's digest differs
    assert relation.decoded(OLD, b"\x00garbage") is None
    assert relation.decoded(OLD, blob[:-3]) is None
    _forget_parses()
    assert not relation.prime(NEW, blob) and not relation.known(NEW)


def _was_parsed(text: str) -> bool:
    """Whether the relation check parsed `text` from its text since `_forget_parses` (a stored parse read is not
    parsed): asked of `_parsed`'s cache, which a compiled relation check (mnemo/native.py) goes through too. Once per
    text: the question parses it."""
    before = relation._parsed.cache_info().hits
    relation._parsed(text)
    return relation._parsed.cache_info().hits > before


def _parse_rows(home: Path) -> dict[str, tuple[str, bytes]]:
    db = sqlite3.connect(home / "mnemo.db")
    try:
        return {r[0]: (r[1], r[2]) for r in db.execute("SELECT id, parser, parse FROM note_parses")}
    finally:
        db.close()


def test_a_remember_stores_the_parse_and_the_next_write_reads_it(home, hash_embedder, ctx, monkeypatch):
    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    try:
        old = write.remember(engine, ctx, OLD)["memory"]["id"]
        stored = _parse_rows(home)
        assert stored[old][0] == relation.parser_version() != ""
        assert relation.decoded(OLD, stored[old][1]) == relation._parsed(OLD)
        _forget_parses()  # another process (the owner restarted): only the store has it
        res = write.remember(engine, ctx, NEW)
        assert [c["id"] for c in res["conflicts"]] == [old]  # compared (and found conflicting: 5 -> 7)
        assert not _was_parsed(OLD) and _was_parsed(NEW)  # the neighbour's parse was read, the new note's made
        assert res["memory"]["id"] in _parse_rows(home)
    finally:
        engine.close()


@pytest.mark.parametrize("stale", ["another parser", "another text"])
def test_a_stale_stored_parse_is_not_trusted_and_is_replaced(home, hash_embedder, ctx, monkeypatch, stale):
    """A parse made by another parser version (the code changed), or of another text (the note was edited), is
    never used: the neighbour is parsed from its text, the decision is the one without a stored parse, and the
    write stores the right parse in its place."""
    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    try:
        old = write.remember(engine, ctx, OLD)["memory"]["id"]
        # a parse saying the note holds no number at all: used, it would hide the 5 -> 7 conflict
        wrong = relation.encoded("the payments API retries failed webhooks with exponential backoff")
        if stale == "another parser":
            parser, blob = "0" * 24, relation.encoded(OLD)
            db = sqlite3.connect(home / "mnemo.db")
            db.execute("UPDATE note_parses SET parser=? WHERE id=?", (parser, old))
            db.commit()
            db.close()
        else:
            with engine.store.write() as c:
                engine.store.put_note_parses(c, [(old, relation.parser_version(), wrong)])
        _forget_parses()
        res = write.remember(engine, ctx, NEW)
        assert _was_parsed(OLD)  # parsed from its text
        assert [c["id"] for c in res["conflicts"]] == [old]
        assert any("5 -> 7" in r for r in res["conflicts"][0]["reasons"])
        parser, blob = _parse_rows(home)[old]
        assert parser == relation.parser_version()
        assert relation.decoded(OLD, blob) == relation._parsed(OLD)
    finally:
        engine.close()


def test_a_store_older_than_stored_parses_gets_them_as_its_notes_are_met(home, hash_embedder, ctx, monkeypatch):
    """A store written before `note_parses` existed opens (the table is added), its notes are compared as before
    (parsed from their text), and each one met is stored with its parse for the next writes."""
    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    old = write.remember(engine, ctx, OLD)["memory"]["id"]
    engine.close()
    db = sqlite3.connect(home / "mnemo.db")
    db.execute("DROP TABLE note_parses")
    db.commit()
    db.close()
    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    try:
        assert _parse_rows(home) == {}
        _forget_parses()
        res = write.remember(engine, ctx, NEW)
        assert _was_parsed(OLD) and [c["id"] for c in res["conflicts"]] == [old]
        rows = _parse_rows(home)
        assert set(rows) == {old, res["memory"]["id"]}
        _forget_parses()
        write.remember(engine, ctx, "the payments API retries failed webhooks 9 times with exponential backoff")
        assert not _was_parsed(OLD) and not _was_parsed(NEW)  # both read from the store now
    finally:
        engine.close()


def test_a_forgotten_memory_takes_its_parse_with_it(home, hash_embedder, ctx):
    engine = Engine(home, embedder=hash_embedder, start_indexer=False)
    try:
        mem = write.remember(engine, ctx, OLD)["memory"]["id"]
        assert mem in _parse_rows(home)
        with engine.store.write() as c:
            engine.store.delete_item(c, mem)
        assert mem not in _parse_rows(home)
        with engine.store.write() as c:  # a parse for an id the store does not hold (a team memory) is not kept
            engine.store.put_note_parses(c, [("team-x", relation.parser_version(), relation.encoded(OLD))])
        assert "team-x" not in _parse_rows(home)
    finally:
        engine.close()
