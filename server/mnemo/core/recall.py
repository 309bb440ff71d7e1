"""Hybrid recall: dense (chroma / exact tail) + BM25 (FTS5) fused by RRF, scope ranking, result cards, hydration."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mnemo.core.index import exact_scores
from mnemo.core.models import SCOPE_PRIORITY, Context, Memory
from mnemo.core.store import fts_query
from mnemo.core.text import rrf, tokenize

if TYPE_CHECKING:
    from mnemo.core.engine import Engine

RRF_K = 5  # small k: the top of each list dominates; measured best on LoCoMo (docs/benchmarks.md)
# Multiplicative scope factors: project beats global beats team when relevance is close.
SCOPE_FACTOR = {"project": 1.0, "global": 0.95, "team": 0.9}
CONF_HIGH = 0.5
CONF_MEDIUM = 0.25
KEYWORD_AGREEMENT_BONUS = 0.1  # both signals found it: more likely right than the cosine alone says
# Hits below this confidence are noise (a cosine near 0 shares nothing with the query); chosen on LoCoMo, where
# it drops no evidence hit from the top 10 (docs/benchmarks.md). `MNEMO_MIN_CONFIDENCE` or `min_confidence` per call.
MIN_CONFIDENCE = 0.15
SUMMARY_CHARS = 200
HYDRATE_BUDGET = {"default": 4000, "related": 12000}
HYDRATE_NEIGHBOURS = {"default": 1, "related": 3}
HYDRATE_RELATED_NOTES = {"default": 3, "related": 8}


@dataclass
class Candidate:
    item_id: str
    cosine: float | None = None
    bm25: float | None = None
    memory: Memory | None = None
    block: Any = None
    fused: float = 0.0
    scope: str = "project"
    extras: dict = field(default_factory=dict)


class _Light:
    """The visibility columns of a memory row, with attribute access like `Memory` (see Store.visibility_rows)."""

    __slots__ = ("id", "type", "scope", "project_id", "branch", "status", "deprecated", "superseded_by", "tier",
                 "content_hash", "updated_at")

    def __init__(self, row):
        for k in self.__slots__:
            setattr(self, k, row[k])


def confidence_state(conf: float) -> str:
    return "high" if conf >= CONF_HIGH else "medium" if conf >= CONF_MEDIUM else "low"


def summarize(text: str, limit: int = SUMMARY_CHARS) -> str:
    flat = " ".join(text.split())
    flat = re.sub(r"^#+\s*", "", flat)
    if len(flat) <= limit:
        return flat
    cut = flat[:limit]
    dot = cut.rfind(". ")
    if dot > limit * 0.5:
        return cut[: dot + 1]
    return cut.rsplit(" ", 1)[0] + " …"


def key_points(text: str, limit: int = 3) -> list[str]:
    bullets = [m.group(1).strip() for m in re.finditer(r"^\s*(?:[-*+]|\d+\.)\s+(.+)$", text, re.M)]
    if bullets:
        return [summarize(b, 120) for b in bullets[:limit]]
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", " ".join(text.split())) if s.strip()]
    return [summarize(s, 120) for s in sentences[1: 1 + limit]] if len(sentences) > 1 else []


def memory_visible(m: Memory, ctx: Context, *, include_cold: bool = False, include_deprecated: bool = False,
                   include_pending: bool = False) -> bool:
    if m.status != "active" and not (include_pending and m.status == "pending"):
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
        if m.branch is not None and m.branch not in ctx.visible_branches():
            return False
    return True


def scope_parts(ctx: Context, scope: str) -> list[str]:
    parts = []
    if scope in ("project", "hybrid"):
        parts.append(f"p-{ctx.project_id}")
    if scope in ("global", "hybrid"):
        parts.append("g")
    return parts


def memory_card(m: Memory, score: float, conf: float) -> dict[str, Any]:
    return {
        "scope": m.scope,
        "project_id": m.project_id,
        "project_name": m.project_name,
        "source_kind": "note",
        "item_id": m.id,
        "block_id": None,
        "source_path": (m.anchors[0].get("path") if m.anchors else None),
        "title": summarize(m.text, 72),
        "heading_path": [],
        "updated_at": m.updated_at,
        "score": round(score, 4),
        "confidence": round(conf, 4),
        "confidence_state": confidence_state(conf),
        "compressed_summary": summarize(m.text),
        "key_points": key_points(m.text),
        "can_hydrate": True,
        # extras beyond the contract: what an editor or agent needs to show provenance
        "type": m.type,
        "note_kind": m.kind,
        "branch": m.branch,
        "trust": m.trust,
        "confirmations": m.confirmations,
        "source": m.source,
        "author": m.author,
        "promoted_from": m.provenance.get("promoted_from"),
        "imported_from": m.provenance.get("imported_from"),
        "tier": m.tier,
        "flags": m.flags,
        "anchors": m.anchors,
    }


def block_card(b: Any, project_name: str, score: float, conf: float) -> dict[str, Any]:
    heading_path = json.loads(b["heading_path"])
    return {
        "scope": "project",
        "project_id": b["project_id"],
        "project_name": project_name,
        "source_kind": "markdown",
        "item_id": b["id"],
        "block_id": b["id"],
        "source_path": b["source_path"],
        "title": b["title"],
        "heading_path": heading_path,
        "updated_at": b["updated_at"],
        "score": round(score, 4),
        "confidence": round(conf, 4),
        "confidence_state": confidence_state(conf),
        "compressed_summary": summarize(re.sub(r"^#+ .*\n?", "", b["text"])),
        "key_points": key_points(b["text"]),
        "can_hydrate": True,
        "lines": [b["start_line"], b["end_line"]],
        "trust": "trusted",
    }


def recall(engine: Engine, ctx: Context, query: str, *, scope: str = "hybrid", limit: int = 5,
           types: list[str] | None = None, include_docs: bool = True, include_cold: bool = False,
           min_confidence: float | None = None, qvec=None) -> dict[str, Any]:
    t0 = time.perf_counter()
    min_confidence = check_min_confidence(min_confidence)
    store = engine.store
    parts = scope_parts(ctx, scope)
    pool = max(50, limit * 10)
    warnings: list[str] = []
    if qvec is None:
        qvec = engine.embed_query(query)

    # Dense side: the ANN index when ready, plus an exact scan of whatever it has not replayed yet.
    dense: dict[str, float] = {}
    index = engine.index
    used_index = False
    if index is not None and index.ready:
        seq = index.indexed_seq
        try:
            for part in parts:
                for item_id, cos in index.query(part, qvec, pool):
                    dense[item_id] = cos
            used_index = True
        except Exception as exc:  # noqa: BLE001 - fall back to the truth, rebuild in the background
            index.mark_broken(exc)
            engine.schedule_index_repair()
            dense.clear()
        if used_index:
            tail_ids = {c["item_id"] for c in store.changes_after(seq) if c["op"] == "upsert"}
            if tail_ids:
                for item_id, cos in exact_scores(store, parts, qvec, ids=list(tail_ids)):
                    dense[item_id] = cos
    if not used_index:
        for item_id, cos in exact_scores(store, parts, qvec):
            dense[item_id] = cos
        warnings.append("dense index warming up: exact scan used")

    # Keyword side: BM25 from FTS5 over the same partitions.
    hits = engine.keywords.search(parts, query, pool)
    if hits is None:  # the in-memory index of a large partition is still being built: FTS5 meanwhile
        q = fts_query(tokenize(query, stem=False))
        hits = store.fts_search(parts, q, pool) if q else []
    bm25 = dict(hits)

    cands: dict[str, Candidate] = {}
    for item_id, cos in sorted(dense.items(), key=lambda kv: -kv[1])[: pool * 2]:
        cands[item_id] = Candidate(item_id, cosine=cos)
    for item_id, s in bm25.items():
        cands.setdefault(item_id, Candidate(item_id)).bm25 = s

    mem_ids = [i for i in cands if not i.startswith("blk-")]
    blk_ids = [i for i in cands if i.startswith("blk-")] if include_docs else []
    # Filter on a few columns only; full `Memory` objects are built for the returned cards alone.
    memories = {i: _Light(r) for i, r in store.visibility_rows(mem_ids).items()}
    blocks = store.get_blocks(blk_ids)
    visible: dict[str, Candidate] = {}
    for item_id, c in cands.items():
        if item_id in memories:
            m = memories[item_id]
            if not memory_visible(m, ctx, include_cold=include_cold):
                continue
            if types and m.type not in types:
                continue
            c.memory, c.scope = m, m.scope
            visible[item_id] = c
        elif item_id in blocks:
            b = blocks[item_id]
            if b["project_id"] != ctx.project_id or types:
                continue
            c.block, c.scope = b, "project"
            visible[item_id] = c
    # Cosines for keyword-only hits (needed for confidence).
    missing = [i for i, c in visible.items() if c.cosine is None]
    if missing:
        for item_id, cos in exact_scores(store, parts, qvec, ids=missing):
            visible[item_id].cosine = cos

    if scope in ("hybrid", "team"):  # team hits from the Chroma server (cosine only: BM25 is local)
        from mnemo.core.team import drop_restated, team_candidates

        for c in team_candidates(engine, ctx, qvec, pool, warnings, scope):
            if (not types or c.memory.type in types) and memory_visible(c.memory, ctx, include_cold=include_cold):
                visible.setdefault(c.item_id, c)
        drop_restated(engine, ctx, visible)  # a team note restating a local one: the local one stands

    # Same fact in several scopes (e.g. imported twice): keep the most specific one.
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

    # Overrides: a more specific memory that contradicts a general one hides it where it is visible (SPEC §4).
    from mnemo.core.lifecycle import hidden_by_overrides

    for hidden in hidden_by_overrides(store, ctx, [i for i, c in visible.items() if c.memory is not None]):
        visible.pop(hidden, None)

    dense_rank = [i for i, c in sorted(visible.items(), key=lambda kv: (-(kv[1].cosine or -1), kv[0]))]
    bm25_rank = [i for i, c in sorted(visible.items(), key=lambda kv: (-(kv[1].bm25 or 0), kv[0]))
                 if c.bm25 is not None]
    fused = rrf([dense_rank, bm25_rank], k=RRF_K)
    max_fused = 2.0 / (RRF_K + 1)
    for item_id, c in visible.items():
        c.fused = fused.get(item_id, 0.0) / max_fused * SCOPE_FACTOR.get(c.scope, 0.9)

    def sort_key(c: Candidate):
        updated = c.memory.updated_at if c.memory else c.block["updated_at"]
        is_note = 0 if c.block is not None else 1  # Markdown blocks win near-ties over notes
        return (-round(c.fused, 3), SCOPE_PRIORITY.get(c.scope, 3), is_note, -updated, c.item_id)

    ranked = sorted(visible.values(), key=sort_key)
    chosen: list[tuple[Candidate, float]] = []
    hidden = 0
    for c in ranked:
        conf = max(0.0, min(1.0, (c.cosine or 0.0) + (KEYWORD_AGREEMENT_BONUS if c.bm25 else 0.0)))
        if conf < min_confidence:
            hidden += 1
            continue
        chosen.append((c, conf))
        if len(chosen) >= limit:
            break
    full = store.get_memories([c.item_id for c, _ in chosen if isinstance(c.memory, _Light)])
    cards = []
    for c, conf in chosen:
        if c.memory is not None:
            m = full.get(c.item_id, c.memory) if isinstance(c.memory, _Light) else c.memory
            if isinstance(m, _Light):  # forgotten between the two reads
                continue
            cards.append(memory_card(m, c.fused, conf))
        else:
            cards.append(block_card(c.block, ctx.project_name, c.fused, conf))
    engine.note_access([c["item_id"] for c in cards if c["source_kind"] == "note"])
    return {
        "query": query,
        "scope": scope,
        "cards": cards,
        "warnings": warnings + engine.warnings(),
        "took_ms": round((time.perf_counter() - t0) * 1000, 2),
        "min_confidence": min_confidence, "hidden_low_confidence": hidden,
    }


def check_min_confidence(value: Any) -> float:
    """The minimum confidence of a recall: the call's value, else the store-wide `min_confidence` (`mnemo config
    set min_confidence`, MNEMO_MIN_CONFIDENCE), default MIN_CONFIDENCE."""
    import math

    from mnemo.core import config
    from mnemo.core.errors import InvalidInput

    if value is None:
        return float(config.value("min_confidence"))
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"min_confidence {value!r} is not a number", hint="use a number from 0 to 1, e.g. 0.15") from exc
    if isinstance(value, bool) or not math.isfinite(v) or not 0.0 <= v <= 1.0:
        raise InvalidInput(f"min_confidence {value!r} is out of range", hint="use a number from 0 to 1 (0 shows every hit)")
    return v


def hydrate(engine: Engine, ctx: Context, item_id: str, mode: str = "default") -> dict[str, Any]:
    """Bounded surrounding context of one hit: a note with its related notes, or a block with its file neighbours."""
    from mnemo.core.errors import InvalidInput, NotFound

    if mode not in HYDRATE_BUDGET:
        raise InvalidInput(f"unknown hydrate mode {mode!r}", hint="use 'default' or 'related'")
    budget = HYDRATE_BUDGET[mode]
    store = engine.store
    if item_id.startswith("team-"):  # a team record lives on the Chroma server
        from mnemo.core.team import hydrate_team

        return hydrate_team(engine, ctx, item_id, mode)
    if item_id.startswith("blk-"):
        b = store.get_block(item_id)
        if b is None or b["project_id"] != ctx.project_id:
            raise NotFound(f"no Markdown block {item_id} in this project", hint="run `mnemo recall` for fresh ids")
        siblings = store.file_blocks(b["project_id"], b["source_path"])
        pos = next(i for i, s in enumerate(siblings) if s["id"] == item_id)
        n = HYDRATE_NEIGHBOURS[mode]
        window = siblings[max(0, pos - n): pos + n + 1]
        used = len(b["text"])
        parts = []
        for s in window:
            text = s["text"]
            if s["id"] != item_id:
                if used + len(text) > budget:
                    text = text[: max(0, budget - used)]
                used += len(text)
            parts.append({"block_id": s["id"], "heading_path": json.loads(s["heading_path"]), "text": text,
                          "lines": [s["start_line"], s["end_line"]], "is_hit": s["id"] == item_id})
        return {"item_id": item_id, "source_kind": "markdown", "mode": mode, "source_path": b["source_path"],
                "blocks": parts, "truncated": used >= budget}
    m = store.get_memory(item_id)
    if m is None or not memory_visible(m, ctx, include_cold=True, include_deprecated=True, include_pending=True):
        raise NotFound(f"no memory {item_id} visible from this project",
                       hint="check the id with `mnemo list`, or switch to the project/branch it belongs to")
    related = []
    vec = store.vectors([item_id]).get(item_id)
    if vec is not None:
        import numpy as np

        q = np.frombuffer(vec, dtype=np.float32)
        res = recall(engine, ctx, m.text, limit=HYDRATE_RELATED_NOTES[mode] + 1, include_docs=(mode == "related"),
                     qvec=q)
        used = len(m.text)
        for card in res["cards"]:
            if card["item_id"] == item_id:
                continue
            used += len(card["compressed_summary"])
            if used > budget:
                break
            related.append(card)
    return {"item_id": item_id, "source_kind": "note", "mode": mode, "memory": m.to_dict(), "related": related}
