"""How a new memory relates to the visible memories near it, on every level of the chain branch > project > team >
global: the same claim (a paraphrase or a refinement), a contradiction of a memory at its own level (a conflict)
or of a more general one (an override), or another fact. The decision per pair is core/relation/compare.py's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mnemo.core import store_settings as config
from mnemo.core.api_types.records import Conflict
from mnemo.core.indexes.dense import cosines
from mnemo.core.models import Context, Memory
from mnemo.core.relation import compare as relation
from mnemo.core.search import EXACT_ROWS, nearest_from_scores, nearest_memories, scope_parts
from mnemo.core.team.ops import team_neighbours

if TYPE_CHECKING:
    from mnemo.core.engine import Engine


@dataclass
class Found:
    memory: Memory
    similarity: float
    relation: str  # "conflict" | "override" | "duplicate" (the same claim: a paraphrase or a refinement)
    level: str  # "scope" | "branch" | "same"
    refines: bool = False  # a duplicate whose new text adds detail
    reasons: list[str] = field(default_factory=list)  # what core/relation/compare.py saw (e.g. "number 30 -> 60")

    def to_dict(self, resolution: str | None = None) -> Conflict:
        m = self.memory
        return {"id": m.id, "text": m.text, "scope": m.scope, "branch": m.branch, "type": m.type,
                "similarity": round(self.similarity, 4), "relation": self.relation, "level": self.level,
                "reasons": self.reasons, "resolution": resolution}


def specificity(m: Memory, ctx: Context) -> int:
    """branch over project over team over global: global 0, team 1, project 2, feature-branch 3."""
    if m.scope == "global":
        return 0
    if m.scope == "team":
        return 1
    if m.branch is None or m.branch == ctx.default_branch:
        return 2
    return 3


def neighbours(engine: Engine, ctx: Context, vec, k: int = 10, near=None,
               min_sim: float | None = None) -> list[tuple[Memory, float]]:
    """Visible memories nearest to `vec` on every level: this project (and branch), global, and the team server
    (when one is configured and answers); the most similar first, the most specific first on ties. `near`: the
    store's part when the caller searched it already (a `remember_batch` chunk, `ChunkSearch.nearest`).
    `min_sim`: the store's memories under this cosine may be left out (not loaded: the caller drops them)."""
    mine = near(vec, k, min_sim) if near is not None else nearest_memories(engine, ctx, vec, k, min_sim)
    out = mine + team_neighbours(engine, ctx, vec, k)
    out.sort(key=lambda ms: (-round(ms[1], 4), -specificity(ms[0], ctx), ms[0].id))
    return out


def stored_parses(engine: Engine, mems: list[Memory]) -> list[tuple[str, str]]:
    """Make the stored parses of `mems` (core/store/parses.py) the ones the comparisons read; returns (id, text)
    of those without a usable one (none stored, another parser's, or of another text), which are parsed as before
    and may be stored by the caller's write."""
    todo = [m for m in mems if not relation.known(m.text)]
    if not todo:
        return []
    parser = relation.parser_version()
    blobs = engine.store.note_parses([m.id for m in todo], parser) if parser else {}
    return [(m.id, m.text) for m in todo if (b := blobs.get(m.id)) is None or not relation.prime(m.text, b)]


def relate(engine: Engine, ctx: Context, mem: Memory, vec, threshold: float | None = None,
           near=None, unparsed: list[tuple[str, str]] | None = None) -> list[Found]:
    """How the new memory relates to the visible memories near it (cosine >= threshold) on every level
    (core/relation/compare.py): a contradiction is a `conflict`, or an `override` of a more general memory; the same claim
    (a paraphrase, a refinement) is a `duplicate` of a memory at its own level or a more general one. Other
    nearby memories are other facts and are not returned. `unparsed`: gets (id, text) of the compared memories
    that had no usable stored parse (`stored_parses`)."""
    # the one setting read (`policy.settings()` reads all seven, ~50 us, on every write)
    thr = config.value("conflict_threshold") if threshold is None else threshold
    cands = [(m, sim) for m, sim in neighbours(engine, ctx, vec, k=10, near=near, min_sim=thr)
             if sim >= thr and m.id != mem.id and not (m.scope == "project" and m.project_id != mem.project_id)]
    if not cands:
        return []
    missing = stored_parses(engine, [m for m, _ in cands])
    if unparsed is not None:
        unparsed += missing
    decisions = relation.decide_many([(m.text, mem.text, sim) for m, sim in cands], engine.embed_cached,
                                     relation.vocabulary_of(engine.embedder), scores=False)
    found: list[Found] = []
    mine = specificity(mem, ctx)
    for (m, sim), d in zip(cands, decisions, strict=True):
        theirs = specificity(m, ctx)
        level = "same" if theirs == mine else "scope" if theirs < 2 else "branch"
        if d.relation == "conflict":
            found.append(Found(m, sim, "override" if theirs < mine else "conflict", level, reasons=d.reasons))
        elif d.relation == "duplicate" and theirs <= mine:
            found.append(Found(m, sim, "duplicate", level, refines=d.refines, reasons=d.reasons))
    return found


def _chunk_tops(m, parts: list[str], q, room: int) -> dict[str, tuple]:
    """Per partition of the vector file's matrix `m`: each note's best `room` rows (offsets and cosines, best
    first) from one product of the chunk's vectors `q` (notes x dim) with the partition. numpy alone (it releases
    the interpreter): `ChunkSearch.ahead` runs it on the thread that embeds the next chunk."""
    import numpy as np

    out: dict[str, tuple] = {}
    neg_q = -np.asarray(q, dtype=np.float32)
    for part in parts:
        a, b = m.parts.get(part, (0, 0))
        if b <= a:
            continue
        # each note's cosines, negated, as one contiguous row: the product made in that layout (a partition along
        # the rows of a (rows, notes) array reads it column-wise, ~2.5x slower; a transposed copy of it cost as
        # much as the product at 100k rows), negated through the query (exact: the same magnitudes) so the best
        # come first without a negated copy (issue 22, seventh pass: at 100k rows, beside the embedding, 206 -> 131 ms a
        # chunk with `_best_columns`)
        neg = neg_q @ m.mat[a:b].T  # (notes, rows)
        if part in m.trimmed:  # a partition kept out of the owner's RSS (its compact scan serves recall): the
            m.trim(a, b)  # pages the product read are dropped again (they stay in the page cache)
        width = min(b - a, room)
        idx = _best_columns(neg, width, np) if width < b - a else \
            np.broadcast_to(np.arange(b - a)[None, :], neg.shape)
        vals = np.take_along_axis(neg, idx, axis=1)
        order = np.argsort(vals, axis=1, kind="stable")
        out[part] = (a, b - a, np.take_along_axis(idx, order, axis=1), -np.take_along_axis(vals, order, axis=1))
    return out


def _best_columns(neg, width: int, np):
    """Per row of `neg` the columns of its `width` smallest values, in column order: each row's `width`-th smallest
    value (`np.partition`, values only), then the columns at or under it (of a tie at that value, the first
    columns). What `np.argpartition(neg, width - 1, axis=1)[:, :width]` selects (but for which of a tie at the
    edge), at half its cost: 64 notes x 100k rows, ~13 against ~25 ms."""
    edge = np.partition(neg, width - 1, axis=1)[:, width - 1]
    idx = np.empty((neg.shape[0], width), dtype=np.intp)
    for i in range(neg.shape[0]):
        cols = np.flatnonzero(neg[i] <= edge[i])
        if len(cols) > width:  # a tie at the edge
            cols = cols[np.argsort(neg[i, cols], kind="stable")[:width]]
            cols.sort()
        elif len(cols) < width:  # NaN cosines (no vector is expected to give them): as argpartition orders them
            cols = np.sort(np.argpartition(neg[i], width - 1)[:width])
        idx[i] = cols
    return idx


@dataclass
class Tops:
    """A chunk's top lists computed ahead (`ChunkSearch.ahead`): from this matrix, with this much room."""
    matrix: object
    room: int
    parts: dict[str, tuple]


class _Tail:
    """The items changed after the vector file, as a chunk's search follows them: every item changed (any operation),
    those written, and the current vectors of those (this model's, in the chunk's partitions) as one matrix in the
    order they were first seen, kept up to date row by row (a rebuild only when a vector is gone). A batch's next
    chunk takes it over from the one before when both read the same file: the change log is then read only
    past what that chunk read, not again from the file's end (2,000 rows and vectors per chunk at 100k)."""

    def __init__(self, seq: int, dim: int):
        self.last = seq
        self.dim = dim
        self.changed: set[str] = set()
        self.upserts: set[str] = set()
        self.vecs: dict[str, object] = {}
        self.pos: dict[str, int] = {}  # item -> its row in `buf` (the order of `vecs`)
        self.ids: list[str] = []  # the item of each row of `buf`
        self.blocks = 0  # how many of them are document blocks
        self.buf: Any = None  # float32 rows, room to grow
        self.n = 0

    def catch_up(self, store, parts: list[str], model_id: str, np) -> None:
        rows = store.changes_after(self.last)
        if not rows:
            return
        self.last = int(rows[-1]["seq"])
        touched = {r["item_id"] for r in rows}
        self.changed |= touched
        self.upserts |= {r["item_id"] for r in rows if r["op"] == "upsert"}
        reload = [i for i in touched if i in self.upserts]
        blobs = store.vectors(reload, parts, model_id) if reload else {}
        gone = False
        for item_id in reload:
            blob = blobs.get(item_id)
            vec = np.frombuffer(blob, dtype=np.float32) if blob is not None else None
            if vec is None or vec.shape[0] != self.dim:
                gone |= self.vecs.pop(item_id, None) is not None
                continue
            self.vecs[item_id] = vec
            if gone:
                continue  # rebuilt below
            row = self.pos.get(item_id)
            if row is None:
                row = self.pos[item_id] = self.n
                self.ids.append(item_id)
                self.blocks += item_id.startswith("blk-")
                if self.buf is None or row == len(self.buf):
                    grown = np.empty((max(64, 2 * row), self.dim), dtype=np.float32)
                    if self.buf is not None:
                        grown[:row] = self.buf[:row]
                    self.buf = grown
                self.n += 1
            self.buf[row] = vec
        if gone:
            self.pos = {item_id: row for row, item_id in enumerate(self.vecs)}
            self.ids = list(self.vecs)
            self.blocks = sum(i.startswith("blk-") for i in self.ids)
            self.n = len(self.vecs)
            self.buf = np.stack(list(self.vecs.values())) if self.vecs else None

    def scores(self, vec, np) -> dict[str, float]:
        """Exact cosines of the written items' current vectors (`dense.cosines`: each the value every path finds)."""
        if not self.n:
            return {}
        sims = cosines(self.buf[:self.n], np.asarray(vec, dtype=np.float32))
        return dict(zip(self.vecs, sims.tolist(), strict=True))

    def best(self, vec, np, limit: int) -> dict[str, float]:
        """`scores`, without the items that cannot be among the `limit` best besides the document blocks of any
        set of scores these are added to (`nearest_from_scores` reads no further): those under the `limit`-th
        best memory's cosine here, with `limit` memories of this tail before them whatever else is sorted in.
        The rest, in their order with the same cosines: the same ids are read, in the same order (a tie kept
        whole). At 100k up to 2,000 changes follow the file: a dict of them all made and sorted for every note
        of an import cost more than the note's own checks (issue 22, sixth pass)."""
        if not self.n:
            return {}
        sims = cosines(self.buf[:self.n], np.asarray(vec, dtype=np.float32))
        if self.n - self.blocks <= limit or np.isnan(sims).any():
            return dict(zip(self.vecs, sims.tolist(), strict=True))
        mine = sims if not self.blocks else \
            sims[np.fromiter((not i.startswith("blk-") for i in self.ids), dtype=bool, count=self.n)]
        edge = np.partition(mine, len(mine) - limit)[len(mine) - limit]  # the limit-th best memory's cosine
        keep = np.flatnonzero(sims >= edge)
        ids = self.ids
        return dict(zip([ids[r] for r in keep.tolist()], sims[keep].tolist(), strict=True))


class ChunkSearch:
    """The store's part of the neighbour check for the notes of one `remember_batch` chunk, searched together: one
    matrix product of the chunk's vectors with the mapped vector file (instead of a scan of it per note), and the
    items changed after the file (scored exactly from their stored vectors) read from SQLite once, then only as
    they change. A chunk lands in one transaction, so the store changes meanwhile only by the chunk's own writes,
    which each note still sees (the change log is read again before each note). Each note gets what
    `nearest_memories` finds for it alone: per partition the same top of the file (its best `max(20, 4k)` plus
    one per changed item, the changed ones dropped), the same exact cosines of the changed items; when the ANN
    index answers instead (partitions past `EXACT_ROWS`) or the file is unusable, each note is searched alone.
    The product and the top lists may be computed ahead, while the previous chunk lands (`ahead`): they are used
    when made from the matrix in use with room enough for the changes since, else made again here."""

    def __init__(self, engine: Engine, ctx: Context, vecs, k: int = 10, tops: Tops | None = None,
                 after: ChunkSearch | None = None):
        import numpy as np

        self.engine, self.ctx, self.k = engine, ctx, k
        self.parts = scope_parts(ctx, "hybrid")
        self.want = max(20, k * 4)
        self._top: dict[str, tuple] | None = None
        q = np.asarray(vecs, dtype=np.float32)
        m = self._matrix(engine, self.parts)
        if len(q) < 2 or m is None or (m.count and m.dim != q.shape[1]):
            return
        self._m, self._np, self._dim = m, np, q.shape[1]
        # the changes after the file: taken over from the batch's chunk before when it read the same file and
        # committed (`after`), else read from the file's end
        self._tail: _Tail = _Tail(m.seq, self._dim)
        if after is not None and after._top is not None and after._m is m and after.parts == self.parts \
                and after._tail.dim == self._dim:
            self._tail = after._tail  # the chunk before is done with it
        self._catch_up()
        # room for the chunk's own changes: each note changes a few items at most (itself, what it supersedes)
        room = self.want + len(self._tail.changed) + 4 * len(q)
        if tops is not None and tops.matrix is m and tops.room >= room:
            self._top = tops.parts
        else:
            self._top = _chunk_tops(m, self.parts, q, room)

    @staticmethod
    def _matrix(engine: Engine, parts: list[str]):
        """The vector file's matrix the chunk's search reads, or None when the ANN index answers instead (or no
        usable file exists): each note is then searched alone."""
        index, vf = engine.index, engine.vector_file()
        if index is not None and index.ready and not index.dormant and not vf.small(parts, EXACT_ROWS):
            return None
        return vf.matrix()

    @classmethod
    def ahead(cls, engine: Engine, ctx: Context, before: int, k: int = 10):
        """On the caller's thread, before the previous chunk lands (`before`: its notes): what the next chunk's
        top lists need from the store; returns a function of the next chunk's vectors that computes them (numpy
        alone, for another thread), or None when the chunk's search will not read the file."""
        import numpy as np

        parts = scope_parts(ctx, "hybrid")
        m = cls._matrix(engine, parts)
        if m is None:
            return None
        # the changes after the file now, those the previous chunk will make (a few per note), and the chunk's own
        since = max(0, engine.store.max_seq() - m.seq) + 4 * before

        def tops(vecs) -> Tops | None:
            q = np.asarray(vecs, dtype=np.float32)
            if len(q) < 2 or (m.count and m.dim != q.shape[1]):
                return None
            room = max(20, k * 4) + since + 4 * len(q)
            return Tops(m, room, _chunk_tops(m, parts, q, room))
        return tops

    def _catch_up(self) -> None:
        """Read the change log past what was read (the chunk's own writes) and the vectors of what it wrote."""
        self._tail.catch_up(self.engine.store, self.parts, self.engine.model_id, self._np)

    def scores(self, i: int, vec) -> dict[str, float] | None:
        """Note `i`'s exact cosines as `dense_search` finds them, as far as `nearest_from_scores` reads them (the
        `4k` best besides the document blocks: per partition, the first `4k` such of the file's best `max(20, 4k)`
        plus one per changed item, the changed ones dropped; then every changed item, scored exactly); None when
        the chunk's search cannot answer."""
        if self._top is None:
            return None
        self._catch_up()
        changed, ids = self._tail.changed, self._m.ids
        limit = 4 * self.k
        out: dict[str, float] = {}
        for a, rows, idx, vals in self._top.values():
            want = min(rows, self.want + len(changed))
            if want > idx.shape[1]:
                return None  # more changes than the room kept: search this note alone
            kept = 0
            # in the file's order (best first): entries past the `4k`-th kept one are never read
            for r, v in zip(idx[i, :want].tolist(), vals[i, :want].tolist(), strict=True):
                item_id = ids[a + r]
                if item_id in changed:
                    continue
                out[item_id] = float(v)
                if not item_id.startswith("blk-"):
                    kept += 1
                    if kept == limit:
                        break
        out.update(self._tail.best(vec, self._np, limit))
        return out

    def nearest(self, i: int):
        """The `near` of `neighbours` for note `i` of the chunk."""
        def near(vec, k: int, min_sim: float | None = None) -> list[tuple[Memory, float]]:
            found = self.scores(i, vec) if k == self.k else None
            if found is None:
                return nearest_memories(self.engine, self.ctx, vec, k, min_sim)
            return nearest_from_scores(self.engine, self.ctx, found, k, min_sim)
        return near
