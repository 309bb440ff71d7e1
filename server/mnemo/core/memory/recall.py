"""Hybrid recall: dense (the index plus its unreplayed tail, core/search.py) and keyword (BM25) candidates, the
visibility rule, team hits, fused by RRF, scope ranking, result cards (core/cards.py); and hydration."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import TYPE_CHECKING, Any, NamedTuple

from mnemo import trace
from mnemo.core.api_types.records import Card
from mnemo.core.api_types.results import HydrateBlock, Hydrated, RecallResult
from mnemo.core.cards import block_card, memory_card
from mnemo.core.errors import InvalidInput, NotFound
from mnemo.core.memory.filters import Filter, matches
from mnemo.core.models import SCOPE_PRIORITY, Context, Memory, check_read_scope, check_type
from mnemo.core.policy import MAX_TEXT_CHARS, check_min_confidence
from mnemo.core.search import Candidate, Light, dense_search, hidden_by_overrides, memory_visible, scope_parts
from mnemo.core.store import blob_to_vec, fts_query
from mnemo.core.team.ops import drop_restated, team_candidates
from mnemo.core.text import rrf, tokenize

if TYPE_CHECKING:
    from mnemo.core.engine import Engine

RRF_K = 5  # small k: the top of each list dominates; measured best on LoCoMo (docs/benchmarks.md)
# Multiplicative scope factors: project beats global beats team when relevance is close.
SCOPE_FACTOR = {"project": 1.0, "global": 0.95, "team": 0.9}
KEYWORD_AGREEMENT_BONUS = 0.1  # both signals found it: more likely right than the cosine alone says
# Hits below this confidence are noise (a cosine near 0 shares nothing with the query); chosen on LoCoMo, where
# it drops no evidence hit from the top 10 (docs/benchmarks.md). `MNEMO_MIN_CONFIDENCE` or `min_confidence` per call.
MIN_CONFIDENCE = 0.15
HYDRATE_BUDGET = {"default": 4000, "related": 12000}
HYDRATE_NEIGHBOURS = {"default": 1, "related": 3}
HYDRATE_RELATED_NOTES = {"default": 3, "related": 8}
NO_FILTER = Filter()


def recall(engine: Engine, ctx: Context, query: str, *, scope: str = "hybrid", limit: int = 5,
           types: list[str] | None = None, include_docs: bool = True, include_cold: bool = False,
           min_confidence: float | None = None, qvec=None, filters: Filter | None = None) -> RecallResult:
    """The cards that answer `query` in `ctx` (the most relevant first), with the warnings of this recall;
    `filters` (core/memory/filters.py, checked by `make_filter`) keep only the memories that match."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("the query is empty", hint="ask in words, e.g. `mnemo recall \"how do we retry POSTs?\"`")
    if len(query) > MAX_TEXT_CHARS:
        raise InvalidInput(f"the query is {len(query):,} characters; the limit is {MAX_TEXT_CHARS:,}",
                           hint="ask a shorter question")
    scope = check_read_scope(scope)
    for t in types or []:
        check_type(t)
    limit = int(limit)
    if not 1 <= limit <= 100:
        raise InvalidInput(f"limit {limit} is out of range", hint="use 1..100")
    return ranked(engine, ctx, query, scope=scope, limit=limit, types=types, include_docs=include_docs,
                  include_cold=include_cold, min_confidence=min_confidence, qvec=qvec, filters=filters)


def ranked(engine: Engine, ctx: Context, query: str, *, scope: str = "hybrid", limit: int = 5,
           types: list[str] | None = None, include_docs: bool = True, include_cold: bool = False,
           min_confidence: float | None = None, qvec=None, filters: Filter | None = None) -> RecallResult:
    """`recall` without the checks of its arguments (hydration asks with a stored note's text and vector)."""
    t0 = time.perf_counter()
    st = trace.current()  # bench runs only (MNEMO_TRACE_FILE): the stages of this recall
    parts = scope_parts(ctx, scope)
    if types or (filters is not None and filters.types):
        filters = dataclasses.replace(filters or NO_FILTER, types=tuple(types or ()))
    elif filters is None:
        filters = NO_FILTER
    plain = filters.is_empty()
    # a call's own floor is checked here, before anything runs; the store-wide one is read with the keyword side
    floor = None if min_confidence is None and plain else floor_for(min_confidence, filters)
    # a filter drops candidates after the search: a larger pool keeps `limit` hits within reach
    pool = max(50, limit * 10) if plain else max(200, limit * 40)
    warnings: list[str] = []
    if qvec is None:
        # What needs no vector (the keyword side, the settings this recall reads) runs in the engine's helper thread
        # while this one embeds the query (the model runs without the GIL, on one core): off the recall's path on a
        # machine with a core to spare (issue 22, fourth and fifth passes). Not the visibility of the keyword hits:
        # judged there, the embedding took as much longer as the judging saved (docs/benchmarks.md, fifth pass).
        early = engine.beside(_early, engine, parts, query, pool, floor, scope)
        st.mark("r.setup")
        # through the engine's LRU of texts: a query asked again (the same symbol hovered again, a code lens pass
        # then a hover on it) is embedded once (issue 22)
        qvec = engine.embed_cached([query])[0]
        st.mark("r.embed")
        # the helper thread still busy with another request's work (another recall's keyword side): not waited for
        ready = _early(engine, parts, query, pool, floor, scope) if early.cancel() else early.result()
    else:
        ready = _early(engine, parts, query, pool, floor, scope)
    st.mark("r.keyword")
    cands = _candidates(engine, parts, qvec, pool, warnings, ready.keyword)
    st.mark("r.dense")
    visible = _visible(engine, ctx, cands, filters, include_docs=include_docs, include_cold=include_cold)
    st.mark("r.visible")
    # Cosines for keyword-only hits: they place those hits in the dense ranking too (RRF below), and give them
    # a confidence.
    missing = [i for i, c in visible.items() if c.cosine is None]
    for item_id, cos in dense_search(engine, parts, qvec, pool, ids=missing).scores.items():
        visible[item_id].cosine = cos
    st.mark("r.cosines")
    if ready.team:  # team hits from the Chroma server (cosine only: BM25 is local)
        for c in team_candidates(engine, ctx, qvec, pool, warnings, scope):
            if matches(c.memory, filters) and memory_visible(c.memory, ctx, include_cold=include_cold,
                                                             any_status=bool(filters.status)):
                visible.setdefault(c.item_id, c)
        drop_restated(engine, ctx, visible)  # a team note restating a local one: the local one stands
    st.mark("r.team")
    _keep_most_specific(visible, ctx)
    # Overrides: a more specific memory that contradicts a general one hides it where it is visible (SPEC §4).
    for overridden in hidden_by_overrides(engine.store, ctx, [i for i, c in visible.items() if c.memory is not None]):
        visible.pop(overridden, None)
    st.mark("r.overrides")
    _fuse(visible)
    min_confidence = ready.floor
    chosen, hidden = _choose(visible, limit, min_confidence)
    st.mark("r.fuse")
    cards = _cards(engine, ctx, chosen)
    st.mark("r.cards")
    engine.note_access([c["item_id"] for c in cards if c["source_kind"] == "note"])
    return {"query": query, "scope": scope, "cards": cards, "warnings": warnings,
            "took_ms": round((time.perf_counter() - t0) * 1000, 2),
            "min_confidence": min_confidence, "hidden_low_confidence": hidden}


def floor_for(min_confidence: Any, filters: Filter) -> float:
    """The minimum confidence of this recall: the call's own, else 0 when it filters (a filtered recall asks for
    what matches the filter, ranked by meaning, each with its confidence: the README's `recall "retries" --kind
    decision --tag payments` must find the payments decision at 0.11), else the store-wide floor."""
    if min_confidence is None and not filters.is_empty():
        return 0.0
    return check_min_confidence(min_confidence)


class _Early(NamedTuple):
    keyword: list[tuple[str, float]]  # the BM25 hits, best first
    floor: float  # the minimum confidence
    team: bool  # whether to ask the team server (False: none configured, and the scope does not say "team")


def _early(engine: Engine, parts: list[str], query: str, pool: int, floor: float | None, scope: str) -> _Early:
    """What a recall knows before the query's vector: the keyword hits, the store-wide minimum confidence when the
    call gave none (`floor` None), and whether a team server is configured (its settings are re-read at every
    recall, so a change applies at once)."""
    keyword = _keyword_side(engine, parts, query, pool)
    if floor is None:
        floor = check_min_confidence(None)
    team = False
    if scope == "team":
        team = True
    elif scope == "hybrid":
        try:
            team = engine.team() is not None
        except Exception:  # noqa: BLE001 - a setting to fix: `team_candidates` asks again and warns
            team = True
    return _Early(keyword, floor, team)


def _keyword_side(engine: Engine, parts: list[str], query: str, pool: int) -> list[tuple[str, float]]:
    """The keyword candidates: the in-memory BM25 index of core/indexes/keyword.py; FTS5 while a large partition's
    index is still being built."""
    keyword = engine.keywords.search(parts, query, pool)
    if keyword is None:  # the in-memory index of a large partition is still being built: FTS5 meanwhile
        q = fts_query(tokenize(query, stem=False))
        keyword = engine.store.fts_search(parts, q, pool) if q else []
    return keyword


def _candidates(engine: Engine, parts: list[str], qvec, pool: int, warnings: list[str],
                keyword: list[tuple[str, float]]) -> dict[str, Candidate]:
    """The dense side (the ANN index and its unreplayed tail, or an exact scan) and the keyword side's hits."""
    hits = dense_search(engine, parts, qvec, pool)
    if not hits.used_index:
        warnings.append("dense index warming up: exact scan used")
    cands: dict[str, Candidate] = {}
    for item_id, cos in sorted(hits.scores.items(), key=lambda kv: -kv[1])[: pool * 2]:
        cands[item_id] = Candidate(item_id, cosine=cos)
    for item_id, s in dict(keyword).items():
        c = cands.get(item_id)
        if c is None:
            c = cands[item_id] = Candidate(item_id)
        c.bm25 = s
    return cands


def _visible(engine: Engine, ctx: Context, cands: dict[str, Candidate], filters: Filter, *,
             include_docs: bool, include_cold: bool) -> dict[str, Candidate]:
    """The candidates `ctx` may see that pass `filters`. Filtered on a few columns only (full `Memory` objects
    only when the filter reads more: kind, tags, author, source); full ones are built for the returned cards."""
    store = engine.store
    memories: dict[str, Light | Memory] = {
        i: Light(r) for i, r in store.visibility_rows([i for i in cands if not i.startswith("blk-")]).items()}
    blocks = store.get_blocks([i for i in cands if i.startswith("blk-")] if include_docs else [])
    visible: dict[str, Candidate] = {}
    if filters.needs_full_rows():
        memories = dict(store.get_memories(list(memories)))
    any_status, all_branches = bool(filters.status), bool(filters.branch)
    plain = filters.is_empty()  # `matches` keeps everything
    for item_id, c in cands.items():
        if item_id in memories:
            m = memories[item_id]
            if not memory_visible(m, ctx, include_cold=include_cold, any_status=any_status,
                                  all_branches=all_branches) or not (plain or matches(m, filters)):
                continue
            c.memory, c.scope = m, m.scope
            visible[item_id] = c
        elif item_id in blocks:
            b = blocks[item_id]
            if b["project_id"] != ctx.project_id or filters.by_memory_fields() or not _in_time(b, filters):
                continue
            c.block, c.scope = b, "project"
            visible[item_id] = c
    return visible


def _in_time(block: Any, filters: Filter) -> bool:
    at = block["updated_at"]
    return (filters.since is None or at >= filters.since) and (filters.until is None or at <= filters.until)


def _keep_most_specific(visible: dict[str, Candidate], ctx: Context) -> None:
    """The same fact in several scopes (e.g. imported twice): keep the most specific one."""
    by_hash: dict[str, Candidate] = {}
    for c in list(visible.values()):
        if c.memory is None:
            continue
        prev = by_hash.get(c.memory.content_hash)
        if prev is None:
            by_hash[c.memory.content_hash] = c
        elif (SCOPE_PRIORITY[c.scope], c.memory.branch != ctx.branch) < (SCOPE_PRIORITY[prev.scope],
                                                                          prev.memory.branch != ctx.branch):
            visible.pop(prev.item_id, None)
            by_hash[c.memory.content_hash] = c
        else:
            visible.pop(c.item_id, None)


def _fuse(visible: dict[str, Candidate]) -> None:
    """RRF of the dense and the keyword rankings, scaled to 0..1 and by the scope factor."""
    items = visible.items()
    # ranked by (-cosine, id) and (-bm25, id): ids are unique, so sorting the pairs is sorting by those keys
    dense_rank = [i for _, i in sorted([(-(c.cosine or -1), i) for i, c in items])]
    bm25_rank = [i for _, i in sorted([(-(c.bm25 or 0), i) for i, c in items if c.bm25 is not None])]
    fused = rrf([dense_rank, bm25_rank], k=RRF_K)
    max_fused = 2.0 / (RRF_K + 1)
    for item_id, c in items:
        c.fused = fused.get(item_id, 0.0) / max_fused * SCOPE_FACTOR.get(c.scope, 0.9)


def _choose(visible: dict[str, Candidate], limit: int,
            min_confidence: float) -> tuple[list[tuple[Candidate, float]], int]:
    """The best `limit` candidates with their confidence (ties: scope, Markdown before notes, newer, id), and how
    many better-ranked ones were below the minimum confidence."""
    order = []
    for c in visible.values():  # each key ends with the candidate's (unique) id: the candidates are never compared
        updated = c.memory.updated_at if c.memory else c.block["updated_at"]
        is_note = 0 if c.block is not None else 1  # Markdown blocks win near-ties over notes
        order.append((-round(c.fused, 3), SCOPE_PRIORITY.get(c.scope, 3), is_note, -updated, c.item_id, c))
    order.sort()
    chosen: list[tuple[Candidate, float]] = []
    hidden = 0
    for key in order:
        c = key[-1]
        conf = max(0.0, min(1.0, (c.cosine or 0.0) + (KEYWORD_AGREEMENT_BONUS if c.bm25 else 0.0)))
        if conf < min_confidence:
            hidden += 1
            continue
        chosen.append((c, conf))
        if len(chosen) >= limit:
            break
    return chosen, hidden


def _cards(engine: Engine, ctx: Context, chosen: list[tuple[Candidate, float]]) -> list[Card]:
    full = engine.store.get_memories([c.item_id for c, _ in chosen if isinstance(c.memory, Light)])
    cards = []
    for c, conf in chosen:
        if c.memory is not None:
            m = full.get(c.item_id, c.memory) if isinstance(c.memory, Light) else c.memory
            if isinstance(m, Light):  # forgotten between the two reads
                continue
            cards.append(memory_card(m, c.fused, conf))
        else:
            cards.append(block_card(c.block, ctx.project_name, c.fused, conf))
    return cards


# -- hydration -------------------------------------------------------------------------------------------------
def hydrate(engine: Engine, ctx: Context, item_id: str, mode: str = "default") -> Hydrated:
    """Bounded surrounding context of one hit: a note with its related notes, or a block with its file neighbours."""
    if mode not in HYDRATE_BUDGET:
        raise InvalidInput(f"unknown hydrate mode {mode!r}", hint="use 'default' or 'related'")
    if item_id.startswith("team-"):  # a team record lives on the Chroma server
        return _hydrate_team(engine, ctx, item_id, mode)
    if item_id.startswith("blk-"):
        return _hydrate_block(engine, ctx, item_id, mode)
    m = engine.store.get_memory(item_id)
    if m is None or not memory_visible(m, ctx, include_cold=True, include_deprecated=True, include_pending=True):
        raise NotFound(f"no memory {item_id} visible from this project",
                       hint="check the id with `mnemo list`, or switch to the project/branch it belongs to")
    vec = engine.store.vectors([item_id]).get(item_id)
    related = [] if vec is None else _related(engine, ctx, item_id, m.text, blob_to_vec(vec), mode)
    return {"item_id": item_id, "source_kind": "note", "mode": mode, "memory": m.to_dict(), "related": related}


def _related(engine: Engine, ctx: Context, item_id: str, text: str, vec, mode: str) -> list[Card]:
    """The notes (and, in `related` mode, blocks) nearest to a note, within the mode's character budget."""
    res = ranked(engine, ctx, text, limit=HYDRATE_RELATED_NOTES[mode] + 1, include_docs=(mode == "related"), qvec=vec)
    used = len(text)
    related = []
    for card in res["cards"]:
        if card["item_id"] == item_id:
            continue
        used += len(card["compressed_summary"])
        if used > HYDRATE_BUDGET[mode]:
            break
        related.append(card)
    return related


def _hydrate_block(engine: Engine, ctx: Context, item_id: str, mode: str) -> Hydrated:
    store, budget = engine.store, HYDRATE_BUDGET[mode]
    b = store.get_block(item_id)
    if b is None or b["project_id"] != ctx.project_id:
        raise NotFound(f"no Markdown block {item_id} in this project", hint="run `mnemo recall` for fresh ids")
    siblings = store.file_blocks(b["project_id"], b["source_path"])
    pos = next(i for i, s in enumerate(siblings) if s["id"] == item_id)
    n = HYDRATE_NEIGHBOURS[mode]
    used = len(b["text"])
    parts: list[HydrateBlock] = []
    for s in siblings[max(0, pos - n): pos + n + 1]:
        text = s["text"]
        if s["id"] != item_id:
            if used + len(text) > budget:
                text = text[: max(0, budget - used)]
            used += len(text)
        parts.append({"block_id": s["id"], "heading_path": json.loads(s["heading_path"]), "text": text,
                      "lines": [s["start_line"], s["end_line"]], "is_hit": s["id"] == item_id})
    return {"item_id": item_id, "source_kind": "markdown", "mode": mode, "source_path": b["source_path"],
            "blocks": parts, "truncated": used >= budget}


def _hydrate_team(engine: Engine, ctx: Context, item_id: str, mode: str) -> Hydrated:
    team = engine.team()
    if team is None:
        raise NotFound(f"no team memory {item_id}: no team server is configured", hint="`mnemo team status`")
    got = team.get(item_id, engine.model_id)
    if got is None:
        raise NotFound(f"no team memory {item_id}", hint="run `mnemo recall --scope team` for fresh ids")
    m, vec = got
    related = [] if vec is None else _related(engine, ctx, item_id, m.text, vec, mode)
    return {"item_id": item_id, "source_kind": "note", "mode": mode, "memory": m.to_dict(), "related": related}
