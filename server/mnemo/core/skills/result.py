"""What an activation answers: the activated skills with why (:class:`Activation`), the whole answer with the
nearest misses, held skills and the token budget (:class:`ActivationResult`), and the rules that build it from the
probabilities (selection, token budget, explanations)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from .decision import contributions
from .evidence import Evidence, SkillIndex
from .model import Skill


@dataclass
class Activation:
    skill_id: str
    name: str
    description: str
    source_path: str
    source_format: str
    scope: str
    score: float  # probability that the skill applies (1.0 for always-apply and named skills)
    activated_by: list[str]
    signals: dict[str, float]
    matched: dict[str, object]
    token_cost: int
    always: bool
    reason: str
    tools_allowed: list[str] = field(default_factory=list)
    injected: bool = True  # False: active, but left out of the injected block by the token budget
    published: bool = False  # a file `mnemo publish` wrote: active for its paths, never injected (no loop)
    body: str = field(default="", repr=False)  # the skill text, for the prompt block (not in to_dict)

    def to_dict(self, body: bool = False) -> dict:
        d = asdict(self)
        if not body:
            d.pop("body")
        return d


@dataclass
class ActivationResult:
    activations: list[Activation]
    file_path: str | None
    message: str | None
    considered: int
    dropped: list[dict]  # nearest misses: {skill_id, name, score, threshold, why}
    elapsed_ms: float
    registry_version: int
    embedder: str
    threshold: float = 0.0  # the probability a skill had to reach
    held: list[dict] = field(default_factory=list)  # skills held for review (never injected until accepted)
    budget: dict = field(default_factory=dict)  # {tokens, used, dropped: [...]} when the budget left skills out

    @property
    def total_tokens(self) -> int:
        """Tokens of the injected block's skills (the ones the token budget kept)."""
        return sum(a.token_cost for a in self.activations if a.injected)

    def injected(self) -> list[Activation]:
        return [a for a in self.activations if a.injected]

    def names(self) -> list[str]:
        return [a.name for a in self.activations]

    def to_dict(self) -> dict:
        return {
            "file_path": self.file_path,
            "message": self.message,
            "activations": [a.to_dict() for a in self.activations],
            "total_tokens": self.total_tokens,
            "threshold": self.threshold,
            "considered": self.considered,
            "dropped": self.dropped,
            "held": self.held,
            "budget": self.budget,
            "elapsed_ms": round(self.elapsed_ms, 3),
            "registry_version": self.registry_version,
            "embedder": self.embedder,
        }


def hold_key(skill: Skill) -> str:
    """What a person accepts in Review: this file with this content (an edit holds it again)."""
    return f"{skill.source_path}#{skill.content_hash}"


def select(idx: SkillIndex, p: np.ndarray, forced: np.ndarray, held: np.ndarray, threshold: float, limit: int,
            n_misses: int, specificity: np.ndarray, mentioned: np.ndarray) -> tuple[list[int], list[dict]]:
    """Skills named in the message; then every skill at or above the threshold, most likely first (on a tie the
    more specific glob, then the name), up to ``limit``; then the always-apply rules (the general context, after
    what is specific to this file and request); and the nearest misses with why each one did not activate."""
    free = np.flatnonzero(~forced & ~held)
    above = free[p[free] >= threshold]
    above = above[np.lexsort((idx.name_rank[above], -specificity[above], -np.round(p[above], 6)))]
    below = free[p[free] < threshold]
    k = min(n_misses, below.size)
    if k:
        below = below[np.argpartition(-p[below], k - 1)[:k]] if below.size > k else below
        below = below[np.lexsort((idx.name_rank[below], -p[below]))]
    forced_i = np.flatnonzero(forced)
    forced_i = forced_i[np.lexsort((idx.name_rank[forced_i], ~mentioned[forced_i]))]
    named = [int(i) for i in forced_i if mentioned[i]]
    chosen = named + [int(i) for i in above[:limit]] + [int(i) for i in forced_i if not mentioned[i]]
    misses = []
    for i in [*above[limit:limit + n_misses], *below[:k]][:n_misses]:
        s = idx.skills[int(i)]
        why = (f"max_skills {limit} reached" if p[i] >= threshold
               else f"probability {p[i]:.2f} < threshold {threshold:.2f}")
        misses.append({"skill_id": s.id, "name": s.name, "score": round(float(p[i]), 4),
                       "threshold": threshold, "why": why, "source_path": s.source_path})
    return chosen, misses


# The override order, most specific first: a project's own rule before a person's, a team's, then Mnemo's starter
# skills (scope ``builtin``; ``extra`` folders rank with the team's). Skills have no branch scope; memories do
# (docs/agents-and-teams.md, "What goes into a block").
SCOPE_ORDER = ("branch", "project", "user", "team", "extra", "builtin")
SCOPE_WORDS = {"branch": "the branch's", "project": "the project's", "user": "your", "team": "the team's",
               "extra": "the team's"}
YIELD_TOPIC_COSINE = 0.62   # a starter skill and a rule this close in meaning cover the same topic ...
YIELD_FILE_COSINE = 0.50    # ... or this close when both rules' own globs match the file at hand (on the tune
#                             half, 0.45 let the starter `testing` yield to an error-handling rule: 0.46 apart)
YIELD_REQUEST_GAP = 0.10    # a rule takes a starter skill's place when it is about as close to the request


def yield_starters(idx: SkillIndex, ev: Evidence, p: np.ndarray, chosen: list[int], forced: np.ndarray,
                   held: np.ndarray, threshold: float = 0.0) -> tuple[list[int], list[dict], dict[str, str]]:
    """Specific before generic: a starter skill (Mnemo's fallback) that activated yields when the project or the
    person has a rule of its own for the same files (both globs match the file, and the rules are related) or
    the same topic (their meanings are close). The rule takes the starter's place when it did not activate itself
    and is about as close to the request. Returns (chosen, the yields as nearest misses, {stand-in id: reason})."""
    if not any(idx.skills[i].scope == "builtin" for i in chosen) or idx.vectors.shape[0] != len(idx.skills):
        return chosen, [], {}                      # no starter skill chose itself: nothing to yield (the usual case)
    scopes = [s.scope for s in idx.skills]
    own = np.flatnonzero(np.asarray([sc != "builtin" for sc in scopes]) & ~held & ~idx.manual)
    if not own.size:
        return chosen, [], {}
    out: list[int] = []
    yielded: list[dict] = []
    stand_in: dict[str, str] = {}
    taken = set(chosen)
    for i in chosen:
        s = idx.skills[i]
        if s.scope != "builtin" or ev.mentioned[i]:
            if i not in out:
                out.append(i)
            continue
        cos = idx.vectors[own] @ idx.vectors[i]
        same_file = (ev.glob[own] > 0) & (ev.glob[i] > 0)
        ok = (cos >= YIELD_TOPIC_COSINE) | (same_file & (cos >= YIELD_FILE_COSINE))
        if not ok.any():
            out.append(i)
            continue
        cand = own[ok]
        rank = [(j not in taken, SCOPE_ORDER.index(scopes[j]) if scopes[j] in SCOPE_ORDER else 9,
                 -float(same_file[ok][n]), -float(cos[ok][n])) for n, j in enumerate(cand)]
        order = [int(cand[n]) for n in sorted(range(len(cand)), key=lambda n: rank[n])]
        winner = next((j for j in order if j in taken), None)
        if winner is None and ev.message:
            winner = next((j for j in order if ev.cos[j] >= ev.cos[i] - YIELD_REQUEST_GAP), None)
        elif winner is None:
            winner = order[0]
        if winner is None:
            out.append(i)
            continue
        w = idx.skills[winner]
        whose = SCOPE_WORDS.get(w.scope, "the project's")
        why = "same files" if same_file[ok][list(cand).index(winner)] else "same topic"
        yielded.append({"skill_id": s.id, "name": s.name, "score": round(float(p[i]), 4), "threshold": threshold,
                        "why": f"yields to {whose} `{w.name}` rule ({why})", "source_path": s.source_path,
                        "yields_to": w.id, "yields_to_name": w.name, "yields_to_path": w.source_path})
        if winner not in taken:
            taken.add(winner)
            out.append(winner)
            stand_in[w.id] = f"{whose} own rule, in place of the starter skill `{s.name}`"
    return out, yielded, stand_in


def apply_budget(acts: list[Activation], budget: int) -> dict:
    """Keep the injected block within ``budget`` tokens: the least likely skills are left out first (their
    ``injected`` turns False; they stay active and listed). Returns what was left out ({} when nothing)."""
    total = sum(a.token_cost for a in acts if a.injected)
    if budget <= 0 or total <= budget:
        return {}
    dropped: list[Activation] = []
    for a in sorted((a for a in acts if a.injected), key=lambda a: a.score):  # least likely first (stable)
        if total <= budget:
            break
        a.injected = False
        dropped.append(a)
        total -= a.token_cost
    return {"tokens": budget, "used": total, "dropped": [
        {"skill_id": a.skill_id, "name": a.name, "score": a.score, "token_cost": a.token_cost,
         "source_path": a.source_path, "why": f"token budget {budget}: ~{a.token_cost} tokens, less likely"}
        for a in dropped]}


def held_entry(s: Skill) -> dict:
    flags = ", ".join(f.split(":", 1)[-1] for f in s.flags)
    return {"skill_id": s.id, "name": s.name, "source_path": s.source_path, "flags": list(s.flags),
            "hold_key": hold_key(s), "why": f"held for review: reads like a prompt injection ({flags}); "
                                            "accept it with `mnemo review` to activate it"}


FILE_DECIDES = "the request chose no skill, so the file decides"   # an Activation's reason starts so (core/agent/context_block.py)


def build_activation(idx: SkillIndex, ev: Evidence, X: np.ndarray, w: np.ndarray, p: np.ndarray, i: int,
                     forced: bool, file_decides: bool = False) -> Activation:
    """One activated skill with why; ``file_decides``: the request chose no skill and the file's globs decided."""
    s = idx.skills[i]
    by: list[str] = []
    if forced and s.always_apply:
        by.append("always")
    if ev.glob[i] > 0 or ev.glob_catch[i] > 0:
        by.append("glob")
    if ev.kw[i] > 0 or ev.mentioned[i]:
        by.append("keyword")
    if ev.message and (0 < ev.dense_rank[i] <= 5 or 0 < ev.bm25_rank[i] <= 5):
        by.append("semantic")
    signals = {"glob": float(ev.glob[i] or ev.glob_catch[i]), "glob_specificity": round(float(ev.glob_lit[i]), 4),
               "keyword": round(float(ev.kw[i]), 4), "probability": round(float(p[i]), 4)}
    matched: dict[str, object] = {}
    if "glob" in by:
        matched["glob"] = ev.hits[int(idx.slot[i])]
        matched["glob_mode"] = s.glob_mode
        matched["glob_catch_all"] = bool(ev.glob_catch[i])
        if ev.glob[i] > 0 and ev.n_glob > 1:
            matched["glob_shared_by"] = ev.n_glob
    if i in ev.kw_hits:
        matched["keywords"] = [label for _k, label in ev.kw_hits[i]]
    if ev.message:
        signals.update(cosine=round(float(ev.cos[i]), 4), bm25=round(float(ev.bm25[i]), 4),
                       lexical=round(float(ev.lexical[i]), 4), background=round(ev.background, 4))
        for key, arr in (("dense_rank", ev.dense_rank), ("bm25_rank", ev.bm25_rank), ("fused_rank", ev.fused_rank)):
            if arr[i] > 0:
                matched[key] = int(arr[i])
    if not forced:
        matched["contributions"] = contributions(X[i], w)  # each feature's share of the log-odds
    reason = _reason(s, by, signals, matched, ev.rel or ev.abs_path, forced, file_decides)
    if ev.mentioned[i]:
        reason = "mentioned by name; " + reason
    if s.published:
        reason += "; published by Mnemo from its memories (delivered as memories, not injected again)"
    elif file_decides and not forced:
        reason = FILE_DECIDES + "; " + reason
    return Activation(
        skill_id=s.id, name=s.name, description=s.description, source_path=s.source_path,
        source_format=s.source_format, scope=s.scope, score=1.0 if forced else round(float(p[i]), 4),
        activated_by=by or (["always"] if forced else []), signals=signals, matched=matched,
        token_cost=s.token_cost, always=bool(s.always_apply and forced), reason=reason,
        tools_allowed=list(s.tools_allowed), body=s.body, published=s.published, injected=not s.published)


def _reason(s: Skill, by: list[str], signals: dict[str, float], matched: dict[str, object], path: str | None,
            forced: bool, file_decides: bool = False) -> str:
    parts: list[str] = []
    if "always" in by:
        parts.append(f"always applies ({s.source_format})")
    if not forced:
        parts.append(f"probability {signals['probability']:.2f}")
    if "glob" in by:
        pat = matched.get("glob")
        if matched.get("glob_catch_all"):
            parts.append(f"glob {pat!r} matches every file (says little)")
        else:
            shared = matched.get("glob_shared_by")
            parts.append(f"glob {pat!r} matched {path} ({s.glob_mode} semantics"
                         + (f"; {shared} skills match this file, the request decides)" if shared and not file_decides
                            else ")"))
    keywords = matched.get("keywords")  # the list _result builds (its only caller)
    if "keyword" in by and isinstance(keywords, list) and keywords:
        parts.append("keywords: " + ", ".join(str(k) for k in keywords))
    if "cosine" in signals and ("semantic" in by or not parts):
        det = []
        if "dense_rank" in matched:
            det.append(f"dense #{matched['dense_rank']}")
        if "bm25_rank" in matched:
            det.append(f"bm25 #{matched['bm25_rank']}")
        parts.append(f"meaning: cosine {signals['cosine']:.2f}" + (f" ({', '.join(det)})" if det else ""))
    return "; ".join(parts) or "no signal"
