"""Compaction: near-duplicates merged into the strongest one (their confirmations summed), verbose notes replaced
by an extractive summary (the original stays in history), tiers re-chosen; every move reported with its reason.
A pair a person decided to keep apart is never merged, and two close notes that state different facts
("PostgreSQL 14" / "PostgreSQL 16") are not the same claim (core/relation/compare.py)."""

from __future__ import annotations

import dataclasses
import re
import time
import uuid
from typing import TYPE_CHECKING, Any

from mnemo.core.api_types.results import CompactReport
from mnemo.core.cards import key_points, summarize
from mnemo.core.lifecycle.decay import retier, tier_counts
from mnemo.core.models import Context, Memory
from mnemo.core.policy import Settings, settings
from mnemo.core.relation import compare as relation
from mnemo.core.text import content_hash

if TYPE_CHECKING:
    from mnemo.core.engine import Engine
    from mnemo.core.store import Store

Merge = tuple[Memory, list[tuple[Memory, float]]]  # the keeper, and the memories it absorbs with their cosine


def summarize_verbose(text: str, limit: int) -> str:
    """Extractive summary: the first sentence plus key points, within `limit` characters."""
    flat = " ".join(text.split())
    first = re.split(r"(?<=[.!?])\s+", flat, maxsplit=1)[0]
    out = summarize(first, limit)
    for kp in key_points(text, 5):
        if kp in out:
            continue
        cand = out + ("; " if out and not out.endswith((".", ":")) else " ") + kp
        if len(cand) > limit:
            break
        out = cand
    return out


def compact(engine: Engine, ctx: Context) -> CompactReport:
    """Merge near-duplicates (adding their confirmations), summarize verbose notes, re-tier; report what moved."""
    s = settings()
    store = engine.store
    mems = store.live_memories(ctx.project_id)
    merges = near_duplicates(engine, mems, s)
    touched = {k.id for k, _ in merges} | {m.id for _, took in merges for m, _ in took}
    summaries = []
    for m in mems:
        if m.id not in touched and len(m.text) > s.verbose_chars:
            short = summarize_verbose(m.text, s.summary_chars)
            if short and len(short) < len(m.text):
                summaries.append((m, short))
    vecs = engine.embed([t for _, t in summaries]) if summaries else []
    now = time.time()
    with store.write() as c:
        merged = _merge(c, store, merges, now)
        summarized = _summarize(c, engine, list(zip(summaries, vecs, strict=True)), s, now)
        tier_moves = retier(c, store, ctx)
    engine.changed()
    return {"merged": merged, "summarized": summarized, "tier_moves": tier_moves, "tiers": tier_counts(engine, ctx)}


def near_duplicates(engine: Engine, mems: list[Memory], s: Settings) -> list[Merge]:
    """Within one (scope, project, branch, type): each memory, strongest first, absorbs the not yet absorbed ones
    at cosine >= the threshold that state the same claim and that no decision keeps apart from it."""
    groups: dict[tuple, list[Memory]] = {}
    for m in mems:
        groups.setdefault((m.scope, m.project_id, m.branch, m.type), []).append(m)
    keep_both = engine.store.kept_apart_pairs()
    vocab = relation.vocabulary_of(engine.embedder)
    merges: list[Merge] = []
    absorbed: set[str] = set()
    for group in groups.values():
        if len(group) < 2:
            continue
        group.sort(key=lambda m: (-m.confirmations, -m.importance, m.created_at, m.id))
        ids, mat = _vectors(engine.store, [m.id for m in group])
        by_id = {m.id: m for m in group}
        pos = {i: k for k, i in enumerate(ids)}
        for keeper in group:
            if keeper.id in absorbed or keeper.id not in pos:
                continue
            absorbed.add(keeper.id)  # processed: a later (weaker) keeper never absorbs it
            took = _absorb(keeper, mat @ mat[pos[keeper.id]], ids, by_id, absorbed, keep_both, vocab, s)
            if took:
                merges.append((keeper, took))
    return merges


def _absorb(keeper: Memory, sims, ids: list[str], by_id: dict[str, Memory], absorbed: set[str],
            keep_both: set[frozenset], vocab: frozenset[str], s: Settings) -> list[tuple[Memory, float]]:
    import numpy as np  # heavy third-party: only when something is compacted

    took: list[tuple[Memory, float]] = []
    for j in np.argsort(-sims, kind="stable"):
        other_id = ids[int(j)]
        sim = float(sims[int(j)])
        if sim < s.compact_dup_threshold:
            break
        if other_id in absorbed or any(frozenset((x, other_id)) in keep_both
                                       for x in [keeper.id, *(m.id for m, _ in took)]):
            continue
        # close is not enough: "PostgreSQL 14" / "PostgreSQL 16" is a contradiction, never merged
        if not relation.same_claim(keeper.text, by_id[other_id].text, sim, vocab):
            continue
        took.append((by_id[other_id], sim))
        absorbed.add(other_id)
    return took


def _vectors(store: Store, ids: list[str]):
    """The ids that have a stored vector, and those vectors as the rows of a matrix."""
    import numpy as np

    blobs = store.vectors(ids)
    keep = [i for i in ids if i in blobs]
    if not keep:
        return keep, np.zeros((0, 0), dtype=np.float32)
    mat = np.frombuffer(b"".join(blobs[i] for i in keep), dtype=np.float32).reshape(len(keep), -1)
    return keep, mat


def _merge(c, store: Store, merges: list[Merge], now: float) -> list[dict[str, Any]]:
    out = []
    for keeper, took in merges:
        cur = store.get_memory(keeper.id)
        if cur is None or cur.superseded_by:
            continue
        conf = cur.confirmations + sum(m.confirmations for m, _ in took)
        imp = max([cur.importance] + [m.importance for m, _ in took])
        prov = dict(cur.provenance)
        prov["merged_from"] = sorted(set(prov.get("merged_from", [])) | {m.id for m, _ in took})
        store.update_memory(c, keeper.id, confirmations=conf, importance=imp, provenance=prov, updated_at=now)
        for m, _sim in took:
            store.update_memory(c, m.id, reindex=True, superseded_by=keeper.id, updated_at=now)
        out.append({"kept": keeper.id, "title": summarize(keeper.text, 60), "merged": [m.id for m, _ in took],
                    "confirmations": conf,
                    "reason": "near-duplicates (cosine " + ", ".join(f"{sim:.2f}" for _, sim in took) + ")"})
    return out


def _summarize(c, engine: Engine, summaries: list, s: Settings, now: float) -> list[dict[str, Any]]:
    store, out = engine.store, []
    for (m, short), vec in summaries:
        prov = dict(m.provenance)
        prov["summarized_from"] = m.id
        new = dataclasses.replace(
            m, id="mem-" + uuid.uuid4().hex[:20], text=short, content_hash=content_hash(short), provenance=prov,
            updated_at=now, source=m.source)
        store.insert_memory(c, new, vec, engine.model_id)
        store.update_memory(c, m.id, reindex=True, superseded_by=new.id, updated_at=now)
        out.append({"from": m.id, "to": new.id, "chars_before": len(m.text), "chars_after": len(short),
                    "reason": f"longer than {s.verbose_chars} characters"})
    return out
