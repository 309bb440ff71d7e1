"""How a new memory relates to the visible memories near it, on every level of the chain branch > project > team >
global: the same claim (a paraphrase or a refinement), a contradiction of a memory at its own level (a conflict)
or of a more general one (an override), or another fact. The decision per pair is core/relation/compare.py's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mnemo.core import store_settings as config
from mnemo.core.api_types.records import Conflict
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
    mine = near(vec, k) if near is not None else nearest_memories(engine, ctx, vec, k, min_sim)
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


class ChunkSearch:
    """The store's part of the neighbour check for the notes of one `remember_batch` chunk, searched together: one
    matrix product of the chunk's vectors with the mapped vector file (instead of a scan of it per note), and the
    items changed after the file (scored exactly from their stored vectors) read from SQLite once, then only as
    they change. A chunk lands in one transaction, so the store changes meanwhile only by the chunk's own writes,
    which each note still sees (the change log is read again before each note). Each note gets what
    `nearest_memories` finds for it alone: per partition the same top of the file (its best `max(20, 4k)` plus
    one per changed item, the changed ones dropped), the same exact cosines of the changed items; when the ANN
    index answers instead (partitions past `EXACT_ROWS`) or the file is unusable, each note is searched alone."""

    def __init__(self, engine: Engine, ctx: Context, vecs, k: int = 10):
        import numpy as np

        self.engine, self.ctx, self.k = engine, ctx, k
        self.parts = scope_parts(ctx, "hybrid")
        self.want = max(20, k * 4)
        self._top: dict[str, tuple] | None = None
        q = np.asarray(vecs, dtype=np.float32)
        index, vf = engine.index, engine.vector_file()
        if len(q) < 2 or (index is not None and index.ready and not index.dormant
                          and not vf.small(self.parts, EXACT_ROWS)):
            return
        m = vf.matrix()
        if m is None or (m.count and m.dim != q.shape[1]):
            return
        self._m, self._np, self._dim = m, np, q.shape[1]
        self._last = m.seq
        self._changed: set[str] = set()  # every item changed after the file (any operation)
        self._upserts: set[str] = set()  # ... written (scored exactly while their vector exists)
        self._tail: dict[str, object] = {}  # their current vectors (this model's, in these partitions)
        self._catch_up()
        # room for the chunk's own changes: each note changes a few items at most (itself, what it supersedes)
        room = self.want + len(self._changed) + 4 * len(q)
        self._top = {}
        for part in self.parts:
            a, b = m.parts.get(part, (0, 0))
            if b <= a:
                continue
            sims = m.mat[a:b] @ q.T  # (rows, notes): one product for the chunk
            width = min(b - a, room)
            idx = np.argpartition(-sims, width - 1, axis=0)[:width] if width < b - a else \
                np.broadcast_to(np.arange(b - a)[:, None], sims.shape)
            vals = np.take_along_axis(sims, idx, axis=0)
            order = np.argsort(-vals, axis=0, kind="stable")
            self._top[part] = (a, b - a, np.take_along_axis(idx, order, axis=0), np.take_along_axis(vals, order, axis=0))

    def _catch_up(self) -> None:
        """Read the change log past what was read (the chunk's own writes) and the vectors of what it wrote."""
        np, store = self._np, self.engine.store
        rows = store.changes_after(self._last)
        if not rows:
            return
        self._last = int(rows[-1]["seq"])
        touched = {r["item_id"] for r in rows}
        self._changed |= touched
        self._upserts |= {r["item_id"] for r in rows if r["op"] == "upsert"}
        reload = [i for i in touched if i in self._upserts]
        blobs = store.vectors(reload, self.parts, self.engine.model_id) if reload else {}
        for item_id in reload:
            blob = blobs.get(item_id)
            vec = np.frombuffer(blob, dtype=np.float32) if blob is not None else None
            if vec is None or vec.shape[0] != self._dim:
                self._tail.pop(item_id, None)
            else:
                self._tail[item_id] = vec

    def scores(self, i: int, vec) -> dict[str, float] | None:
        """Note `i`'s exact cosines as `dense_search` finds them; None when the chunk's search cannot answer."""
        if self._top is None:
            return None
        self._catch_up()
        m, changed = self._m, self._changed
        out: dict[str, float] = {}
        for a, rows, idx, vals in self._top.values():
            want = min(rows, self.want + len(changed))
            if want > idx.shape[0]:
                return None  # more changes than the room kept: search this note alone
            for r, v in zip(idx[:want, i].tolist(), vals[:want, i].tolist(), strict=True):
                item_id = m.ids[a + r]
                if item_id not in changed:
                    out[item_id] = float(v)
        if self._tail:
            np = self._np
            ids = list(self._tail)
            sims = np.stack([self._tail[t] for t in ids]) @ np.asarray(vec, dtype=np.float32)
            out.update(zip(ids, sims.tolist(), strict=True))
        return out

    def nearest(self, i: int):
        """The `near` of `neighbours` for note `i` of the chunk."""
        def near(vec, k: int) -> list[tuple[Memory, float]]:
            found = self.scores(i, vec) if k == self.k else None
            if found is None:
                return nearest_memories(self.engine, self.ctx, vec, k)
            return nearest_from_scores(self.engine, self.ctx, found, k)
        return near
