"""The dense index: chromadb collections derived from the SQLite store, one per partition.

The store's change log is replayed into chroma with idempotent upserts; the last replayed sequence number lives
in a state file inside the chroma directory, so deleting the directory simply means "rebuild". On a chroma error,
a model change or a count mismatch the directory is moved aside and rebuilt from the stored vectors, without
re-embedding. Until the index is ready (cold start, rebuild) callers scan the stored vectors exactly.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

from mnemo.core.store import Store, blob_to_vec

if TYPE_CHECKING:  # chromadb is imported when the index opens (heavy)
    from chromadb.api.client import Client

log = logging.getLogger("mnemo.index")

STATE_FILE = "mnemo-index.json"
INDEX_FORMAT = 1
HNSW_EF_SEARCH = 400  # default 100 gives recall@10 ~0.81 at 100k vectors; 400 gives ~0.99 (RECIPES)


def collection_name(part: str) -> str:
    return f"mnemo-{part}"[:500]


class DenseIndex:
    """`min_rows`: while no partition holds more vectors than this, chroma is not opened at all (`dormant`: ready,
    following the change log by sequence only, costing no memory): the mapped vector file answers those partitions
    exactly (core/search.py). The first replay that finds a larger partition opens chroma (issue 22)."""

    def __init__(self, directory: Path, store: Store, model_id: str, min_rows: int = 0):
        self.dir = Path(directory)
        self.store = store
        self.model_id = model_id
        self.min_rows = int(min_rows)
        self.threshold = self.min_rows  # the setting (min_rows drops to 0 once a partition outgrew it)
        self.dormant = False
        self._client: Client | None = None
        self._collections: dict[str, object] = {}
        self._missing: set[str] = set()
        self._lock = threading.RLock()
        self.ready = False
        self.indexed_seq = 0
        self.last_error: str | None = None
        self.rebuilds = 0
        # dormant: per partition, how many more vectors it can take before it may hold more than `min_rows`
        # (counted once, then lowered by every upsert replayed: `_outgrown`)
        self._room: dict[str, int] = {}

    # -- lifecycle -------------------------------------------------------------------------------------------
    def _read_state(self) -> dict:
        try:
            return json.loads((self.dir / STATE_FILE).read_text())
        except (OSError, ValueError):
            return {}

    def _write_state(self) -> None:
        tmp = self.dir / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps({"format": INDEX_FORMAT, "seq": self.indexed_seq, "model_id": self.model_id}))
        os.replace(tmp, self.dir / STATE_FILE)

    def close(self) -> None:
        """Release chroma's process-wide cached system for this path (it would keep stale file handles)."""
        client, self._client = self._client, None
        self._collections = {}
        self._missing = set()
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001
                pass
        # also a system left behind by a client whose start failed (a damaged directory). Only if chroma was ever
        # imported: importing it here costs ~1 s of CPU and ~60 MB in an owner whose index is dormant (issue 22)
        shared = sys.modules.get("chromadb.api.shared_system_client")
        if shared is None:
            return
        SharedSystemClient = shared.SharedSystemClient
        for ident in {str(self.dir), getattr(client, "_identifier", str(self.dir))}:
            system = SharedSystemClient._identifier_to_system.pop(ident, None)
            SharedSystemClient._identifier_to_refcount.pop(ident, None)
            if system is not None:
                try:
                    system.stop()
                except Exception:  # noqa: BLE001
                    pass

    def shutdown(self) -> None:
        """`close()` once no replay or rebuild is running (the engine's last step)."""
        with self._lock:
            self.close()

    def _open_client(self):
        self.close()
        os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
        import chromadb
        from chromadb.config import Settings

        self.dir.mkdir(parents=True, exist_ok=True)
        # declared to return the ClientAPI interface, it builds a `chromadb.api.client.Client`: the class with
        # `close()`, which `close()` above calls
        self._client = cast("Client", chromadb.PersistentClient(
            path=str(self.dir), settings=Settings(anonymized_telemetry=False, allow_reset=True)))
        self._collections = {}

    @property
    def _api(self) -> Client:
        """The open chroma client; on a closed index, the AttributeError a call on None always raised here (the
        lookups below treat it as any chroma failure)."""
        if self._client is None:
            raise AttributeError("the dense index is not open")
        return self._client

    def _collection(self, part: str, create: bool = True):
        col = self._collections.get(part)
        if col is None:
            name = collection_name(part)
            if create:
                col = self._api.get_or_create_collection(
                    name, embedding_function=None,
                    configuration={"hnsw": {"space": "cosine", "ef_search": HNSW_EF_SEARCH}})
            else:
                if part in self._missing:  # looked up before: a partition with nothing indexed yet
                    return None
                try:
                    col = self._api.get_collection(name, embedding_function=None)
                except Exception:  # noqa: BLE001 - missing collection
                    self._missing.add(part)
                    return None
            self._missing.discard(part)
            self._collections[part] = col
        return col

    def _needed(self, parts=None) -> bool:
        """Whether one of `parts` (default: every partition) holds more vectors than `min_rows`."""
        return any(self.store.count_vectors(p) > self.min_rows for p in (self.store.parts() if parts is None
                                                                        else parts))

    def _outgrown(self, changes: list) -> bool:
        """Whether a partition the replayed `changes` upserted into may now hold more than `min_rows` vectors
        (dormant). A partition is counted once, then each upsert replayed lowers its room by one (an update of an
        item it holds too: the room is a floor), and it is counted again only when the room runs out. Counting
        every changed partition at every replay cost ~15 ms a second at 100k rows while writes came in (issue 22,
        thirteenth pass)."""
        grown: dict[str, int] = {}
        for c in changes:
            if c["part"] and c["op"] == "upsert":
                grown[c["part"]] = grown.get(c["part"], 0) + 1
        for part, n in grown.items():
            room = self._room.get(part)
            if room is None or room < n:
                room = self.min_rows - self.store.count_vectors(part) + n  # the count includes these upserts
                if room < n:
                    return True
            self._room[part] = room - n
        return False

    def ensure_ready(self) -> None:
        """Open the index, replay the change log, verify counts; rebuild when missing, corrupt, stale or foreign.
        Dormant instead (nothing opened) while every partition is small enough for the exact scan."""
        with self._lock:
            if self.min_rows and not self._needed():
                self._room = {}
                self.close()
                self.dormant, self.ready, self.indexed_seq = True, True, self.store.max_seq()
                self.last_error = None
                return
            self.dormant = False
            try:
                state = self._read_state()
                if (not state or state.get("format") != INDEX_FORMAT or state.get("model_id") != self.model_id):
                    reason = "missing" if not state else "built for another model or format"
                    self._rebuild(reason)
                    return
                self._open_client()
                self.indexed_seq = int(state.get("seq", 0))
                self.catch_up()
                mismatch = self._count_mismatch()
                if mismatch:
                    self._rebuild(mismatch)
                    return
                self.ready = True
            except Exception as exc:  # noqa: BLE001 - any chroma failure means: rebuild from the truth
                log.warning("dense index unusable (%s); rebuilding from the store", exc)
                self._rebuild(f"error: {exc}")

    def _count_mismatch(self) -> str | None:
        for part in self.store.parts():
            want = self.store.count_vectors(part)
            col = self._collection(part, create=False)
            have = col.count() if col is not None else 0
            if want != have:
                return f"partition {part}: index has {have} vectors, store has {want}"
        return None

    def _rebuild(self, reason: str) -> None:
        log.info("rebuilding the dense index (%s)", reason)
        self.ready = False
        self.rebuilds += 1
        self.close()
        if self.dir.exists():
            aside = self.dir.with_name(f"{self.dir.name}.old-{int(time.time() * 1000)}")
            try:
                os.replace(self.dir, aside)
                shutil.rmtree(aside, ignore_errors=True)
            except OSError:
                shutil.rmtree(self.dir, ignore_errors=True)
        self._open_client()
        start_seq = self.store.max_seq()
        for rows in self.store.iter_vectors(batch=4000):
            by_part: dict[str, list] = {}
            for r in rows:
                if r["model_id"] == self.model_id:  # another model's: re-embedded first, never mixed in
                    by_part.setdefault(r["part"], []).append(r)
            for part, items in by_part.items():
                col = self._collection(part)
                col.upsert(ids=[r["item_id"] for r in items],
                           embeddings=[blob_to_vec(r["vec"]).tolist() for r in items])
        self.indexed_seq = start_seq
        self._write_state()
        self.catch_up()
        self.ready = True
        self.last_error = None
        log.info("dense index rebuilt: %d vectors", self.store.count_vectors())

    def catch_up(self, max_batch: int = 5000) -> int:
        """Replay change-log entries after `indexed_seq`; returns how many were applied. Dormant: follow the
        sequence, and open chroma once a changed partition has outgrown `min_rows`."""
        with self._lock:
            if self.dormant:
                changes = self.store.changes_after(self.indexed_seq)
                if not changes:
                    return 0
                if self._outgrown(changes):
                    log.info("a partition outgrew %d vectors: opening the ANN index", self.min_rows)
                    self.ready = False
                    self.min_rows = 0  # from now on for this owner
                    self.ensure_ready()
                    return len(changes)
                self.indexed_seq = int(changes[-1]["seq"])
                return len(changes)
            if self._client is None:
                return 0
            applied = 0
            while True:
                changes = self.store.changes_after(self.indexed_seq, limit=max_batch)
                if not changes:
                    break
                latest: dict[str, tuple[str, str]] = {}
                for c in changes:
                    latest[c["item_id"]] = (c["op"], c["part"])
                rows = self.store.vector_rows([i for i, (op, _) in latest.items() if op == "upsert"])
                vecs = {i: r["vec"] for i, r in rows.items() if r["model_id"] == self.model_id}
                upserts: dict[str, tuple[list, list]] = {}
                deletes: dict[str, list] = {}
                for item_id, (_op, part) in latest.items():
                    if item_id in vecs:
                        cur_part = rows[item_id]["part"]
                        if part and part != cur_part:  # moved partition (e.g. promoted): drop the old copy
                            deletes.setdefault(part, []).append(item_id)
                        ids, embs = upserts.setdefault(cur_part, ([], []))
                        ids.append(item_id)
                        embs.append(blob_to_vec(vecs[item_id]).tolist())
                    elif part:
                        deletes.setdefault(part, []).append(item_id)
                for part, ids in deletes.items():
                    col = self._collection(part, create=False)
                    if col is not None:
                        col.delete(ids=ids)
                for part, (ids, embs) in upserts.items():
                    self._collection(part).upsert(ids=ids, embeddings=embs)
                self.indexed_seq = int(changes[-1]["seq"])
                self._write_state()
                applied += len(changes)
            return applied

    # -- queries ---------------------------------------------------------------------------------------------
    def query(self, part: str, vec, n: int) -> list[tuple[str, float]]:
        """Top-n (item_id, cosine) in one partition from the ANN index. Raises if the index is not ready."""
        col = self._collection(part, create=False)
        if col is None:
            return []
        try:  # n_results larger than the collection is fine (fewer results); counting would cost ~10 ms at 100k
            res = col.query(query_embeddings=[list(map(float, vec))], n_results=n, include=["distances"])
        except Exception:  # noqa: BLE001 - an empty collection
            if col.count() == 0:
                return []
            raise
        ids = res["ids"][0]
        dists = res["distances"][0]
        return [(i, 1.0 - float(d)) for i, d in zip(ids, dists, strict=False)]

    def counts(self) -> dict[str, int]:
        if self.dormant:  # every vector is served by the exact scan
            return {p: self.store.count_vectors(p) for p in self.store.parts()}
        if not self.ready or self._client is None:
            return {}
        out = {}
        for part in self.store.parts():
            col = self._collection(part, create=False)
            out[part] = col.count() if col is not None else 0
        return out

    @staticmethod
    def stored_ids(directory: Path, page: int = 5000) -> set[str] | None:
        """Every item id held by the index at `directory` (a witness of what a damaged store held), read through
        chroma's API without a store; None when the directory is missing or unreadable."""
        if not (Path(directory) / "chroma.sqlite3").exists():
            return None
        idx = DenseIndex(directory, None, "")  # type: ignore[arg-type]  # only the client is used
        try:
            idx._open_client()
            ids: set[str] = set()
            for col in idx._api.list_collections():
                name = col if isinstance(col, str) else col.name
                if not name.startswith("mnemo-"):
                    continue
                c = idx._api.get_collection(name, embedding_function=None)
                for off in range(0, c.count(), page):
                    ids.update(c.get(include=[], limit=page, offset=off)["ids"])
            return ids
        except Exception as exc:  # noqa: BLE001 - a damaged index is no witness
            log.warning("could not read the ids of the dense index at %s: %s", directory, exc)
            return None
        finally:
            idx.close()

    def mark_broken(self, exc: Exception) -> None:
        self.ready = False
        self.last_error = str(exc)


def cosines(mat, q):
    """The cosines of the rows of `mat` (float32, unit rows) with `q`: numpy's own loop (`einsum`), on this thread.
    A row's value is the same wherever it stands and however many rows come with it, so the vector file's scan,
    its re-scored candidates, the change-log tail and this module's exact scan agree to the last bit. Not BLAS:
    its matrix-vector product spreads over threads (a 2,000-row tail already), and with the other core busy (an
    import embeds its next notes there) it waits for that core: a tail of up to 2,000 rows cost ~1.6 ms a note in
    an import at 100k (issue 22, twelfth pass), as the file's scan once did. On idle cores BLAS is faster (2,000
    rows: 0.05 against 0.14-0.19 ms; docs/benchmarks.md)."""
    import numpy as np

    return np.einsum("ij,j->i", mat, q)


def exact_scores(store: Store, parts: Sequence[str], vec, ids: Sequence[str] | None = None,
                 model_id: str | None = None) -> list[tuple[str, float]]:
    """Exact cosine over stored vectors (cold start, rebuild, the un-indexed tail, or a given id set); with
    `model_id`, over the vectors that model made only (a store being re-embedded holds two models' vectors)."""
    import numpy as np

    q = np.asarray(vec, dtype=np.float32)
    out: list[tuple[str, float]] = []
    if ids is not None:
        blobs = store.vectors(ids, parts, model_id)
        if not blobs:
            return []
        keys = list(blobs)
        mat = np.frombuffer(b"".join(blobs[k] for k in keys), dtype=np.float32).reshape(len(keys), -1)
        if mat.shape[1] != q.shape[0]:
            return []
        sims = cosines(mat, q)
        return list(zip(keys, sims.tolist(), strict=False))
    for part in parts:
        for rows in store.iter_vectors(part=part, batch=20000):
            if model_id is not None:
                rows = [r for r in rows if r["model_id"] == model_id]
                if not rows:
                    continue
            mat = np.frombuffer(b"".join(r["vec"] for r in rows), dtype=np.float32).reshape(len(rows), -1)
            if mat.shape[1] != q.shape[0]:
                continue
            sims = cosines(mat, q)
            out.extend(zip((r["item_id"] for r in rows), sims.tolist(), strict=False))
    return out
