"""The persisted vector matrix: every stored vector in one memory-mapped file, so an owner that starts on an
indexed store answers its first semantic query exactly, in proportion to what the query needs (one partition's
rows), instead of scanning SQLite or waiting for chroma.

`<home>/cache/vectors.f32` holds a JSON header (format, model id, dimension, the change-log sequence it reflects
and the identity of that change, the rows of each partition), the item ids, and the float32 matrix (rows grouped
by partition). It is derived: written by the owner's indexer thread (a new file, fsync'd, renamed over the old
one) when enough changes have gone by and when the owner stops, and never trusted blindly. At open it must parse,
have exactly the size its header says, reflect a change the store still holds with the same item and time (so a
store restored from a backup, or rebuilt, is not matched with a newer file), be made by the current model, and a
few sampled rows must equal the stored vectors. Anything else: the file is ignored and rewritten. Changes after
its sequence (the tail) are scored exactly from SQLite at query time, like the dense index's unreplayed tail.

Large partitions are searched through their compact exact scan (core/indexes/compact.py), built by the indexer
once the file is checked; rows are otherwise read with pread, or through a private mapping dropped after each
read (`compact.SparseRows`), where a whole partition is not scanned, so the owner's RSS does not keep the float32
pages it touched (issue 22, third and seventh passes).
"""

from __future__ import annotations

import bisect
import json
import logging
import mmap
import os
import shutil
import threading
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mnemo.core.indexes import compact
from mnemo.core.indexes.dense import cosines
from mnemo.core.store import Store

log = logging.getLogger("mnemo.vector_file")

FILE_NAME = "vectors.f32"
MAGIC = b"MNEMOVF1"
FORMAT = 1
ALIGN = 64
SAMPLES = 8  # rows compared with SQLite at open


def _refresh_after(count: int) -> int:
    """Tail length at which the file is rewritten: small enough to keep the tail scan cheap, large enough that a
    busy writer does not rewrite a 100k-row file every few seconds."""
    return max(200, count // 50)


class VectorFile:
    """One loaded (memory-mapped, validated) matrix file. Thread-safe for readers; `write()` replaces the file."""

    def __init__(self, directory: Path, store: Store, model_id: str):
        self.dir = Path(directory)
        self.path = self.dir / FILE_NAME
        self.store = store
        self.model_id = model_id
        self._lock = threading.Lock()
        self._loaded: _Matrix | None = None
        self.last_problem: str | None = None
        # the stored vectors of the items changed after the file, by item: (seq, time) of the item's last change
        # when read, its partition, model and vector (None: no vector then); see `tail_scores`
        self._tail: dict[str, tuple] = {}
        self._tail_lock = threading.Lock()
        # the last tail scored outside a transaction: (its rows, the partitions, the model, its items, their
        # vectors as one matrix); `Store.recent_changes` hands back the same rows while the log has not grown
        self._tail_ready: tuple | None = None

    # -- open ------------------------------------------------------------------------------------------------
    def matrix(self) -> _Matrix | None:
        """The validated matrix, loading it on first use; None when there is no usable file."""
        m = self._loaded
        if m is not None:
            return m
        with self._lock:
            if self._loaded is None:
                self._loaded, problem = _open(self.path, self.store, self.model_id)
                if problem:
                    self.last_problem = problem
                    log.info("vector file not used: %s", problem)
            return self._loaded

    def stale(self, any_tail: bool = False) -> bool:
        """True when the file is missing or unusable, or its tail has grown past the rewrite threshold (`any_tail`:
        holds any change)."""
        m = self.matrix()
        if m is None:
            return self.store.max_seq() > 0 or self.path.exists()
        tail = self.store.max_seq() - m.seq
        return tail > 0 and (any_tail or tail >= _refresh_after(m.count))

    # -- write -----------------------------------------------------------------------------------------------
    def write(self) -> None:
        """Write the file from one consistent read of the store (new file, fsync, rename), then use it. On a
        failure (disk full) the temporary files are removed and the old file stays."""
        import numpy as np

        self.dir.mkdir(parents=True, exist_ok=True)
        rows_tmp = self.path.with_suffix(".rows.tmp")  # the matrix, streamed while reading (no copy in memory)
        tmp = self.path.with_suffix(".tmp")
        try:
            header, ids = self._write_tmp(rows_tmp, tmp)
            os.replace(tmp, self.path)
        finally:
            rows_tmp.unlink(missing_ok=True)
            tmp.unlink(missing_ok=True)
        _fsync_dir(self.dir)
        loaded = _Matrix(self.path, header, ids, np)
        loaded.verified = True
        with self._lock:
            self._loaded, self.last_problem = loaded, None
        log.info("vector file written: %d rows at change %d", len(ids), header["seq"])

    def _write_tmp(self, rows_tmp: Path, tmp: Path) -> tuple[dict, list[str]]:
        """The new file at `tmp`, complete and fsync'd (the rows streamed through `rows_tmp` first)."""
        with open(rows_tmp, "w+b") as rows_f:
            header, ids = self._read_rows(rows_f)
            id_bytes = "\n".join(ids).encode()
            header["data_at"] = 0
            for _ in range(4):  # the offset's own digits are part of what precedes the data: settle it
                head = json.dumps(header).encode()
                data_at = _aligned(len(MAGIC) + 8 + len(head) + len(id_bytes))
                if data_at == header["data_at"]:
                    break
                header["data_at"] = data_at
            with open(tmp, "wb") as f:
                f.write(MAGIC + len(head).to_bytes(8, "little") + head + id_bytes)
                if f.tell() > data_at:
                    raise RuntimeError("vector file header did not settle")
                f.write(b"\0" * (data_at - f.tell()))
                rows_f.seek(0)
                shutil.copyfileobj(rows_f, f, 1 << 20)
                f.flush()
                os.fsync(f.fileno())
        return header, ids

    def _read_rows(self, out) -> tuple[dict, list[str]]:
        """Stream every vector of the current model, grouped by partition, to `out` from one consistent read;
        the header (without its data offset) and the item ids. With a loaded, fully verified file whose change the
        store still holds: its rows (minus the items changed since) copied from the mapped matrix plus the changed
        items' vectors read from SQLite, so a rewrite reads the tail, not the store (issue 22); else every row."""
        m = self._loaded
        if m is not None and m.verified and m.count and m.seq:
            with self.store.reading():
                if self.store.change_at(m.seq) == m.change:
                    return self._tail_rows(m, out)
        return self._all_rows(out)

    def _tail_rows(self, m: _Matrix, out) -> tuple[dict, list[str]]:
        """`_read_rows` from the loaded matrix `m` and the changes after it (inside the caller's read)."""
        np = m._np
        store = self.store
        seq = store.max_seq()
        ident = store.change_at(seq)
        changed = {c["item_id"] for c in store.changes_after(m.seq)}
        fresh: dict[str, list] = {}
        for _item_id, r in sorted(store.vector_rows(sorted(changed)).items()):
            if r["model_id"] == self.model_id and len(r["vec"]) == m.dim * 4:
                fresh.setdefault(r["part"], []).append(r)
        parts: dict[str, list[int]] = {}
        ids: list[str] = []
        crc = 0
        step = 1024  # rows per read (see verify)
        for part in sorted(set(m.parts) | set(fresh)):
            start = len(ids)
            a, b = m.parts.get(part, (0, 0))
            for lo in range(a, b, step):
                hi = min(b, lo + step)
                keep = [i for i in range(lo, hi) if m.ids[i] not in changed]
                if not keep:
                    continue
                block = m.read(lo, hi)  # pread, not the mapping: a rewrite leaves no pages in the owner's RSS
                if len(keep) != hi - lo:
                    block = block[np.asarray(keep) - lo]
                data = np.ascontiguousarray(block, dtype=np.float32).tobytes()
                out.write(data)
                crc = zlib.crc32(data, crc)
                ids.extend(m.ids[i] for i in keep)
            for r in fresh.get(part, []):
                out.write(r["vec"])
                crc = zlib.crc32(r["vec"], crc)
                ids.append(r["item_id"])
            parts[part] = [start, len(ids)]
        header = {"format": FORMAT, "model_id": self.model_id, "dim": m.dim, "count": len(ids), "seq": seq,
                  "change": list(ident) if ident else None, "parts": parts,
                  "ids_len": len("\n".join(ids).encode()), "crc": crc}
        return header, ids

    def _all_rows(self, out) -> tuple[dict, list[str]]:
        store = self.store
        parts: dict[str, list[int]] = {}
        ids: list[str] = []
        dim = 0
        crc = 0
        with store.reading():
            seq = store.max_seq()
            ident = store.change_at(seq)
            for part in store.parts():
                start = len(ids)
                for rows in store.iter_vectors(part=part, batch=5000):
                    for r in rows:
                        if r["model_id"] != self.model_id:
                            continue  # re-embedded at owner start (before this file is written)
                        dim = dim or len(r["vec"]) // 4
                        if len(r["vec"]) == dim * 4:
                            ids.append(r["item_id"])
                            out.write(r["vec"])
                            crc = zlib.crc32(r["vec"], crc)
                parts[part] = [start, len(ids)]
        header = {"format": FORMAT, "model_id": self.model_id, "dim": dim, "count": len(ids), "seq": seq,
                  "change": list(ident) if ident else None, "parts": parts,
                  "ids_len": len("\n".join(ids).encode()), "crc": crc}
        return header, ids

    def refresh(self, any_tail: bool = False) -> bool:
        """Rewrite the file when it is stale (the indexer thread's step, and, with `any_tail`, the owner's last)."""
        if not self.stale(any_tail):
            return False
        self.write()
        return True

    def verify(self) -> bool:
        """Check every row against the file's checksum (the indexer thread, once after start: the open checks
        only sample rows); a file that fails is dropped and rewritten. False when it failed. The rows are read
        from the file, not through the mapping (whose pages would stay in the owner's RSS)."""
        m = self.matrix()
        if m is None or m.verified:
            return True
        crc = 0
        step = 512  # small reads: a freed buffer of several MB stays in the allocator's arena (the owner's RSS)
        for a in range(0, m.count, step):
            crc = zlib.crc32(m.read(a, min(m.count, a + step)), crc)
        if crc == m.crc:
            m.verified = True
            return True
        log.warning("vector file %s fails its checksum; rewriting it", self.path)
        with self._lock:
            if self._loaded is m:
                self._loaded, self.last_problem = None, "checksum mismatch"
        self.path.unlink(missing_ok=True)
        return False

    def ensure_compact(self) -> int:
        """Give every partition of at least `compact.MIN_ROWS` rows of the checked file its compact exact scan
        (core/indexes/compact.py), then, for those of at least `compact.TRIM_ROWS` rows, drop the float32 pages the
        mapping holds for them (the first queries scanned them); the indexer's step. Returns how many partitions it
        built."""
        m = self.matrix()
        if m is None or not m.verified:
            return 0
        m.index_rows()
        built = 0
        for part, (a, b) in sorted(m.parts.items()):
            if b - a >= compact.MIN_ROWS and part not in m.compact and part not in m.compact_failed:
                trim = b - a >= compact.TRIM_ROWS
                if trim:
                    m.trim(a, b)  # before too: the build's own peak should not come on top of the scanned pages
                try:
                    scan = compact.build(m.read, a, b - a, m.dim)
                except Exception as exc:  # noqa: BLE001 - an optimisation: the float32 scan answers the same
                    m.compact_failed.add(part)
                    log.warning("no compact exact scan of %s (%s); it is scanned in float32", part, exc)
                    continue
                if trim:
                    m.trimmed.add(part)  # before the scan is published: its candidates are then read by `m.sparse_rows`
                    m.trim(a, b)
                else:  # its candidates are gathered from the mapping: map its pages now, not one fault per row
                    m.touch(a, b)  # in the queries' first minutes (what the float32 scan's first query did)
                m.compact[part] = scan
                built += 1
                log.info("compact exact scan of %s: %d rows", part, b - a)
        return built

    # -- query -----------------------------------------------------------------------------------------------
    def small(self, parts: Sequence[str], rows: int) -> bool:
        """True when the file is usable and none of `parts` holds more than `rows` rows in it."""
        m = self.matrix()
        return m is not None and all(b - a <= rows for a, b in (m.parts.get(p, (0, 0)) for p in parts))

    def search(self, parts: Sequence[str], qvec, k: int, *, unchanged: bool = False) -> tuple[dict[str, float],
                                                                                               list] | None:
        """Exact top-`k` cosines per partition from the file, without the items changed after it, and those
        changes (the change-log rows after the file: the caller scores them from SQLite); None when there is no
        usable file or the query has another dimension. Per partition the answer holds the file's best
        `k + changes` rows less the changed ones; with `unchanged` (a write's neighbour check, which reads only the
        `k` best besides document blocks) it may hold only the `k` best unchanged rows (`_Matrix.search`)."""
        m = self.matrix()
        if m is None:
            return None
        return m.search(parts, qvec, k, self.store, unchanged=unchanged)

    def tail_scores(self, parts: Sequence[str], qvec, tail: Sequence, top: int | None = None) -> dict[str, float]:
        """Exact cosines of the items the change-log rows `tail` wrote (`op` upsert), in `parts`, this model's
        vectors only: what the file (or an index) does not reflect, as `dense.exact_scores(ids=...)` finds them.
        The tail is up to `_refresh_after(count)` rows (200 at 10k, 2,000 at 100k) and every write's neighbour
        search and every recall scores it again: an item's vector read from SQLite is kept here while its last
        change in the log is the same one (every change of a vector is logged, with a new `seq`), so each is read
        once (issue 22, fourth pass); the tail's matrix is kept while the log has not grown, and when it grew by
        rows naming only items the tail did not name, the new items' rows are put into it (`_tail_extended`)
        instead of making it again from every row (seventh pass). Nothing read inside a transaction is kept (it
        may be rolled back). `top`: the caller reads only the `top` best items besides document blocks (a write's
        neighbour check): only the items that can be among them are answered (`_scored`)."""
        import numpy as np

        q = np.asarray(qvec, dtype=np.float32)
        ready = self._tail_ready
        if ready is not None and ready[1] == tuple(parts) and ready[2] == self.model_id:
            if ready[0] is tail:  # the same rows as the last query's: the log has not grown since
                return _scored(ready[3], ready[4], q, top)
        made = None
        if ready is not None and ready[1] == tuple(parts) and ready[2] == self.model_id \
                and not self.store.in_transaction():
            made = self._tail_extended(ready, parts, tail)
        if made is None:
            made = self._tail_matrix(parts, tail)
        if not self.store.in_transaction():
            self._tail_ready = (tail, tuple(parts), self.model_id, *made)
        return _scored(made[0], made[1], q, top)

    def _tail_matrix(self, parts: Sequence[str], tail: Sequence) -> tuple[list[str], Any, set[str]]:
        """The items of `tail` that `tail_scores` scores (in `parts`, of this model, sorted), their vectors as one
        matrix (an empty list and matrix when none, or when their dimensions differ), and every item `tail`
        names."""
        import numpy as np

        last: dict[str, tuple] = {}
        for c in tail:  # in `seq` order: the last change of each item wins
            last[c["item_id"]] = (int(c["seq"]), float(c["at"]))
        named = set(last)
        upserts = sorted({c["item_id"] for c in tail if c["op"] == "upsert"})
        keys, vecs = self._tail_vectors(parts, upserts, last, named)
        if not keys or len({v.shape[0] for v in vecs}) != 1:
            return [], np.zeros((0, 0), dtype=np.float32), named
        return keys, np.stack(vecs), named

    def _tail_extended(self, ready: tuple, parts: Sequence[str], tail: Sequence) -> tuple[list[str], Any,
                                                                                          set[str]] | None:
        """`_tail_matrix(parts, tail)` from the last one made (`ready`), when `tail` is its rows and more (the same
        row objects first: `Store.recent_changes` extends its list) and the new rows name only items the old rows
        did not: their scored rows are put in at their places in the sorted items. None when it cannot be made so
        (the caller makes it from every row)."""
        import numpy as np

        old, keys, mat, named = ready[0], ready[3], ready[4], ready[5]
        if len(tail) <= len(old) or (old and tail[len(old) - 1] is not old[-1]):
            return None
        extra = tail[len(old):]
        last: dict[str, tuple] = {}
        for c in extra:
            last[c["item_id"]] = (int(c["seq"]), float(c["at"]))
        if not named.isdisjoint(last):
            return None  # an item changed again: its place and vector are read anew with every row
        upserts = sorted({c["item_id"] for c in extra if c["op"] == "upsert"})
        named = named | set(last)
        new_keys, vecs = self._tail_vectors(parts, upserts, last, named)
        if not new_keys:
            return keys, mat, named
        if len({v.shape[0] for v in vecs}) != 1 or (keys and mat.shape[1] != vecs[0].shape[0]):
            return None
        if not keys:
            return new_keys, np.stack(vecs), named
        at = [bisect.bisect_left(keys, k) for k in new_keys]  # the old rows before each new item (sorted, unique)
        merged = list(keys)
        for n, (pos, k) in enumerate(zip(at, new_keys, strict=True)):
            merged.insert(pos + n, k)
        return merged, np.insert(mat, at, np.stack(vecs), axis=0), named

    def _tail_vectors(self, parts: Sequence[str], upserts: list[str], last: dict[str, tuple],
                      named: set[str]) -> tuple[list[str], list]:
        """Of the items `upserts` (sorted), those in `parts` with a vector of this model now, and those vectors:
        kept in `_tail` while an item's last change (`last`) is the same, else read from SQLite. `named`: the items
        the whole tail names (what `_tail` keeps)."""
        import numpy as np

        if not upserts:
            return [], []
        with self._tail_lock:
            known = {i: e for i in upserts if (e := self._tail.get(i)) is not None and e[0] == last[i]}
        missing = [i for i in upserts if i not in known]
        if missing:
            rows = self.store.vector_rows(missing)
            fresh = {}
            for i in missing:
                r = rows.get(i)
                fresh[i] = (last[i], None, None, None) if r is None else \
                    (last[i], r["part"], r["model_id"], np.frombuffer(r["vec"], dtype=np.float32))
            known.update(fresh)
            if not self.store.in_transaction():
                with self._tail_lock:
                    self._tail.update(fresh)
                    if len(self._tail) > 2 * len(named) + 256:  # the file was rewritten: drop what left the tail
                        self._tail = {i: e for i, e in self._tail.items() if i in named}
        wanted = set(parts)
        keys = [i for i in upserts if known[i][1] in wanted and known[i][2] == self.model_id]
        return keys, [known[i][3] for i in keys]

    def scores_for(self, parts: Sequence[str], qvec, ids: Sequence[str]) -> tuple[dict[str, float], list[str]]:
        """Exact cosines of the given items from the file (those in `parts` and unchanged since it was written),
        and the ids it cannot answer (the caller scores them from SQLite). Recall asks this for its keyword-only
        hits on every query: a few rows of the mapped matrix instead of a read of their vectors (issue 22)."""
        m = self.matrix()
        if m is None:
            return {}, list(ids)
        return m.scores_for(parts, qvec, ids, self.store)


def _scored(keys: list[str], mat, q, top: int | None = None) -> dict[str, float]:
    """`tail_scores`' answer from its kept items and matrix; with `top`, only the items scoring at least the
    (`top` + blocks)-th best, blocks being every document block among `keys`: an item left out has `top` items
    besides blocks scoring more, so it is not among the `top` best besides blocks, and the items answered keep
    their order. A write's neighbour check scores up to 2,000 changed items at 100k; its caller sorted all of
    them to read 40 (~0.4 ms a write; issue 22, tenth pass)."""
    if not keys or mat.shape[1] != q.shape[0]:
        return {}
    sims = cosines(mat, q)
    if top is not None:
        want = top + bisect.bisect_left(keys, "blk.") - bisect.bisect_left(keys, "blk-")  # `keys` is sorted
        if 0 < want < len(keys):
            import numpy as np

            kth = sims[np.argpartition(-sims, want - 1)[want - 1]]
            at = np.flatnonzero(sims >= kth)
            return dict(zip([keys[i] for i in at.tolist()], sims[at].tolist(), strict=True))
    return dict(zip(keys, sims.tolist(), strict=True))


class _Matrix:
    def __init__(self, path: Path, header: dict, ids: list[str], np):
        self.seq = int(header["seq"])
        self.count = int(header["count"])
        self.dim = int(header["dim"])
        self.parts = {p: (int(a), int(b)) for p, (a, b) in header["parts"].items()}
        self.crc = int(header["crc"])
        self.change = tuple(header["change"]) if header.get("change") else None  # the identity of change `seq`
        self.verified = False
        self.ids = ids
        self._rows: dict[str, int] | None = None  # id -> row, built on the first `scores_for`
        self._changed_of: tuple[list, set[str]] | None = None  # `_changed`'s last answer
        self._changed_rows_of: tuple[set[str], Any] | None = None  # `_changed_rows`' last answer
        # `_changed`'s last set when it grew from the one before: (the set, the one before, the items added)
        self._grown: tuple[set[str], set[str], set[str]] | None = None
        self._np = np
        self.path = path
        self.data_at = int(header["data_at"])
        self.compact: dict[str, compact.CompactScan] = {}  # partition -> its compact exact scan (ensure_compact)
        self.compact_failed: set[str] = set()  # partitions whose build failed (not retried for this file)
        self.trimmed: set[str] = set()  # partitions whose float32 pages are kept out of the RSS (`sparse_rows`)
        self._fd = -1  # for pread: the file this matrix maps, even after a rewrite renamed another over it
        self._sparse: compact.SparseRows | None = None
        if self.count and self.dim:
            with open(path, "rb") as f:
                self.mat = np.memmap(f, dtype=np.float32, mode="r", offset=self.data_at,
                                     shape=(self.count, self.dim))
                self._fd = os.dup(f.fileno())
        else:
            self.mat = np.zeros((0, max(self.dim, 1)), dtype=np.float32)
        # the same memory as a plain array: `np.memmap` indexes through Python code and wraps every result
        self._arr = self.mat.view(np.ndarray)

    def __del__(self):
        fd, self._fd = getattr(self, "_fd", -1), -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass

    def _changed(self, store: Store) -> tuple[list, set[str]]:
        """The change-log rows after this file (`Store.recent_changes`) and the items they name, the set made once
        per list of rows (the same list while the log has not grown; a grown list that starts with the rows of the
        last adds the new rows' items to its set; nothing kept inside a transaction). Read only."""
        tail = store.recent_changes(self.seq)
        kept = self._changed_of
        if kept is not None and kept[0] is tail:
            return tail, kept[1]
        old = kept[0] if kept is not None else None
        grown: tuple[set[str], set[str]] | None = None
        if old is not None and len(tail) > len(old) and (not old or tail[len(old) - 1] is old[-1]):
            added = {c["item_id"] for c in tail[len(old):]}
            changed = kept[1] | added  # type: ignore[index]
            grown = (kept[1], added)  # type: ignore[index]
        else:
            changed = {c["item_id"] for c in tail}
        if not store.in_transaction():
            self._changed_of = (tail, changed)
            self._grown = grown if grown is None else (changed, *grown)
        return tail, changed

    def _changed_rows(self, changed: set[str], rows_of: dict[str, int]):
        """The file's rows of the items in `changed` (`_changed`'s set) that it holds, as one int64 array: made once
        per set, and for a set that holds the last one, from its new items only (a write adds one item to the
        set; reading every changed item's row at every write cost ~0.1 ms a thousand changes, and at 100k rows
        up to 2,000 changes stand after the file). Read only: the set is kept with its answer, never changed."""
        np = self._np
        kept = self._changed_rows_of
        if kept is not None and kept[0] is changed:
            return kept[1]
        grown = self._grown
        added: set[str] | None = None  # what to look up beside the kept rows (its items already kept are skipped)
        if kept is not None and grown is not None and grown[0] is changed and grown[1] is kept[0]:
            added = grown[2]  # `_changed` grew the kept set into this one: its new items only, no set walked
        elif kept is not None and len(kept[0]) <= len(changed) and kept[0] <= changed:
            added = changed
        if kept is not None and added is not None:
            new = [r for i in added - kept[0] if (r := rows_of.get(i)) is not None]
            rows = np.concatenate([kept[1], np.asarray(new, dtype=np.int64)]) if new else kept[1]
        else:
            rows = np.asarray([r for i in changed if (r := rows_of.get(i)) is not None], dtype=np.int64)
        self._changed_rows_of = (changed, rows)
        return rows

    def index_rows(self) -> None:
        """The id -> row map `scores_for` reads (the indexer makes it after the checks; until then SQLite answers)."""
        if self._rows is None:
            self._rows = dict(zip(self.ids, range(len(self.ids)), strict=True))

    def read(self, a: int, b: int):
        """Rows [a, b) as float32, read from the file (pread), not through the mapping."""
        width = self.dim * 4
        buf = os.pread(self._fd, (b - a) * width, self.data_at + a * width)
        if len(buf) != (b - a) * width:
            raise OSError(f"{self.path}: shorter than its header says")
        return self._np.frombuffer(buf, dtype=self._np.float32).reshape(b - a, self.dim)

    def touch(self, a: int, b: int) -> None:
        """Fault in the mapping's pages of rows [a, b) (one read per page)."""
        if b > a:
            self._arr[a:b].reshape(-1)[:: mmap.PAGESIZE // 4].sum()

    def trim(self, a: int, b: int) -> None:
        """Drop the mapping's resident pages of rows [a, b) (they are re-read from the page cache if touched
        again): a partition served by its compact scan keeps no float32 pages in the owner's RSS."""
        mm = getattr(self.mat, "_mmap", None)
        if mm is None:
            return
        base = self.data_at % mmap.ALLOCATIONGRANULARITY  # where np.memmap's array starts in its mapping
        lo = base + a * self.dim * 4
        hi = base + b * self.dim * 4
        lo = -(-lo // mmap.PAGESIZE) * mmap.PAGESIZE
        hi = hi // mmap.PAGESIZE * mmap.PAGESIZE
        if hi > lo:
            try:
                mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
            except (OSError, ValueError, AttributeError):
                pass

    def search(self, parts: Sequence[str], qvec, k: int, store: Store,
               unchanged: bool = False) -> tuple[dict[str, float], list] | None:
        np = self._np
        q = np.asarray(qvec, dtype=np.float32)
        if self.count and q.shape[0] != self.dim:
            return None
        tail, changed = self._changed(store)
        out: dict[str, float] = {}
        for part in parts:
            a, b = self.parts.get(part, (0, 0))
            if b <= a:
                continue
            want = min(b - a, k + len(changed))
            scan = self.compact.get(part)
            if unchanged and scan is not None and changed and want < b - a:
                best = self._best_unchanged(part, scan, q, k, changed)
                if best is not None:
                    out.update(best)
                    continue
            if scan is not None and want < b - a:
                # the compact scan's candidates (a superset of the float32 top `want`), re-scored in float32
                rows = scan.candidates(q, want)
                # `cosines` like the float32 scan below: the same values to the last bit, whichever path answers
                sims = cosines(self._rows_of(part, rows + a), q)
                top = np.argpartition(-sims, want - 1)[:want] if want < len(rows) else np.arange(len(rows))
                pairs = ((int(rows[i]), sims[i]) for i in top.tolist())
            else:
                # numpy's own loop, not BLAS: a threaded gemv is ~20x slower when the cores are busy
                # (`cosines`, docs/benchmarks.md)
                sims = cosines(self._arr[a:b], q)
                top = np.argpartition(-sims, want - 1)[:want] if want < b - a else np.arange(b - a)
                pairs = ((i, sims[i]) for i in top.tolist())
            for i, sim in pairs:
                item_id = self.ids[a + i]
                if item_id not in changed:
                    out[item_id] = float(sim)
        return out, tail


    def _best_unchanged(self, part: str, scan, q, k: int, changed: set[str]) -> dict[str, float] | None:
        """The `k` best rows of a partition that did not change after the file, exactly (`search(unchanged=True)`):
        the changed rows are left out of the compact scan's scores before its candidates are taken, so `k`
        candidates' worth are re-scored in float32, not `k` + every change (at 100k up to 2,000 changes past the
        file, each re-read with pread at every write: its cost grew with the store). What the caller reads of the
        answer is what it reads of `search`'s: per partition the unchanged rows among the file's `k + changes` best,
        of them the `k` best besides document blocks; the `k` best unchanged rows are those unless a document block
        is among them (then that window is taken as `search` takes it: None). None too before the indexer has
        mapped ids to rows."""
        np = self._np
        rows_of = self._rows
        if rows_of is None:
            return None
        a, b = self.parts[part]
        gone = self._changed_rows(changed, rows_of)
        masked = gone[(gone >= a) & (gone < b)] - a
        if b - a - len(masked) <= k:
            return None
        rows = scan.candidates(q, k, masked)
        # `cosines` like the float32 scan: the same values to the last bit, whichever path answers
        sims = cosines(self._rows_of(part, rows + a), q)
        top = np.argpartition(-sims, k - 1)[:k] if k < len(rows) else np.arange(len(rows))
        out: dict[str, float] = {}
        for i in top.tolist():
            item_id = self.ids[a + int(rows[i])]
            if item_id.startswith("blk-"):
                return None
            out[item_id] = float(sims[i])
        return out

    def scores_for(self, parts: Sequence[str], qvec, ids: Sequence[str], store: Store) -> tuple[dict[str, float],
                                                                                           list[str]]:
        np = self._np
        q = np.asarray(qvec, dtype=np.float32)
        if not self.count or q.shape[0] != self.dim:
            return {}, list(ids)
        rows = self._rows
        if rows is None:  # not on a caller's path: a 100k-entry dict is ~0.1 s of CPU (the indexer makes it)
            return {}, list(ids)
        spans = [self.parts[p] for p in parts if p in self.parts]
        _tail, changed = self._changed(store)
        found: list[tuple[str, int]] = []
        rest: list[str] = []
        for item_id in ids:
            row = rows.get(item_id)
            if row is not None and item_id not in changed and any(a <= row < b for a, b in spans):
                found.append((item_id, row))
            else:
                rest.append(item_id)
        if not found:
            return {}, rest
        found.sort(key=lambda f: f[1])
        trimmed = [self.parts[p] for p in parts if p in self.trimmed and p in self.parts]
        if any(a <= row < b for a, b in trimmed for _, row in found):
            # not the shared mapping: its touched pages would stay in the RSS
            mat = self.sparse_rows(np.asarray([row for _, row in found]))
        else:  # partitions whose pages stay mapped (a full scan touches them anyway): a gather, no read calls
            mat = self._arr[np.asarray([row for _, row in found])]
        sims = cosines(mat, q)
        return {item_id: float(v) for (item_id, _), v in zip(found, sims.tolist(), strict=True)}, rest

    def _rows_of(self, part: str, rows):
        """The float32 rows `rows` (sorted) of partition `part`: through `sparse_rows` where its pages are kept out
        of the RSS, else gathered from the mapping."""
        if part in self.trimmed:
            return self.sparse_rows(rows)
        return self._arr[rows]

    def sparse_rows(self, rows):
        """The float32 rows `rows`, read without keeping their pages in the RSS (`compact.SparseRows`, made on first
        use over the file this matrix maps)."""
        sparse = self._sparse
        if sparse is None:
            sparse = self._sparse = compact.SparseRows(self._fd, self.data_at, self.count, self.dim)
        return sparse.read(rows)


def _open(path: Path, store: Store, model_id: str) -> tuple[_Matrix | None, str | None]:
    """The matrix at `path` if it passes every check, else (None, why)."""
    import numpy as np

    try:
        with open(path, "rb") as f:
            if f.read(len(MAGIC)) != MAGIC:
                return None, "not a vector file"
            head_len = int.from_bytes(f.read(8), "little")
            if not 0 < head_len < 1 << 30:
                return None, "damaged header"
            header = json.loads(f.read(head_len))
            id_bytes = f.read(int(header["ids_len"]))
        size = path.stat().st_size
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"unreadable: {exc}"
    problem = _check_header(header, size, len(id_bytes), store, model_id)
    if problem:
        return None, problem
    ids = id_bytes.decode().split("\n") if header["count"] else []
    if len(ids) != header["count"]:
        return None, "id list does not match the row count"
    try:
        m = _Matrix(path, header, ids, np)
    except (OSError, ValueError) as exc:  # changed under us
        return None, f"cannot map: {exc}"
    return (m, None) if _samples_match(m, store) else (None, "sampled rows differ from the store")


def _check_header(header: dict, size: int, id_len: int, store: Store, model_id: str) -> str | None:
    try:
        if header.get("format") != FORMAT:
            return "another format"
        if header.get("model_id") != model_id:
            return "made by another model"
        want = int(header["data_at"]) + int(header["count"]) * int(header["dim"]) * 4
        if id_len != int(header["ids_len"]) or size != want:
            return f"size {size} bytes, the header says {want} (torn or truncated)"
        seq, _ = int(header["seq"]), int(header["crc"])
        _ = {str(p): (int(a), int(b)) for p, (a, b) in header["parts"].items()}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return f"damaged header: {exc}"
    if seq > store.max_seq():
        return f"reflects change {seq}, the store ends at {store.max_seq()} (a restored store)"
    ident = store.change_at(seq) if seq else None
    if seq and (ident is None or list(ident) != header.get("change")):
        return f"change {seq} differs in the store (a restored or rebuilt store)"
    return None


def _samples_match(m: _Matrix, store: Store) -> bool:
    if not m.count:
        return True
    step = max(1, m.count // SAMPLES)
    rows = sorted({*range(0, m.count, step), m.count - 1})
    changed = {c["item_id"] for c in store.changes_after(m.seq)}
    wanted = [m.ids[i] for i in rows if m.ids[i] not in changed]
    stored = store.vectors(wanted)
    for i in rows:
        item_id = m.ids[i]
        if item_id in changed:
            continue
        if stored.get(item_id) != m.mat[i].tobytes():
            return False
    return True


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def stored_ids(path: Path) -> set[str] | None:
    """The item ids a vector file names, read without checking it against a store (repair takes them as a witness
    of what a damaged store held); None when there is no readable file."""
    try:
        with open(path, "rb") as f:
            if f.read(len(MAGIC)) != MAGIC:
                return None
            head_len = int.from_bytes(f.read(8), "little")
            if not 0 < head_len < 1 << 30:
                return None
            header = json.loads(f.read(head_len))
            id_bytes = f.read(int(header["ids_len"]))
        return {i for i in id_bytes.decode("utf-8", "replace").split("\n") if i} if header.get("count") else set()
    except (OSError, ValueError, KeyError, TypeError):
        return None
