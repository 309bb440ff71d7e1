"""The keyword (BM25) side of recall, in memory: one inverted index per partition, numpy-scored.

SQLite FTS5 is the durable full-text index (it is written in the same transaction as the memory); its `bm25()`
ranks every match of an OR query, which costs ~50 ms at 100k notes for common words. This index keeps postings as
compact arrays and scores a query with a few vectorized adds (~1 ms at 100k). It is derived like the dense index:
built per partition from SQLite on first use (in the owner's background thread at start), then kept current by
replaying the change log before each query. Until a partition is built, recall uses FTS5.

The owner persists the postings (`<home>/cache/keywords.bin`, written with the vector file: a new file, fsync'd,
renamed over the old one) and loads them at start, so a large store's first query ranks exactly like a warm one
without a rebuild. The file records the change it reflects and that change's identity; a file the store does not
match (restored, rebuilt, torn) is ignored and rewritten, and the changes after it are replayed as usual.
"""

from __future__ import annotations

import json
import math
import os
import threading
from array import array
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from mnemo.core.store import Store
from mnemo.core.text import tokenize

K1, B = 1.2, 0.75
FILE_NAME = "keywords.bin"
MAGIC = b"MNEMOKW1"
SYNC_BUILD_LIMIT = 20000  # partitions up to this size are built on first use (~0.3 s)


class Postings:
    """term -> (slots, term frequencies): a dict whose entries loaded from a saved file are made on first use. A
    100k-note partition holds ~100k terms: making two arrays for each at load cost ~0.5 s of CPU on the first
    query's path (issue 22, third pass); a query reads a handful of them."""

    __slots__ = ("_made", "_saved", "_starts", "_lens", "_docs", "_tfs")

    def __init__(self) -> None:
        self._made: dict[str, tuple[array, array]] = {}
        self._saved: dict[str, int] = {}  # term -> its number in _starts / _lens (postings in _docs / _tfs)
        self._starts = array("q")
        self._lens = array("i")
        self._docs = memoryview(b"")
        self._tfs = memoryview(b"")

    @classmethod
    def saved(cls, terms: list[str], lens: array, docs: bytes, tfs: bytes) -> Postings:
        from itertools import accumulate

        p = cls()
        p._saved = dict(zip(terms, range(len(terms)), strict=True))  # C loops only: no Python loop per term
        p._starts = array("q", accumulate(lens, initial=0))
        p._lens = lens
        p._docs, p._tfs = memoryview(docs), memoryview(tfs)
        return p

    def get(self, term: str) -> tuple[array, array] | None:
        plist = self._made.get(term)
        if plist is None:
            i = self._saved.pop(term, None)
            if i is None:
                return None
            at, ln = self._starts[i], self._lens[i]
            d, f = array("i"), array("f")
            d.frombytes(self._docs[at * 4:(at + ln) * 4])  # array(code, memoryview) would read single bytes
            f.frombytes(self._tfs[at * 4:(at + ln) * 4])
            plist = self._made.setdefault(term, (d, f))
        return plist

    def __getitem__(self, term: str) -> tuple[array, array]:
        plist = self.get(term)
        if plist is None:
            raise KeyError(term)
        return plist

    def __setitem__(self, term: str, plist: tuple[array, array]) -> None:
        self._saved.pop(term, None)
        self._made[term] = plist

    def __contains__(self, term: object) -> bool:
        return term in self._made or term in self._saved

    def __len__(self) -> int:
        return len(self._made) + len(self._saved)

    def __iter__(self):
        return iter([*self._made, *self._saved])

    def dump(self) -> tuple[list[str], array, bytes, bytes]:
        """(terms, their postings' lengths, slots, term frequencies) of every term, as `saved` takes them back: the
        postings made in memory first, then the ones still as loaded, copied from the loaded buffers in one
        vectorized pass. Making two arrays for each loaded term to write it (what reading them one by one did)
        cost 0.56 s of CPU at 100k notes at the first save (~0.2 s at each after it) and kept them all in the RSS
        (+57 MB); now 0.03-0.04 s (issue 22, thirteenth pass)."""
        import numpy as np

        made = list(self._made)
        lens = array("i", [len(self._made[t][0]) for t in made])
        docs = [self._made[t][0].tobytes() for t in made]
        tfs = [self._made[t][1].tobytes() for t in made]
        saved = list(self._saved)  # in their order in the loaded buffers: a dict keeps its order, entries only leave
        if saved:
            nums = np.fromiter(self._saved.values(), dtype=np.int64, count=len(saved))
            all_lens = np.frombuffer(self._lens, dtype=np.int32)
            keep = np.zeros(len(all_lens), dtype=bool)
            keep[nums] = True
            rows = np.repeat(keep, all_lens)  # per posting entry: whether its term is still as loaded
            lens.frombytes(all_lens[nums].tobytes())
            docs.append(np.frombuffer(self._docs, dtype=np.int32)[rows].tobytes())
            tfs.append(np.frombuffer(self._tfs, dtype=np.float32)[rows].tobytes())
        return made + saved, lens, b"".join(docs), b"".join(tfs)


class PartitionIndex:
    """BM25 over the items of one partition. Removal marks a slot dead; dead postings are skipped, and the
    partition is rebuilt when more than a third of its slots are dead."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.slot: dict[str, int] = {}
        self.doc_len = array("f")
        self.alive = bytearray()
        self.postings = Postings()
        self.total_len = 0.0
        self.n_alive = 0
        self._norm_cache: tuple | None = None

    def add(self, item_id: str, tokens: list[str]) -> None:
        if item_id in self.slot:
            self.remove(item_id)
        s = len(self.ids)
        self.ids.append(item_id)
        self.slot[item_id] = s
        self.doc_len.append(float(len(tokens)))
        self.alive.append(1)
        self.total_len += len(tokens)
        self.n_alive += 1
        for term, tf in Counter(tokens).items():
            plist = self.postings.get(term)
            if plist is None:
                plist = self.postings[term] = (array("i"), array("f"))
            plist[0].append(s)
            plist[1].append(float(tf))

    def remove(self, item_id: str) -> None:
        s = self.slot.pop(item_id, None)
        if s is None:
            return
        self.alive[s] = 0
        self.n_alive -= 1
        self.total_len -= self.doc_len[s]

    def dump(self) -> tuple[dict, list[bytes]]:
        """The partition as a header and byte sections (see `KeywordIndex.save`)."""
        terms, lens, docs, tfs = self.postings.dump()
        sections = ["\n".join(self.ids).encode(), self.doc_len.tobytes(), bytes(self.alive),
                    "\n".join(terms).encode(), lens.tobytes(), docs, tfs]
        head = {"n_ids": len(self.ids), "n_terms": len(terms), "total_len": self.total_len, "n_alive": self.n_alive,
                "sizes": [len(x) for x in sections]}
        return head, sections

    @classmethod
    def undump(cls, head: dict, sections: list[bytes]) -> PartitionIndex:
        """The partition `dump` wrote; ValueError when the sections do not fit together."""
        ids_b, doc_len, alive, terms_b, lens_b, docs_b, tfs_b = sections
        idx = cls()
        n, n_terms = int(head["n_ids"]), int(head["n_terms"])
        idx.ids = ids_b.decode().split("\n") if n else []
        idx.doc_len = array("f", doc_len)
        idx.alive = bytearray(alive)
        terms = terms_b.decode().split("\n") if n_terms else []
        lens = array("i", lens_b)
        if not (len(idx.ids) == len(idx.doc_len) == len(idx.alive) == n and len(terms) == len(lens) == n_terms
                and sum(lens) * 4 == len(docs_b) == len(tfs_b)):
            raise ValueError("keyword sections do not fit together")
        if len(docs_b):
            import numpy as np

            slots = np.frombuffer(docs_b, dtype=np.int32)
            if int(slots.min()) < 0 or int(slots.max()) >= n:
                raise ValueError("a posting points outside the partition")
        idx.postings = Postings.saved(terms, lens, docs_b, tfs_b)  # each term's arrays made on first use
        if idx.alive.count(1) == n:  # no dead slot: one C loop
            idx.slot = dict(zip(idx.ids, range(n), strict=True))
        else:
            idx.slot = {item_id: s for s, item_id in enumerate(idx.ids) if idx.alive[s]}
        idx.total_len, idx.n_alive = float(head["total_len"]), int(head["n_alive"])
        if idx.n_alive != len(idx.slot):
            raise ValueError("keyword alive count does not match")
        return idx

    def _norm(self, np):
        """BM25's length term of every slot, `K1 * (1 - B + B * doc_len / avgdl)`, computed by the same float32
        operations a query made per posting before (the scores are the same to the bit), once per state of the
        partition instead of once per query term."""
        key = (len(self.ids), self.total_len, self.n_alive)
        cached = self._norm_cache
        if cached is not None and cached[0] == key:
            return cached[1]
        dl = np.frombuffer(self.doc_len, dtype=np.float32)
        avgdl = self.total_len / self.n_alive if self.n_alive else 1.0
        norm = K1 * (1 - B + B * dl / avgdl)
        self._norm_cache = (key, norm)
        return norm

    def dead_fraction(self) -> float:
        return 1 - self.n_alive / len(self.ids) if self.ids else 0.0

    def search(self, tokens: Sequence[str], k: int) -> list[tuple[str, float]]:
        import numpy as np

        if not self.n_alive or not tokens:
            return []
        n = len(self.ids)
        alive = np.frombuffer(self.alive, dtype=np.uint8)
        all_alive = self.n_alive == n  # no dead slot: every posting counts as it is (no mask to make per term)
        norm = self._norm(np)
        scores = np.zeros(n, dtype=np.float32)
        hit = np.zeros(n, dtype=bool)
        for term in set(tokens):
            plist = self.postings.get(term)
            if plist is None:
                continue
            docs = np.frombuffer(plist[0], dtype=np.int32)
            tfs = np.frombuffer(plist[1], dtype=np.float32)
            if all_alive:
                df, d, tf = len(docs), docs, tfs
            else:
                live = alive[docs] == 1
                df = int(live.sum())
                d, tf = docs[live], tfs[live]
            if not df:
                continue
            idf = math.log(1 + (self.n_alive - df + 0.5) / (df + 0.5))
            scores[d] += idf * tf * (K1 + 1) / (tf + norm[d])
            hit[d] = True
        cand = np.flatnonzero(hit)
        if not len(cand):
            return []
        if len(cand) > k:
            top = cand[np.argpartition(-scores[cand], k - 1)[:k]]
        else:
            top = cand
        ids = self.ids
        found = [(ids[i], s) for i, s in zip(top.tolist(), scores[top].tolist(), strict=True)]
        found.sort(key=lambda f: (-f[1], f[0]))
        return found


class KeywordIndex:
    """All partitions of a store; thread-safe; replays the store's change log to stay current."""

    def __init__(self, store: Store, directory: Path | None = None):
        self.store = store
        self._parts: dict[str, PartitionIndex] = {}
        self._where: dict[str, str] = {}  # item id -> partition
        self._seq = 0
        self._lock = threading.RLock()
        self.dir = Path(directory) if directory is not None else None
        self._load_pending = self.dir is not None
        self.saved_seq: int | None = None  # the change the file in `dir` reflects (None: no usable file)
        self.last_problem: str | None = None

    def _ensure_loaded(self) -> None:
        """Load the saved postings once, before anything is built (under the lock)."""
        if self._load_pending:
            self._load_pending = False
            self.last_problem = self.load()

    def ready(self, part: str) -> bool:
        return part in self._parts

    def build(self, part: str) -> None:
        """(Re)build one partition from SQLite."""
        with self._lock:
            self._ensure_loaded()
            self._seq_catch_up_all_built()
            seq = self.store.max_seq()
            idx = PartitionIndex()
            for item_id, text in self.store.keyword_texts(part):
                idx.add(item_id, tokenize(text))
            old = self._parts.get(part)
            if old is not None:
                for item_id in old.slot:
                    self._where.pop(item_id, None)
            for item_id in idx.slot:
                self._where[item_id] = part
            self._parts[part] = idx
            if len(self._parts) == 1:
                self._seq = seq

    def build_all(self) -> None:
        with self._lock:
            self._ensure_loaded()
        for part in self.store.parts():
            if part not in self._parts:
                self.build(part)

    def _seq_catch_up_all_built(self) -> None:
        if self._parts:
            self.catch_up()

    def catch_up(self) -> None:
        """Apply change-log entries after the last one seen to the partitions that are built."""
        with self._lock:
            if not self._parts:
                self._seq = self.store.max_seq()
                return
            changes = self.store.changes_after(self._seq)
            if not changes:
                return
            latest: dict[str, str] = {}
            for c in changes:
                latest[c["item_id"]] = c["op"]
            for item_id, op in latest.items():
                old_part = self._where.pop(item_id, None)
                if old_part is not None:
                    self._parts[old_part].remove(item_id)
                if op != "upsert":
                    continue
                found = self.store.keyword_text(item_id)
                if found is None or found[0] not in self._parts:
                    continue
                part, text = found
                self._parts[part].add(item_id, tokenize(text))
                self._where[item_id] = part
            self._seq = int(changes[-1]["seq"])
            for part, idx in list(self._parts.items()):
                if idx.dead_fraction() > 0.33 and len(idx.ids) > 1000:
                    self.build(part)

    # -- persistence -----------------------------------------------------------------------------------------
    def save(self) -> None:
        """Write every built partition, caught up to the store's current change (new file, fsync, rename)."""
        if self.dir is None:
            return
        with self._lock:
            self._ensure_loaded()
            self.catch_up()
            seq = self._seq
            ident = self.store.change_at(seq) if seq else None
            heads, blobs = {}, []
            for part, idx in self._parts.items():
                head, sections = idx.dump()
                heads[part] = head
                blobs.extend(sections)
        header = json.dumps({"seq": seq, "change": list(ident) if ident else None, "parts": heads}).encode()
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / FILE_NAME
        tmp = path.with_suffix(".tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(MAGIC + len(header).to_bytes(8, "little") + header)
                for b in blobs:
                    f.write(b)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)  # a failed write (disk full) leaves the old file and no temporary one
        self.saved_seq = seq

    def load(self) -> str | None:
        """Load the saved partitions when the store still holds the change they reflect; the changes after it are
        replayed at the next query. Returns why the file was not used (None: loaded, or no file)."""
        if self.dir is None:
            return None
        path = self.dir / FILE_NAME
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            return f"unreadable: {exc}"
        try:
            parts, seq = _parse(data, self.store)
        except (ValueError, KeyError, TypeError) as exc:
            return str(exc)
        with self._lock:
            self._parts = parts
            self._where = {i: p for p, idx in parts.items() for i in idx.slot}
            self._seq = seq
            self.saved_seq = seq
        return None

    def search(self, parts: Sequence[str], query: str, k: int) -> list[tuple[str, float]] | None:
        """Top-k BM25 hits over the partitions, or None when one of them is not built yet (use FTS5)."""
        with self._lock:
            self._ensure_loaded()
            for p in parts:
                if p not in self._parts:
                    if self.store.count_vectors(p) > SYNC_BUILD_LIMIT:
                        return None  # too big to build on a caller's path: the owner builds it in the background
                    self.build(p)
            self.catch_up()
            tokens = tokenize(query)
            hits: list[tuple[str, float]] = []
            for p in parts:
                if p in self._parts:
                    hits.extend(self._parts[p].search(tokens, k))
        hits.sort(key=lambda kv: (-kv[1], kv[0]))
        return hits[:k]


def _parse(data: bytes, store: Store) -> tuple[dict[str, PartitionIndex], int]:
    """The partitions of a saved keyword file, checked against the store; ValueError when it does not fit."""
    if data[:len(MAGIC)] != MAGIC:
        raise ValueError("not a keyword file")
    at = len(MAGIC) + 8
    head_len = int.from_bytes(data[len(MAGIC):at], "little")
    header = json.loads(data[at:at + head_len])
    at += head_len
    seq = int(header["seq"])
    if seq > store.max_seq():
        raise ValueError(f"reflects change {seq}, the store ends at {store.max_seq()} (a restored store)")
    ident = store.change_at(seq) if seq else None
    if seq and (ident is None or list(ident) != header.get("change")):
        raise ValueError(f"change {seq} differs in the store (a restored or rebuilt store)")
    parts: dict[str, PartitionIndex] = {}
    view = memoryview(data)
    for part, head in header["parts"].items():
        sections = []
        for size in head["sizes"]:
            if at + int(size) > len(data):
                raise ValueError("the file is shorter than its header says (torn or truncated)")
            sections.append(bytes(view[at:at + int(size)]))
            at += int(size)
        parts[part] = PartitionIndex.undump(head, sections)
    if at != len(data):
        raise ValueError("the file is longer than its header says")
    return parts, seq
