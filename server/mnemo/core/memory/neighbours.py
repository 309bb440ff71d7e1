"""How a new memory relates to the visible memories near it, on every level of the chain branch > project > team >
global: the same claim (a paraphrase or a refinement), a contradiction of a memory at its own level (a conflict)
or of a more general one (an override), or another fact. The decision per pair is core/relation/compare.py's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mnemo.core.api_types.records import Conflict
from mnemo.core.models import Context, Memory
from mnemo.core.policy import settings
from mnemo.core.relation import compare as relation
from mnemo.core.search import nearest_memories
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


def neighbours(engine: Engine, ctx: Context, vec, k: int = 10) -> list[tuple[Memory, float]]:
    """Visible memories nearest to `vec` on every level: this project (and branch), global, and the team server
    (when one is configured and answers); the most similar first, the most specific first on ties."""
    out = nearest_memories(engine, ctx, vec, k) + team_neighbours(engine, ctx, vec, k)
    out.sort(key=lambda ms: (-round(ms[1], 4), -specificity(ms[0], ctx), ms[0].id))
    return out


def relate(engine: Engine, ctx: Context, mem: Memory, vec, threshold: float | None = None) -> list[Found]:
    """How the new memory relates to the visible memories near it (cosine >= threshold) on every level
    (core/relation/compare.py): a contradiction is a `conflict`, or an `override` of a more general memory; the same claim
    (a paraphrase, a refinement) is a `duplicate` of a memory at its own level or a more general one. Other
    nearby memories are other facts and are not returned."""
    thr = settings().conflict_threshold if threshold is None else threshold
    cands = [(m, sim) for m, sim in neighbours(engine, ctx, vec, k=10)
             if sim >= thr and m.id != mem.id and not (m.scope == "project" and m.project_id != mem.project_id)]
    if not cands:
        return []
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

