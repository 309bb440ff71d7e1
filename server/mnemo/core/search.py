"""The read path's two rules: which memories a caller sees (`memory_visible`), and the one dense search
(`dense_search`: the ANN index plus an exact scan of what it has not replayed yet). Recall, the checks on write
(dedup, conflicts) and the lifecycle operations all use these two, so they cannot disagree."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from mnemo.core.indexes.dense import exact_scores
from mnemo.core.models import Context, Memory
from mnemo.core.store import Store
from mnemo.core.store.codec import partition_for
from mnemo.core.store.schema import VISIBILITY_COLUMNS

if TYPE_CHECKING:
    from mnemo.core.engine import Engine


# -- visibility ----------------------------------------------------------------------------------------------
def branch_visible(branch: str | None, ctx: Context) -> bool:
    """A project memory written on `branch` shows on that branch, and on a feature branch the default branch's
    memories show too; a branch-independent memory (None) shows everywhere."""
    return branch is None or branch in ctx.visible_branches()


def memory_visible(m: Any, ctx: Context, *, include_cold: bool = False, include_deprecated: bool = False,
                   include_pending: bool = False, any_status: bool = False, all_branches: bool = False) -> bool:
    """Whether `ctx` sees `m` (a `Memory`, or the visibility columns of its row): active (or pending, with
    `include_pending`; any status with `any_status`), not superseded or deprecated, not archived (cold), and,
    for a project memory, of this project and on a visible branch (any branch with `all_branches`)."""
    if not any_status and m.status != "active" and not (include_pending and m.status == "pending"):
        return False
    if m.superseded_by and not include_deprecated:
        return False
    if m.deprecated and not include_deprecated:
        return False
    if m.tier == "cold" and not include_cold:
        return False
    if m.scope == "project":
        if m.project_id != ctx.project_id:
            return False
        if not all_branches and not branch_visible(m.branch, ctx):
            return False
    return True


def hidden_by_overrides(store: Store, ctx: Context, candidate_ids: list[str]) -> set[str]:
    """Ids among `candidate_ids` hidden in `ctx` by a more specific memory that overrides them and is visible."""
    if not candidate_ids:
        return set()
    rows = store.overriders(candidate_ids)
    if not rows:
        return set()
    overriding = store.get_memories({r["item_id"] for r in rows})
    return {r["other_id"] for r in rows
            if (m := overriding.get(r["item_id"])) is not None and memory_visible(m, ctx)}


def scope_parts(ctx: Context, scope: str) -> list[str]:
    """The store partitions a read scope covers (team lives on the team server)."""
    parts = []
    if scope in ("project", "hybrid"):
        parts.append(partition_for("project", ctx.project_id))
    if scope in ("global", "hybrid"):
        parts.append(partition_for("global", ctx.project_id))
    return parts


# -- candidates ------------------------------------------------------------------------------------------------
@dataclass(slots=True)  # ~80 made per recall
class Candidate:
    item_id: str
    cosine: float | None = None
    bm25: float | None = None
    memory: Any = None  # a `Memory`, or the `Light` visibility columns of its row
    block: Any = None
    fused: float = 0.0
    scope: str = "project"
    extras: dict = field(default_factory=dict)


class Light(tuple):
    """The visibility columns of a memory row (`VISIBILITY_COLUMNS`, in that order), with attribute access like
    `Memory`: made from a row of `Store.visibility_rows` (a plain tuple, taken as it is) or from a mapping holding
    those columns. A tuple with an item getter per column: recall makes one for each of its ~80 candidates, and a
    `sqlite3.Row` read by name into eleven attributes cost ~0.3 ms of a 10k-note recall (issue 22, fourth pass)."""

    __slots__ = ()
    id: str  # the columns, for the type checker (one property each, set below)
    type: str
    scope: str
    project_id: str
    branch: str | None
    status: str
    deprecated: bool
    superseded_by: str | None
    tier: str
    content_hash: str
    updated_at: float

    def __new__(cls, row: Any) -> Light:
        if type(row) is tuple:
            return tuple.__new__(cls, row)
        return tuple.__new__(cls, [row[k] for k in VISIBILITY_COLUMNS])


for _at, _column in enumerate(VISIBILITY_COLUMNS):
    setattr(Light, _column, property(itemgetter(_at), doc=f"the row's `{_column}`"))


# -- the dense search ------------------------------------------------------------------------------------------
# Partitions up to this many rows (or `ann_min_rows`, when larger) are searched exactly in the vector file even
# when chroma is ready for a larger one: a float32 product over them costs less than an HNSW query through chroma,
# and up to `ann_min_rows` the vector file's compact scan (core/indexes/compact.py) stays under the exact float32
# scan at a third of chroma's memory (docs/benchmarks.md).
EXACT_ROWS = 20000

@dataclass
class DenseHits:
    scores: dict[str, float]  # item id -> cosine
    used_index: bool  # False: the stored vectors were scanned (no index, no vector file: warming up or rebuilt)
    exact: bool = True  # every score is an exact float32 product (False: chroma's ANN distances among them)


def dense_search(engine: Engine, parts: Sequence[str], qvec, k: int, ids: Sequence[str] | None = None,
                 unchanged: bool = False) -> DenseHits:
    """Cosines of `qvec` in the given partitions: with `ids`, exactly, for those items only; otherwise the top `k`
    of each partition, plus every item changed after what the answering index reflects (scored exactly from
    SQLite, so nothing acknowledged is ever unfindable). The answering index: the persisted vector file
    (core/indexes/vector_file.py, exact) when its partitions hold no more than `ann_min_rows` rows (at least
    `EXACT_ROWS`) or while the ANN index is not ready; else chroma's ANN index. When chroma fails it is marked
    broken and rebuilt in the background; without either, the stored vectors are scanned. Store errors
    propagate. `unchanged`: the caller reads only the `k` best besides document blocks (a write's neighbour check:
    `VectorFile.search`)."""
    store = engine.store
    if ids is not None:
        if not ids:
            return DenseHits({}, False)
        # the rows of the mapped vector file where it holds them as stored, the rest from SQLite
        by_id, rest = engine.vector_file().scores_for(parts, qvec, list(ids))
        if rest:
            by_id.update(exact_scores(store, parts, qvec, ids=rest, model_id=engine.model_id))
        return DenseHits(by_id, False)
    index = engine.index
    vf = engine.vector_file()
    if index is not None and index.ready and not index.dormant and not vf.small(parts, max(EXACT_ROWS, index.threshold)):
        seq = index.indexed_seq
        scores: dict[str, float] = {}
        try:
            for part in parts:
                scores.update(index.query(part, qvec, k))
        except Exception as exc:  # noqa: BLE001 - fall back to the truth, rebuild in the background
            index.mark_broken(exc)
            engine.schedule_index_repair()
        else:
            return DenseHits(_with_tail(engine, parts, qvec, scores, store.recent_changes(seq)), True, exact=False)
    found = vf.search(parts, qvec, k, unchanged=unchanged)
    if found is not None:
        # the file's answer leaves out every changed item, so the tail's best `k` are all that can be read of it
        return DenseHits(_with_tail(engine, parts, qvec, *found, top=k if unchanged else None), True)
    return DenseHits(dict(exact_scores(store, parts, qvec, model_id=engine.model_id)), False)


def _with_tail(engine: Engine, parts: Sequence[str], qvec, scores: dict[str, float], tail: list,
               top: int | None = None) -> dict[str, float]:
    """`scores` plus the exact cosines of the items of the change-log rows `tail` (what an index has not seen), their
    vectors kept between calls while unchanged (`VectorFile.tail_scores`; `top`: of those, only the ones that can
    be among the `top` best besides document blocks, when `scores` holds none of the tail's items)."""
    scores.update(engine.vector_file().tail_scores(parts, qvec, tail, top))
    return scores


def nearest_memories(engine: Engine, ctx: Context, vec, k: int = 10,
                     min_sim: float | None = None) -> list[tuple[Memory, float]]:
    """Visible memories nearest to `vec` (project partition + global), with exact cosines. A write's check: its
    cost must not grow with the store, so the visibility of the candidates is read from their few columns and only
    the `k` kept are loaded whole (with `min_sim`: only those of them at or above that cosine, the ones the caller
    compares); the ANN index's cosines (not the exact scans') are recomputed exactly."""
    parts = scope_parts(ctx, "hybrid")
    hits = dense_search(engine, parts, vec, max(20, k * 4), unchanged=True)  # `nearest_from_scores` reads k * 4
    if hits.exact:
        return nearest_from_scores(engine, ctx, hits.scores, k, min_sim)
    ids = [i for i, _ in sorted(hits.scores.items(), key=lambda kv: -kv[1]) if not i.startswith("blk-")][: k * 4]
    if not ids:
        return []
    exact = hits.scores if hits.exact else dense_search(engine, parts, vec, k, ids=ids).scores
    rows = engine.store.visibility_rows(ids)
    seen = [(i, float(exact.get(i, hits.scores[i]))) for i in ids if i in rows and memory_visible(Light(rows[i]), ctx)]
    seen.sort(key=lambda kv: (-kv[1], kv[0]))
    seen = _kept(seen, k, min_sim)
    mems = engine.store.get_memories([i for i, _ in seen])
    return [(mems[i], s) for i, s in seen if i in mems]


def _kept(seen: list[tuple[str, float]], k: int, min_sim: float | None) -> list[tuple[str, float]]:
    """The `k` nearest of `seen` (sorted), without those under `min_sim`: not loaded for nothing."""
    return seen[:k] if min_sim is None else [(i, s) for i, s in seen[:k] if s >= min_sim]


def nearest_from_scores(engine: Engine, ctx: Context, scores: dict[str, float], k: int = 10,
                        min_sim: float | None = None) -> list[tuple[Memory, float]]:
    """`nearest_memories` from the exact cosines `dense_search` found (item id -> cosine): the visible memories
    among the `k * 4` best, the `k` nearest loaded whole (with `min_sim`: those at or above it). The checks of a
    `remember_batch` chunk find their cosines together (core/memory/neighbours.py `ChunkSearch`) and finish here,
    as a single remember does."""
    ids = [i for i, _ in sorted(scores.items(), key=lambda kv: -kv[1]) if not i.startswith("blk-")][: k * 4]
    if not ids:
        return []
    seen = _visible_kept(engine, ctx, ids, scores, k, min_sim)
    mems = engine.store.get_memories([i for i, _ in seen])
    return [(mems[i], s) for i, s in seen if i in mems]


def _visible_kept(engine: Engine, ctx: Context, ids: list[str], scores: dict[str, float], k: int,
                  min_sim: float | None) -> list[tuple[str, float]]:
    """`_kept` of the visible ones among `ids` (ordered by `scores`, best first), their visibility rows read a few at
    a time, best first, until no unread one can be among the answer: the `k`-th visible one so far scores above the
    next unread, or the next unread is under `min_sim`. The same answer as reading them all; past the visibility
    cache's 20k memories a write read all 40 from SQLite (~0.4 ms at 100k), now ~12 (issue 22, seventh pass)."""
    seen: list[tuple[str, float]] = []
    step = k + 2 if k > 0 else len(ids)
    at = 0
    while at < len(ids):
        batch = ids[at:at + step]
        rows = engine.store.visibility_rows(batch)
        seen += [(i, float(scores[i])) for i in batch if i in rows and memory_visible(Light(rows[i]), ctx)]
        at += len(batch)
        if at >= len(ids):
            break
        following = float(scores[ids[at]])  # the best unread: no unread one scores more
        if min_sim is not None and following < min_sim:
            break
        if len(seen) >= k:
            seen.sort(key=lambda kv: (-kv[1], kv[0]))
            if seen[k - 1][1] > following:
                break
    seen.sort(key=lambda kv: (-kv[1], kv[0]))
    return _kept(seen, k, min_sim)
