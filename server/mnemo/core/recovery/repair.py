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
from mnemo.core.models import Memory
from mnemo.core.recovery import backup
from mnemo.core.store import salvage as sv
from mnemo.core.store import schema
from mnemo.core.store.codec import vec_to_blob
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
    skipped = []
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
        blobs = []
        for i in range(0, len(texts), 256):
            blobs.extend(vec_to_blob(v) for v in emb.embed(texts[i:i + 256]))
        return emb.model_id, blobs, None
    except Exception as exc:  # noqa: BLE001 - the repair must not depend on the model
        zero = bytes(dim_bytes or 384 * 4)
        return UNEMBEDDED, [zero] * len(texts), f"{exc}"


# -- witnesses ---------------------------------------------------------------------------------------------------
def witnesses(s: sv.Salvage, salv: dict, back: dict, dense_ids: set[str] | None) -> dict[str, set[str]]:
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
                   index_keys_of=frozenset({"sqlite_autoindex_memories_1"}))
    salv = _from_salvage(s)
    deleted = deleted_ids(salv, back)
    chosen = {i: (t, r) for t in ITEMS for i, r in merge_items(t, salv, back, deleted).items()}
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
    dense = _dense_ids(home / "chroma")
    kept = {i for i, (t, _r) in chosen.items() if t == "memories"}
    lost = lost_report(witnesses(s, salv, back, dense), kept, deleted, salv)
    aside = home / f"damaged-{datetime.now(UTC).strftime(backup.STAMP)}"
    _fsync(tmp)
    _move_aside(home, aside)
    os.replace(tmp, db)
    backup.fsync_dir(home)
    return _report(good, skipped, s, salv, chosen, counts, missing, model_id, embed_error, lost, aside, dense)


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
            dense) -> dict[str, Any]:
    mems = [r for t, r in chosen.values() if t == "memories"]
    from_salvage = sum(1 for r in mems if r["_rank"])
    lost_ids = [e["id"] for e in lost]
    what = (f"{len(lost_ids)} memories could not be recovered (listed in maybe_lost_memories)" if lost_ids
            else "no memory that any witness names is missing")
    src = (f"{len(mems) - from_salvage} only in the backup of {good['iso']}" if good else
           "no good backup to merge" + (" (none passed its check)" if skipped else ""))
    msg = f"rebuilt the store: {len(mems)} memories ({from_salvage} read from the damaged file, {src}); {what}"
    if missing:
        msg += f"; {len(missing)} lost vectors re-embedded" + (" at the next owner start" if embed_error else "")
    return {"restored": True, "restored_from": good["name"] if good else None,
            "backup_time": good["iso"] if good else None, "memories": len(mems), "from_damaged_file": from_salvage,
            "from_backup_only": len(mems) - from_salvage, "rows": counts, "reembedded": len(missing),
            "reembed_model": model_id or None, "reembed_error": embed_error, "lost": what,
            "maybe_lost_memories": lost_ids, "lost_memories": lost, "dense_index_read": dense is not None,
            "salvage": s.stats, "damaged_moved_to": str(aside), "skipped_backups": skipped, "message": msg}


__all__ = ["deleted_ids", "merge_items", "newest_good_backup", "pick_vectors",
           "repair_store_file", "witnesses"]
