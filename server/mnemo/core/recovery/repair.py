"""Repair a damaged store (`mnemo doctor --repair`): salvage every readable row, merge the newest good backup,
rebuild what is derived, keep the damaged files, and name what could not be recovered.

The caller (mnemo/daemon/doctor.py) has stopped the owner and holds its lock. Steps:
1. salvage the damaged `mnemo.db` (and its WAL) page by page (core/store/salvage.py): rows on intact pages come back
   even when SQLite's own b-tree walk stops at a damaged page;
2. read the newest backup that passes `integrity_check` (core/recovery/backup.py);
3. merge, per id: a memory or a Markdown block comes from whichever copy is intact and newest (`updated_at`, then
   `last_accessed`; on a tie the salvaged row wins). A memory is intact when its stored content hash matches its
   text. Ids the store deleted (a tombstone, or a `delete` as the last change-log entry) do not come back from
   the backup or from orphan pages. Other tables (tombstones, review, meta, decay state, team outbox) are the
   union by primary key, salvaged rows first;
4. rebuild the derived data: the FTS index, a change log with one entry per item, vectors (kept when they belong
   to the same copy of the row, or to an identical text; re-embedded otherwise). The dense index (chroma) is moved
   aside with the damaged files; the owner rebuilds it from the stored vectors at its next start;
5. write the new store under a temporary name, check it, then move the damaged files and the old index into
   `<home>/damaged-<time>/` (never deleted) and put the new store in place;
6. report what came from where and which memories could not be recovered: every id named by a witness (the old
   dense index, the damaged file's id index, stored vectors, FTS rows, the change log of either copy, rows that no
   longer parse) that is in neither copy and was not deleted.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mnemo.core.embedding.embedder import get_embedder
from mnemo.core.indexes.dense import DenseIndex
from mnemo.core.models import DEFAULT_KINDS, MEMORY_TYPES, Memory
from mnemo.core.recovery import backup
from mnemo.core.store import salvage as sv
from mnemo.core.store import schema
from mnemo.core.store.codec import memory_fts_text, memory_text, partition_for, vec_to_blob
from mnemo.core.store.rebuild import ITEMS, read_backup, write_store
from mnemo.core.text import content_hash

log = logging.getLogger("mnemo.repair")

SKIP = ("changes", "vectors")  # rebuilt
DERIVED_TABLES = frozenset({"fts_data", "fts_idx", "fts_docsize", "fts_config", "sqlite_sequence"})  # rebuilt
UNEMBEDDED = "unembedded"  # model id of a placeholder vector: the owner re-embeds it at start (foreign model)


# -- reading both copies -----------------------------------------------------------------------------------------
def _from_salvage(s: sv.Salvage) -> dict[str, list[dict[str, Any]]]:
    """Salvaged rows as dicts; `_rank` 2 = under its table's root, 1 = from an orphan page."""
    out: dict[str, list[dict[str, Any]]] = {}
    for table, rows in s.rows.items():
        t = s.tables.get(table)
        if t is None:
            continue
        bucket = out.setdefault(table, [])
        for r in rows:
            d = dict(zip(t.columns, r.values, strict=True))
            if t.ipk is not None:
                d[t.columns[t.ipk]] = r.rowid
            d["_rowid"], d["_rank"] = r.rowid, 2 if r.reachable else 1
            bucket.append(d)
    return out


def newest_good_backup(home: Path) -> tuple[dict[str, Any] | None, list[dict[str, str]]]:
    skipped: list[dict[str, str]] = []
    for b in backup.list_backups(home):
        state = backup.check_db(Path(b["path"]))
        if state == "ok":
            return b, skipped
        skipped.append({"name": b["name"], "problem": state})
    return None, skipped


# -- choosing rows -----------------------------------------------------------------------------------------------
def _quality(table: str, row: dict[str, Any]) -> int:
    """2 intact, 1 readable but its text does not match its hash, 0 unusable."""
    try:
        if table == "memories":
            m = Memory.from_row({k: v for k, v in row.items() if not k.startswith("_")})
            if not m.id or not m.text or "\x00" in m.text:
                return 0
            return 2 if content_hash(m.text) == m.content_hash else 1
        json.loads(row["heading_path"])
        return 0 if "\x00" in row["text"] else 2
    except (TypeError, ValueError, KeyError, AttributeError):
        return 0


def _newest(table: str, cands: list[dict[str, Any]]) -> dict[str, Any] | None:
    scored = [(q, c) for c in cands if (q := _quality(table, c))]
    if not scored:
        return None
    return max(scored, key=lambda qc: (qc[0], qc[1].get("updated_at") or 0, qc[1].get("last_accessed") or 0,
                                       qc[1]["_rank"]))[1]


def deleted_ids(salv: dict, back: dict) -> set[str]:
    """Ids the store deleted: tombstones, and items whose last change-log entry is a delete."""
    out = {r["id"] for src in (salv, back) for r in src.get("tombstones", []) if isinstance(r.get("id"), str)}
    last: dict[str, tuple[int, str]] = {}
    for r in [*back.get("changes", []), *salv.get("changes", [])]:
        item, seq = r.get("item_id"), r.get("seq") or 0
        if isinstance(item, str) and (item not in last or seq >= last[item][0]):
            last[item] = (seq, r.get("op"))
    return out | {i for i, (_seq, op) in last.items() if op == "delete"}


def merge_items(table: str, salv: dict, back: dict, deleted: set[str]) -> dict[str, dict[str, Any]]:
    by_id: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in [*salv.get(table, []), *back.get(table, [])]:
        if isinstance(r.get("id"), str):
            by_id[r["id"]].append(r)
    chosen = {}
    for item_id, cands in by_id.items():
        if item_id in deleted:  # only a row still under its table's root outlives a recorded delete
            cands = [c for c in cands if c["_rank"] == 2]
        best = _newest(table, cands)
        if best is not None:
            chosen[item_id] = best
    return chosen


def merge_plain(rows: Iterable[dict[str, Any]], pk: list[str]) -> list[dict[str, Any]]:
    """Union by primary key (rowid when none); the first copy seen (salvage before backup) wins."""
    out: dict[Any, dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: -r["_rank"]):
        key = tuple(r.get(c) for c in pk) if pk else r["_rowid"]
        out.setdefault(key, r)
    return list(out.values())


# -- vectors -----------------------------------------------------------------------------------------------------
def _norm(blob: bytes) -> float:
    import numpy as np

    with np.errstate(all="ignore"):  # a damaged blob holds any bit pattern
        v = np.frombuffer(blob, dtype=np.float32).astype(np.float64)
        return float(np.sqrt(np.dot(v, v))) if np.isfinite(v).all() else math.nan


def _vector_ok(blob: Any, dim_bytes: int, norm: float) -> bool:
    """The right length, finite, and of the usual length (a partly overwritten vector is neither)."""
    if not isinstance(blob, bytes) or len(blob) != dim_bytes:
        return False
    n = _norm(blob)
    return math.isfinite(n) and abs(n - norm) <= 0.05 * norm


def _vector_shape(rows: list[dict[str, Any]]) -> tuple[int, float]:
    """The common vector size in bytes and the median norm."""
    blobs = [r["vec"] for r in rows if isinstance(r.get("vec"), bytes) and len(r["vec"]) % 4 == 0 and r["vec"]]
    if not blobs:
        return 0, 1.0
    dim_bytes = Counter(len(b) for b in blobs).most_common(1)[0][0]
    norms = sorted(n for b in blobs[:2000] if len(b) == dim_bytes and math.isfinite(n := _norm(b)))
    return dim_bytes, norms[len(norms) // 2] if norms else 1.0


def _same_text(table: str, a: dict[str, Any] | None, b: dict[str, Any]) -> bool:
    if a is None:
        return False
    keys = ("content_hash", "text") if table == "memories" else ("text", "heading_path", "source_path")
    return all(a.get(k) == b.get(k) for k in keys)


def pick_vectors(chosen: dict[str, tuple[str, dict]], salv: dict, back: dict) -> tuple[dict, list[str]]:
    """item id -> (model_id, blob) for every kept item whose vector belongs to its text; and the ids to embed."""
    dim_bytes, norm = _vector_shape([*salv.get("vectors", []), *back.get("vectors", [])])
    vecs: dict[str, dict[str, dict]] = {"salvage": {}, "backup": {}}
    for src, rows in (("salvage", salv.get("vectors", [])), ("backup", back.get("vectors", []))):
        for r in sorted(rows, key=lambda r: r["_rank"]):  # a reachable row overrides an orphan copy
            if _vector_ok(r.get("vec"), dim_bytes, norm):
                vecs[src][r["item_id"]] = r
    rows_by_src = {src: {r.get("id"): r for t in ITEMS for r in data.get(t, [])} for src, data in
                   (("salvage", salv), ("backup", back))}
    out, missing = {}, []
    for item_id, (table, row) in chosen.items():
        src = "salvage" if row["_rank"] else "backup"
        other = "backup" if src == "salvage" else "salvage"
        v = vecs[src].get(item_id)
        if v is None and _same_text(table, rows_by_src[other].get(item_id), row):
            v = vecs[other].get(item_id)
        if v is None:
            missing.append(item_id)
        else:
            out[item_id] = (v["model_id"], v["vec"])
    return out, missing


def embed_missing(texts: list[str], dim_bytes: int) -> tuple[str, list[bytes], str | None]:
    """Vectors for items whose vector was lost: the current embedder's, or placeholders the owner re-embeds."""
    if not texts:
        return "", [], None
    try:
        emb = get_embedder()
        blobs: list[Any] = []
        for i in range(0, len(texts), 256):
            blobs.extend(vec_to_blob(v) for v in emb.embed(texts[i:i + 256]))
        return emb.model_id, blobs, None
    except Exception as exc:  # noqa: BLE001 - the repair must not depend on the model
        zero = bytes(dim_bytes or 384 * 4)
        return UNEMBEDDED, [zero] * len(texts), f"{exc}"


# -- witnesses ---------------------------------------------------------------------------------------------------
def witnesses(s: sv.Salvage, salv: dict, back: dict, dense_ids: set[str] | None,
              cache_ids: set[str] | None = None) -> dict[str, set[str]]:
    """Memory id -> the places that name it."""
    w: dict[str, set[str]] = defaultdict(set)

    def add(ids: Iterable[Any], source: str) -> None:
        for i in ids:
            if isinstance(i, str) and i.startswith("mem-"):
                w[i].add(source)

    add((k[0] for k in s.index_keys.get("sqlite_autoindex_memories_1", []) if k), "id index")
    add((r.get("id") for r in salv.get("memories", [])), "damaged row")
    add((r.get("item_id") for r in salv.get("vectors", [])), "stored vector")
    add((r.get("c1") for r in salv.get("fts_content", [])), "keyword index")
    add((r.get("item_id") for r in salv.get("changes", [])), "change log")
    add((r.get("item_id") for r in back.get("changes", [])), "backup change log")
    add((r.get("id") for r in back.get("memories", [])), "backup")
    add(dense_ids or (), "dense index")
    add(cache_ids or (), "vector cache")
    return w


def lost_report(w: dict[str, set[str]], kept: set[str], deleted: set[str], salv: dict) -> list[dict[str, Any]]:
    fts = {r.get("c1"): r.get("c0") for r in salv.get("fts_content", []) if isinstance(r.get("c0"), str)}
    lost = []
    for item_id in sorted(set(w) - kept - deleted):
        entry: dict[str, Any] = {"id": item_id, "named_by": sorted(w[item_id])}
        if fts.get(item_id):
            entry["indexed_text"] = fts[item_id][:500]  # the FTS copy: text, tags and kind run together
        lost.append(entry)
    return lost


# -- salvaging the notes no intact row holds ---------------------------------------------------------------------
INDEX_META = {"memories_hash_project": ("content_hash", "project_id", "scope"),
              "memories_part": ("part", "scope", "branch")}
SALVAGED = "salvaged"  # the flag of a note rebuilt from pieces (status pending: a person accepts it in Review)


def _cache_ids(cache: Path) -> set[str] | None:
    """The item ids of the vector cache file (a witness: it names what the store held, not the texts)."""
    from mnemo.core.indexes.vector_file import FILE_NAME, stored_ids

    return stored_ids(cache / FILE_NAME)


def _index_meta(s: sv.Salvage) -> dict[str, dict[str, Any]]:
    """Memory id -> the columns the damaged file's own indexes still hold for it (joined through the rowid)."""
    rowid_of = {k[0]: k[1] for k in s.index_keys.get("sqlite_autoindex_memories_1", [])
                if len(k) == 2 and isinstance(k[0], str) and isinstance(k[1], int)}
    by_rowid: dict[int, dict[str, Any]] = defaultdict(dict)
    for name, cols in INDEX_META.items():
        for k in s.index_keys.get(name, []):
            if len(k) == len(cols) + 1 and isinstance(k[-1], int):
                by_rowid[k[-1]].update(zip(cols, k[:-1], strict=True))
    return {i: by_rowid[r] for i, r in rowid_of.items() if r in by_rowid}


def _split_indexed(c0: str, want_hash: str | None, known_tags: set[str],
                   version_tags: list[str] | None) -> tuple[str, str, list[str], list[str]] | None:
    """(text, kind, tags, guessed fields) from a full-text row, which holds `text + " " + " ".join(tags) + " " +
    kind` (codec.memory_text). The hash from the damaged file's index decides the split exactly when it is there."""
    head, sep, kind = c0.rpartition(" ")
    if not sep or not kind:
        return None
    if head.endswith(" ") or not head:  # no tags: the join leaves two spaces before the kind
        text = head[:-1]
        return (text, kind, [], []) if text.strip() else None
    toks = head.split(" ")
    splits = [(" ".join(toks[:-k]), toks[-k:]) for k in range(1, min(len(toks), 24))]
    if want_hash:
        for text, tags in splits:
            if content_hash(text) == want_hash:
                return text, kind, tags, []
    if version_tags:
        for text, tags in splits:
            if tags == version_tags:
                return text, kind, tags, ["tags"]
    known = [(text, tags) for text, tags in splits if all(t in known_tags for t in tags)]
    text, tags = known[-1] if known else splits[0]
    return text, kind, tags, ["tags"]


def _most_common(values: Iterable[Any], default: Any) -> Any:
    c = Counter(v for v in values if v is not None)
    return c.most_common(1)[0][0] if c else default


def salvage_notes(db: Path, s: sv.Salvage, salv: dict, chosen: dict[str, tuple[str, dict]],
                  named: dict[str, set[str]], deleted: set[str],
                  now: float | None = None) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """Memories no intact row holds whose text can still be read somewhere in the damaged file: a row carved from
    a damaged or free page or from a frame of the WAL, the full-text table's copy of the text, an earlier version in
    `memory_versions`. Metadata comes from what the file still has (the carved row, its own indexes through the
    rowid, the change log, the partition) and is otherwise guessed and said so. Each comes back pending, flagged
    `salvaged`, with a Review item; returns (id -> row, review rows)."""
    import time

    now = time.time() if now is None else now
    want = {i for i in named if i not in deleted and i not in chosen}
    mem_def = s.tables.get("memories")
    carved: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    fts = {r["c1"]: (r.get("c0"), r.get("c2")) for r in salv.get("fts_content", [])
           if isinstance(r.get("c1"), str) and isinstance(r.get("c0"), str)}
    try:
        if mem_def is not None:
            for where, values in sv.carve(db, "memories", mem_def):
                row = dict(zip(mem_def.columns, values, strict=True))
                if isinstance(row.get("id"), str) and row["id"] not in deleted and row["id"] not in chosen:
                    if where == "a damaged page":
                        named[row["id"]].add("damaged page")
                        want.add(row["id"])
                    carved[row["id"]].append((where, row))
        fts_def = sv.TableDef("fts_content", ["id", "c0", "c1", "c2"], ["INTEGER", "TEXT", "TEXT", "TEXT"],
                              [False, True, True, False], 0, "")
        for _where, v in sv.carve(db, "fts_content", fts_def):
            if isinstance(v[2], str) and v[2].startswith("mem-") and v[2] not in fts:
                fts[v[2]] = (v[1], v[3])
    except (OSError, ValueError) as exc:  # carving is a bonus: the rows read by the walk stand without it
        log.warning("repair: carving the damaged file failed: %s", exc)
    versions: dict[str, dict[str, Any]] = {}
    for r in salv.get("memory_versions", []):
        mid = r.get("memory_id")
        if isinstance(mid, str) and isinstance(r.get("text"), str) and (
                mid not in versions or (r.get("version") or 0) > (versions[mid].get("version") or 0)):
            versions[mid] = r
    meta = _index_meta(s)
    changes: dict[str, list[float]] = defaultdict(list)
    for r in salv.get("changes", []):
        if isinstance(r.get("item_id"), str) and isinstance(r.get("at"), int | float):
            changes[r["item_id"]].append(float(r["at"]))
    kept_rows = [r for t, r in chosen.values() if t == "memories"]
    # a record whose header the damage destroyed: its id's tail and its text may still stand; the text is taken
    # only when it matches the content hash the file's index keeps for the id
    torn_ids = {i: meta[i]["content_hash"] for i in want if i not in fts and not carved.get(i) and
                isinstance(meta.get(i, {}).get("content_hash"), str)}
    kinds = tuple(sorted({*DEFAULT_KINDS, *(str(r["kind"]) for r in kept_rows if isinstance(r.get("kind"), str))}))
    torn = sv.torn_texts(db, torn_ids, content_hash, MEMORY_TYPES, kinds) if torn_ids else {}
    # a full-text row cut after its text (the damage took its id): attributed by the content hash, exactly
    cut_ids = {h: i for i, h in torn_ids.items() if i not in torn}
    for h, (text, c0) in (sv.cut_index_texts(db, cut_ids, content_hash) if cut_ids else {}).items():
        if c0 is not None:
            fts[cut_ids[h]] = (c0, meta[cut_ids[h]].get("part"))
        else:  # only the text stood: its kind and tags are guessed and named
            torn[cut_ids[h]] = {"text": text}
    out: dict[str, dict[str, Any]] = {}
    reviews: list[dict[str, Any]] = []
    for item_id in sorted(want):
        indexed: tuple[Any, ...] | None = fts.get(item_id)
        if indexed is None and item_id in torn:
            indexed = _torn_indexed(torn[item_id], meta[item_id])
        got = _salvage_one(item_id, carved.get(item_id, []), indexed, versions.get(item_id),
                           meta.get(item_id, {}), changes.get(item_id, []), kept_rows, now)
        if got is None:
            continue
        row, where, guessed = got
        out[item_id] = row
        reviews.append({"kind": "pending", "item_id": item_id, "other_id": None, "project_id": row["project_id"],
                        "payload": json.dumps({"source": "repair", "salvaged_from": where, "guessed": guessed,
                                               "flags": [SALVAGED]}, sort_keys=True),
                        "created_at": now, "resolved_at": None, "resolution": None, "_rank": 3})
    return out, reviews


def _torn_indexed(t: dict[str, Any], meta: dict[str, Any]) -> tuple[str, Any, str, dict[str, Any]]:
    """A torn record's text as the full-text table would hold it (the same split applies), marked as such."""
    kind = t.get("kind") or "fact"
    return memory_text(t["text"], t.get("tags") or [], kind), meta.get("part"), "a torn row", t


def _salvage_one(item_id: str, carved: list[tuple[str, dict[str, Any]]], indexed: tuple[Any, Any] | None,
                 version: dict[str, Any] | None, meta: dict[str, Any], at: list[float],
                 kept_rows: list[dict[str, Any]], now: float) -> tuple[dict[str, Any], str, list[str]] | None:
    good = [(w, r) for w, r in carved if _quality("memories", {**r, "_rank": 1}) == 2]
    best = max(good, key=lambda wr: (wr[1].get("updated_at") or 0, wr[0] == "a damaged page"), default=None)
    c0, part = indexed[:2] if indexed else (None, None)
    torn = indexed[3] if indexed and len(indexed) > 3 else None
    if best is not None and (c0 is None or memory_fts_text(Memory.from_row(best[1])) == c0):
        row = dict(best[1])  # the whole row, its text the indexed one: only its status is held for Review
        where, guessed = best[0], list[str]()
    else:
        base = dict(best[1]) if best else {}
        same_part = [r for r in kept_rows if r.get("part") == (part or base.get("part") or meta.get("part"))]
        known_tags = {t for r in same_part for t in _json_list(r.get("tags"))}
        vtags = _json_list(version.get("tags")) if version else None
        split = _split_indexed(c0, meta.get("content_hash"), known_tags, vtags) if c0 else None
        if split is not None:
            text, kind, tags, guessed = split
            where = "the full-text index"
            if torn is not None:  # the text (exact by its hash), type and kind read after it, tags when they parsed
                text, kind, tags = torn["text"], torn.get("kind") or "fact", torn.get("tags") or []
                guessed = [g for g, ok in (("kind", "kind" in torn), ("tags", "tags" in torn)) if not ok]
                where = "a torn row (its text matched by the hash the file's index keeps)"
                if torn.get("type"):
                    base = {**base, "type": torn["type"]}
        elif version is not None:
            text, kind, tags, guessed = version["text"], version["kind"], vtags or [], ["text: an earlier version"]
            where = "an earlier version (memory_versions)"
        else:
            return None
        part = part or base.get("part") or meta.get("part")
        if not isinstance(part, str) and isinstance(meta.get("scope"), str) and isinstance(meta.get("project_id"), str):
            part = partition_for(meta["scope"], meta["project_id"])  # a function of the two: exact, not a guess
        if not isinstance(part, str):
            return None
        guessed = list(guessed)

        def pick(key: str, default: Any, *sources: dict[str, Any] | None) -> Any:
            for src in sources:
                if src and src.get(key) is not None:
                    return src[key]
            guessed.append(key)
            return default

        project_id = pick("project_id", part[2:] if part.startswith("p-") else None, base, meta)
        if project_id is None:
            project_id = _most_common((r.get("project_id") for r in same_part), "")
        scope = pick("scope", "global" if part == "g" else "project", base, meta)
        ts = sorted(at)
        times = {"created_at": ts[0], "updated_at": ts[-1]} if ts else None
        defaults = {"anchors": "[]", "superseded_by": None, "deprecated": 0, "deprecated_reason": None,
                    "tier": "warm", "trust": "trusted", "author": "local", "provenance": "{}", "flags": "[]"}
        row = {**defaults, **base, "id": item_id, "text": text, "kind": kind, "tags": json.dumps(tags), "part": part,
               "content_hash": content_hash(text), "project_id": project_id, "scope": scope,
               "project_name": _most_common((r.get("project_name") for r in kept_rows
                                             if r.get("project_id") == project_id), project_id),
               "branch": pick("branch", _most_common((r.get("branch") for r in same_part), None), base, meta),
               "type": pick("type", _most_common((r.get("type") for r in same_part if r.get("kind") == kind),
                                                 "project"), base, version),
               "importance": pick("importance", 0.5, base, version),
               "created_at": pick("created_at", now, base, times), "updated_at": pick("updated_at", now, base, times),
               "source": base.get("source") or "user", "confirmations": base.get("confirmations") or 1,
               "access_count": base.get("access_count") or 0}
        row["last_accessed"] = base.get("last_accessed") or row["updated_at"]
        if best is not None:
            where = f"{where} and {best[0]}"
    prov = _json_dict(row.get("provenance"))
    prov["salvaged"] = {"from": where, "at": now, **({"guessed": guessed} if guessed else {})}
    flags = [f for f in _json_list(row.get("flags")) if f != SALVAGED] + [SALVAGED]
    row.update(provenance=json.dumps(prov, sort_keys=True), flags=json.dumps(flags), status="pending",
               _rank=1, _salvaged=where)
    return row, where, guessed


def _json_list(v: Any) -> list:
    try:
        out = json.loads(v) if isinstance(v, str) else v
    except ValueError:
        return []
    return out if isinstance(out, list) else []


def _json_dict(v: Any) -> dict:
    try:
        out = json.loads(v) if isinstance(v, str) else v
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


def _remember_lost(plain: dict[str, list[dict[str, Any]]], lost: list[str]) -> None:
    """The ids no copy holds, kept in meta: a Markdown import may restore them with their ids."""
    rows = plain.setdefault("meta", [])
    old = next((r for r in rows if r.get("key") == "repair_lost_memories"), None)
    before = _json_list(old.get("value")) if old else []
    merged = sorted({i for i in [*before, *lost] if isinstance(i, str)})
    if old is not None:
        old["value"] = json.dumps(merged)
    elif merged:
        rows.append({"key": "repair_lost_memories", "value": json.dumps(merged), "_rank": 3, "_rowid": 0})


def _add_reviews(plain: dict[str, list[dict[str, Any]]], rows: list[dict[str, Any]]) -> None:
    """The Review items of the salvaged notes, numbered after every review item the store had."""
    existing = plain.setdefault("review", [])
    top = max((r.get("id") or 0 for r in existing if isinstance(r.get("id"), int)), default=0)
    for k, r in enumerate(rows, 1):
        existing.append({**r, "id": top + k, "_rowid": top + k})


# -- the whole repair --------------------------------------------------------------------------------------------
def _fsync(path: Path) -> None:
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


def _move_aside(home: Path, aside: Path) -> None:
    aside.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        p = home / f"mnemo.db{suffix}"
        if p.exists():
            os.replace(p, aside / p.name)
    for derived in ("chroma", "cache"):  # derived from the store: rebuilt from the new one at the next start
        if (home / derived).exists():
            os.replace(home / derived, aside / derived)


def _remove_tmp(tmp: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{tmp}{suffix}").unlink(missing_ok=True)


def repair_store_file(home: Path) -> dict[str, Any]:
    """Rebuild `<home>/mnemo.db` from its readable rows and the newest good backup (the caller holds the lock)."""
    home = Path(home)
    db = home / "mnemo.db"
    good, skipped = newest_good_backup(home)
    back, back_schema = read_backup(good["path"] if good else None)
    s = sv.salvage(db, fallback_schema=back_schema or schema.statements(), skip=DERIVED_TABLES,
                   index_keys_of=frozenset({"sqlite_autoindex_memories_1", *INDEX_META}))
    salv = _from_salvage(s)
    deleted = deleted_ids(salv, back)
    chosen = {i: (t, r) for t in ITEMS for i, r in merge_items(t, salv, back, deleted).items()}
    dense = _dense_ids(home / "chroma")
    named = witnesses(s, salv, back, dense, _cache_ids(home / "cache"))
    salvaged, review_rows = salvage_notes(db, s, salv, chosen, named, deleted)
    chosen.update({i: ("memories", r) for i, r in salvaged.items()})
    if not chosen and not any(salv.get(t) for t in ("tombstones", "review", "meta")):
        return {"restored": False, "skipped_backups": skipped, "salvage": s.stats,
                "message": "nothing could be read from the damaged store and there is no good backup",
                "hint": f"the store is unchanged; move {db} away to start empty (keep it: it may still be "
                        "recoverable by other tools)"}
    vectors, missing = pick_vectors(chosen, salv, back)
    dim_bytes, _norm = _vector_shape([*salv.get("vectors", []), *back.get("vectors", [])])
    model_id, blobs, embed_error = embed_missing([chosen[i][1]["text"] for i in missing], dim_bytes)
    vectors.update({i: (model_id, b) for i, b in zip(missing, blobs, strict=True)})
    plain = _plain_tables(salv, back, s)
    _add_reviews(plain, review_rows)
    kept = {i for i, (t, _r) in chosen.items() if t == "memories"}
    lost = lost_report(named, kept, deleted, salv)
    _remember_lost(plain, [e["id"] for e in lost])
    tmp = home / ".mnemo.db.repair"
    _remove_tmp(tmp)
    last_seq = max((r.get("seq") or 0 for src in (salv, back) for r in src.get("changes", [])), default=0)
    counts = write_store(tmp, [*s.schema_sql, *back_schema], plain, chosen, vectors, last_seq)
    state = backup.check_db(tmp)
    if state != "ok":
        _remove_tmp(tmp)
        return {"restored": False, "skipped_backups": skipped, "salvage": s.stats,
                "message": f"the rebuilt store failed its check ({state}); nothing was changed",
                "hint": "report this; the damaged store is unchanged"}
    aside = home / f"damaged-{datetime.now(UTC).strftime(backup.STAMP)}"
    _fsync(tmp)
    _move_aside(home, aside)
    os.replace(tmp, db)
    backup.fsync_dir(home)
    return _report(good, skipped, s, salv, chosen, counts, missing, model_id, embed_error, lost, aside, dense,
                   salvaged)


def _dense_ids(chroma: Path) -> set[str] | None:
    return DenseIndex.stored_ids(chroma) if chroma.exists() else None


def _plain_tables(salv: dict, back: dict, s: sv.Salvage) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for table in sorted(set(salv) | set(back)):
        if table in ITEMS or table in SKIP or table.startswith(("fts", "sqlite_")):
            continue
        out[table] = merge_plain([*salv.get(table, []), *back.get(table, [])], _pk_of(table, s))
    return out


def _pk_of(table: str, s: sv.Salvage) -> list[str]:
    sql = next((e[2] for e in [*s.schema_sql, *schema.statements()] if e[1] == table and e[0] == "table"), None)
    return [] if sql is None else schema.primary_key(sql, table)


def _report(good, skipped, s, salv, chosen, counts, missing, model_id, embed_error, lost, aside,
            dense, salvaged) -> dict[str, Any]:
    mems = [r for t, r in chosen.values() if t == "memories"]
    from_salvage = sum(1 for r in mems if r["_rank"] and "_salvaged" not in r)
    lost_ids = [e["id"] for e in lost]
    what = (f"{len(lost_ids)} memories could not be recovered (listed in maybe_lost_memories)" if lost_ids
            else "no memory that any witness names is missing")
    src = (f"{len(mems) - from_salvage} only in the backup of {good['iso']}" if good else
           "no good backup to merge" + (" (none passed its check)" if skipped else ""))
    pieces = (f", {len(salvaged)} rebuilt from what the damaged file still holds (pending in Review: "
              "`mnemo review`)") if salvaged else ""
    msg = (f"rebuilt the store: {len(mems)} memories ({from_salvage} read from the damaged file{pieces}, {src}); "
           f"{what}")
    if missing:
        msg += f"; {len(missing)} lost vectors re-embedded" + (" at the next owner start" if embed_error else "")
    return {"restored": True, "restored_from": good["name"] if good else None,
            "backup_time": good["iso"] if good else None, "memories": len(mems), "from_damaged_file": from_salvage,
            "from_backup_only": len(mems) - from_salvage - len(salvaged),
            "salvaged": len(salvaged), "salvaged_memories": [{"id": i, "from": r["_salvaged"]}
                                                              for i, r in sorted(salvaged.items())], "rows": counts, "reembedded": len(missing),
            "reembed_model": model_id or None, "reembed_error": embed_error, "lost": what,
            "maybe_lost_memories": lost_ids, "lost_memories": lost, "dense_index_read": dense is not None,
            "salvage": s.stats, "damaged_moved_to": str(aside), "skipped_backups": skipped, "message": msg}


__all__ = ["deleted_ids", "merge_items", "newest_good_backup", "pick_vectors",
           "repair_store_file", "witnesses"]
