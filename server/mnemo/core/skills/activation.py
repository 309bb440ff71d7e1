"""Skill activation for (active file, user message): one calibrated decision, explained.

For every skill the evidence (:mod:`evidence`: glob match and its specificity, keyword hits, dense cosine, BM25,
their ranks) goes through a small logistic model (:mod:`decision`) that gives the probability that the skill
applies; a skill activates when that probability reaches ``threshold``, whatever kind of evidence it has, so a
description-only skill fires from meaning alone and a glob-only rule from its file. Every skill above the
threshold activates (up to ``max_skills``, most likely first): a request that needs two skills gets both. A
request that takes no skill over the threshold leaves the decision to the active file (its globs, as with no
message).
Always-apply rules (what their tool does) and skills named with ``@name`` are included regardless; manual rules
only when named. A skill whose file reads like a prompt injection is held until a person accepts it in Review.
The injected block keeps to ``token_budget`` by dropping the least likely skills first. The answer lists the
nearest misses with their probability and the threshold they missed.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from ..errors import InvalidInput
from ..text import tokenize
from .background import background_vectors
from .decision import FEATURES, coefficients, feature_matrix, probabilities, without_message
from .evidence import (
    Evidence,
    SkillIndex,
    clause_spans,
    dense_text,
    dense_views,
    glob_evidence,
    glob_specificity,
    keyword_evidence,
    semantic_evidence,
    split_name,
)
from .model import LoadReport, Skill
from .registry import SkillRegistry
from .result import (
    Activation,
    ActivationResult,
    apply_budget,
    build_activation,
    held_entry,
    hold_key,
    select,
    yield_starters,
)
from .vectors import VectorCache

__all__ = ["FEATURES", "FITTED_MODEL", "FITTED_THRESHOLD", "Activation", "ActivationConfig", "ActivationResult",
           "SkillEngine", "dense_text", "dense_views", "glob_specificity", "hold_key", "split_name"]

MAX_MESSAGE_CHARS = 20_000

# --- fitted: begin (written by `python bench/fit_activation.py --data ../shared/data --write`) ---
# Logistic model over decision.FEATURES and the activation threshold, fitted on tune data only: MetaTool awareness
# `split == "tune"` and the `tune` split of bench/data/activation_dev.jsonl (docs/benchmarks.md).
FITTED_MODEL: dict[str, float] = {
    "intercept": -8.1289, "message": -1.5517, "cos": 3.0313, "cos_gap": -2.6258, "cos_lead": 9.048,
    "part_cos": 8.7776, "part_gap": -7.3723, "bm25_log": 1.0927, "keyword": 4.7979, "lexical": 14.196,
    "background": -9.723, "glob": 6.0266, "glob_lit": 0.2409, "glob_shared": -0.4751, "glob_alone": 8.7207,
    "glob_catch": -1.5415, "glob_miss": -0.5255, "no_globs": 0.1919, "no_desc": 0.6247,
}
FITTED_THRESHOLD = 0.14
# --- fitted: end ---


@dataclass
class ActivationConfig:
    """Activation settings: the core's defaults, the one place the fitted model and threshold live (the editor
    mirrors ``max_skills`` and ``token_budget`` as ``mnemo.skills.maxActive`` / ``mnemo.skills.tokenBudget``)."""

    threshold: float = FITTED_THRESHOLD  # probability a skill must reach to activate
    model: dict = field(default_factory=lambda: dict(FITTED_MODEL))  # {feature: weight, "intercept": b}
    max_skills: int = 5  # not counting always-apply skills
    token_budget: int = 6000  # tokens of the injected block; the least likely skills are dropped first; 0 = none
    include_always: bool = True
    misses: int = 5  # nearest misses reported with their probability ("why not")
    rrf_k: int = 10  # fusion of the dense and BM25 rankings (the fused rank is one of the model's features)
    w_dense: float = 1.0
    w_bm25: float = 0.8
    candidates: int = 50  # depth of each ranking
    name_keywords: bool = True  # a skill's name mentioned in the message is a keyword hit ...
    name_hit_weight: float = 0.5  # ... worth half an explicit keyword (names are often common words)
    body_chars_bm25: int = 4000  # body prefix indexed by BM25
    body_chars_dense: int = 600  # body prefix embedded when the description is short
    query_words_dense: int = 64  # only the message's first words are embedded (bounds latency on long messages;
    #                              BM25 and keywords see all of it); 0 = no limit

    def __post_init__(self) -> None:
        try:
            self._w, self._b = coefficients(self.model)
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"skill activation model: {exc}") from exc
        if not 0.0 <= float(self.threshold) <= 1.0:
            raise InvalidInput(f"threshold must be a probability between 0 and 1, got {self.threshold!r}")
        if self.max_skills < 0 or self.token_budget < 0 or self.misses < 0:
            raise InvalidInput("max_skills, token_budget and misses must be >= 0")

    @classmethod
    def from_dict(cls, d: dict | None) -> ActivationConfig:
        d = d or {}
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise InvalidInput(f"unknown skill activation setting(s): {', '.join(unknown)}",
                               hint=f"known: {', '.join(sorted(names))}")
        defaults = cls()
        kw: dict[str, Any] = {}  # each value converted to its field's type below
        for k, v in d.items():
            typ = type(getattr(defaults, k))
            if typ is dict:
                if not isinstance(v, dict):
                    raise InvalidInput(f"setting {k} must be an object of feature weights, got {v!r}")
                kw[k] = {**defaults.model, **v}  # override some coefficients, keep the rest
                continue
            if typ is bool and isinstance(v, str):
                if v.strip().lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise InvalidInput(f"setting {k} must be true or false, got {v!r}")
                v = v.strip().lower() in ("true", "1", "yes")
            try:
                kw[k] = typ(v)
            except (TypeError, ValueError) as exc:
                raise InvalidInput(f"setting {k} must be {typ.__name__}, got {v!r}") from exc
        return cls(**kw)

    def to_dict(self) -> dict:
        return asdict(self)

    def weights(self) -> tuple[np.ndarray, float]:
        return self._w, self._b


class SkillEngine:
    """Activation over a :class:`SkillRegistry`. Thread-safe; rebuilds its index when the registry changes.
    ``accepted`` says whether a flagged skill (``Skill.flags``) was accepted in Review (default: never)."""

    def __init__(self, registry: SkillRegistry, embedder=None, config: ActivationConfig | None = None,
                 vector_cache: VectorCache | Path | str | None = None, auto_refresh: bool = True,
                 accepted: Callable[[Skill], bool] | None = None):
        self.registry = registry
        self._embedder = embedder
        self.config = config or ActivationConfig()
        self.vector_cache = vector_cache if isinstance(vector_cache, VectorCache) else VectorCache(vector_cache)
        self.auto_refresh = auto_refresh
        self.accepted = accepted
        self._index: SkillIndex | None = None
        self._background_vectors: np.ndarray | None = None
        self._lock = threading.RLock()
        self._last_refresh = 0.0
        self.refresh_interval = 1.0  # seconds between stat scans when auto_refresh (the watcher is faster)

    # -- plumbing --------------------------------------------------------------------------------------------
    @property
    def embedder(self):
        if self._embedder is None:
            from mnemo.core.embedding.embedder import get_embedder

            self._embedder = get_embedder()
        return self._embedder

    def skills(self) -> list[Skill]:
        return self.registry.skills()

    def check(self) -> LoadReport:
        """Reload every source and return the report (loaded skills and problems)."""
        return self.registry.load()

    def reload(self) -> LoadReport:
        rep = self.registry.load()
        self._ensure_index()
        return rep

    def held(self, skill: Skill) -> bool:
        return bool(skill.flags) and not (self.accepted is not None and self.accepted(skill))

    def maybe_refresh(self) -> None:
        if not self.auto_refresh:
            return
        now = time.monotonic()
        if now - self._last_refresh >= self.refresh_interval:
            self._last_refresh = now
            self.registry.refresh_if_changed()

    def _ensure_index(self) -> SkillIndex:
        idx = self._index
        if idx is not None and idx.version == self.registry.version:
            return idx
        with self._lock:
            version, skills = self.registry.snapshot()
            idx = self._index
            if idx is not None and idx.version == version:
                return idx
            idx = SkillIndex(skills, self._skill_vectors(skills), version, body_chars_bm25=self.config.body_chars_bm25,
                             name_keywords=self.config.name_keywords, background=self._background(skills))
            self._index = idx
            return idx

    def _background(self, skills: list[Skill]) -> np.ndarray | None:
        """The everyday requests' vectors (background.py), embedded once per engine; None without skills."""
        if not skills:
            return None
        if self._background_vectors is None:
            self._background_vectors = background_vectors(self.embedder, self.vector_cache)
        return self._background_vectors

    def _skill_vectors(self, skills: list[Skill]) -> np.ndarray:
        emb = self.embedder
        model = getattr(emb, "model_id", type(emb).__name__)
        dim = getattr(emb, "dim", 384)
        if not skills:
            return np.zeros((0, dim), dtype=np.float32)
        body_chars = self.config.body_chars_dense
        keys = [f"{s.content_hash}:v2:{body_chars}" for s in skills]
        have = self.vector_cache.get_many(model, keys)
        todo: dict[str, list[str]] = {}
        for k, s in zip(keys, skills, strict=True):
            if k not in have and k not in todo:
                todo[k] = dense_views(s, body_chars)
        if todo:
            flat = [t for views in todo.values() for t in views]
            vecs = np.asarray(emb.embed(flat), dtype=np.float32)
            new: dict[str, np.ndarray] = {}
            pos = 0
            for k, views in todo.items():
                c = vecs[pos:pos + len(views)].mean(axis=0)
                pos += len(views)
                new[k] = (c / max(float(np.linalg.norm(c)), 1e-12)).astype(np.float32)
            self.vector_cache.put_many(model, new)
            have.update(new)
        return np.stack([have[k] for k in keys]).astype(np.float32, copy=False)

    def warm(self) -> None:
        """Build the index now (embeds the skills) instead of on the first activation, and embed the conversation
        turns the context block measures a message against (cached in the store's home: once per model)."""
        from .background import CONVERSATION_TURNS

        self._ensure_index()
        self.text_vectors(list(CONVERSATION_TURNS))

    # -- paths -----------------------------------------------------------------------------------------------
    def _paths(self, file_path: str | None) -> tuple[str | None, str | None]:
        if not file_path:
            return None, None
        fp = str(file_path).replace("\\", "/")
        root = self.registry.project_root
        if os.path.isabs(fp) or (len(fp) > 2 and fp[1] == ":"):
            abs_p = os.path.normpath(fp).replace("\\", "/")
            rel = None
            if root is not None:
                try:
                    rel = PurePosixPath(abs_p).relative_to(root.as_posix()).as_posix()
                except ValueError:
                    rel = None
            return rel, abs_p
        rel = os.path.normpath(fp).replace("\\", "/")
        if rel.startswith("./"):
            rel = rel[2:]
        base = root.as_posix() if root is not None else os.getcwd().replace("\\", "/")
        return rel, f"{base.rstrip('/')}/{rel}"

    def _glob_hits(self, idx: SkillIndex, rel: str | None, abs_p: str | None) -> list[str | None]:
        key = (rel, abs_p)
        with idx.lock:
            hit = idx.glob_cache.get(key)
            if hit is not None:
                idx.glob_cache.move_to_end(key)
                return hit
        res = idx.match_globs(rel, abs_p)
        with idx.lock:
            idx.glob_cache[key] = res
            while len(idx.glob_cache) > 512:
                idx.glob_cache.popitem(last=False)
        return res

    def _query_vectors(self, idx: SkillIndex, message: str) -> np.ndarray:
        """The message's embedding (row 0) and one per part of it when it asks for several things (rows 1..),
        cached. An embedder that can pool parts from one forward pass (ONNX) does; others embed each part."""
        with idx.lock:
            v = idx.query_cache.get(message)
            if v is not None:
                idx.query_cache.move_to_end(message)
                return v
        spans = clause_spans(message)
        emb = self.embedder
        if spans and hasattr(emb, "embed_parts"):
            v = np.asarray(emb.embed_parts(message, spans), dtype=np.float32)
        else:
            v = np.asarray(emb.embed([message, *(message[a:b] for a, b in spans)]), dtype=np.float32)
        with idx.lock:
            idx.query_cache[message] = v
            while len(idx.query_cache) > 256:
                idx.query_cache.popitem(last=False)
        return v

    def _embedder_name(self) -> str:
        e = self._embedder
        return getattr(e, "model_id", "") if e is not None else ""

    # -- evidence and decision -------------------------------------------------------------------------------
    def evidence(self, file_path: str | None, message: str | None,
                 config: ActivationConfig | None = None) -> tuple[SkillIndex, Evidence]:
        """The evidence for every skill (what the model weighs); ``message`` already cleaned."""
        cfg = config or self.config
        idx = self._ensure_index()
        rel, abs_p = self._paths(file_path)
        ev = Evidence(len(idx.skills), message, rel, abs_p)
        if file_path and idx.distinct:
            glob_evidence(ev, idx, self._glob_hits(idx, rel, abs_p))
        if message and ev.n:
            qtok = tokenize(message)
            keyword_evidence(ev, idx, message, qtok, cfg.name_hit_weight)
            words = message.split()
            limit = cfg.query_words_dense
            dense_msg = " ".join(words[:limit]) if 0 < limit < len(words) else message
            vecs = self._query_vectors(idx, dense_msg)
            semantic_evidence(ev, idx, vecs[0], qtok, cfg.candidates, cfg.rrf_k, (cfg.w_dense, cfg.w_bm25), vecs[1:])
        return idx, ev

    def probabilities(self, file_path: str | None, message: str | None,
                      config: ActivationConfig | None = None) -> tuple[SkillIndex, Evidence, np.ndarray, np.ndarray]:
        """(index, evidence, feature matrix, probability per skill): the model's view, before any rule."""
        cfg = config or self.config
        idx, ev = self.evidence(file_path, message, cfg)
        X = feature_matrix(ev, idx)
        w, b = cfg.weights()
        p = probabilities(X, w, b)
        p[idx.manual & ~ev.mentioned] = 0.0  # manual rules attach only when named
        return idx, ev, X, p

    def activate(self, file_path: str | None = None, message: str | None = None, max_skills: int | None = None,
                 config: ActivationConfig | None = None, token_budget: int | None = None) -> ActivationResult:
        t0 = time.perf_counter()
        cfg = config or self.config
        if message is not None and not isinstance(message, str):
            raise InvalidInput("message must be a string")
        message = (message or "").strip()[:MAX_MESSAGE_CHARS] or None
        limit = cfg.max_skills if max_skills is None else int(max_skills)
        budget = cfg.token_budget if token_budget is None else int(token_budget)
        if limit < 0:
            raise InvalidInput("max_skills must be >= 0")
        if budget < 0:
            raise InvalidInput("token_budget must be >= 0 (0: no budget)")
        self.maybe_refresh()
        idx, ev, X, p = self.probabilities(file_path, message, cfg)
        held = idx.flagged.copy()
        for i in np.flatnonzero(idx.flagged):
            held[i] = self.held(idx.skills[i])
        forced = ((idx.always & cfg.include_always) | ev.mentioned) & ~held
        chosen, misses = select(idx, p, forced, held, cfg.threshold, limit, cfg.misses, ev.glob_lit, ev.mentioned)
        w, _b = cfg.weights()
        by_file = self._file_decides(idx, ev, X, forced, held, chosen, misses, limit, cfg)
        if by_file is not None:  # the request chose no skill: the file decides, as its tool would
            ev, X, p, chosen, misses = by_file
        chosen, yielded, stand_in = yield_starters(idx, ev, p, chosen, forced, held, cfg.threshold)
        acts = [build_activation(idx, ev, X, w, p, i, bool(forced[i]), by_file is not None) for i in chosen]
        for a in acts:
            if a.skill_id in stand_in:
                a.reason = stand_in[a.skill_id] + "; " + a.reason
        spent = apply_budget(acts, budget)
        misses = yielded + [m for m in misses if m["skill_id"] not in {y["skill_id"] for y in yielded}]
        return ActivationResult(
            acts, file_path, message, len(idx.skills), misses, (time.perf_counter() - t0) * 1000, idx.version,
            self._embedder_name(), cfg.threshold, [held_entry(idx.skills[i]) for i in np.flatnonzero(held)],
            spent)

    def _file_decides(self, idx: SkillIndex, ev: Evidence, X: np.ndarray, forced: np.ndarray, held: np.ndarray,
                      chosen: list[int], misses: list[dict], limit: int, cfg: ActivationConfig):
        """With an active file and a message that takes no skill over the threshold and names none (too short or
        vague to choose: "add a healthcheck" in a Dockerfile), the request is about the file: decide as with no
        message, so a skill whose specific glob matches the file fires, as Cursor's auto-attached rules and
        Copilot's ``applyTo`` do. None when the message chose a skill or no specific glob matches the file;
        else (file evidence, X, p, chosen, misses: the message's nearest misses that did not fire now)."""
        if not (ev.message and ev.n_glob) or ev.mentioned.any() or any(not forced[i] for i in chosen):
            return None
        Xf = without_message(X, ev)
        w, b = cfg.weights()
        fp = np.where(ev.glob > 0, probabilities(Xf, w, b), 0.0)  # what the file itself says
        fp[idx.manual] = 0.0
        fchosen, _ = select(idx, fp, forced, held, cfg.threshold, limit, 0, ev.glob_lit, ev.mentioned)
        if all(forced[i] for i in fchosen):
            return None
        ids = {idx.skills[i].id for i in fchosen}
        return replace(ev, message=None), Xf, fp, fchosen, [m for m in misses if m["skill_id"] not in ids]

    # -- vectors for the context block's sections (core/agent/context_block.py) -------------------------------------------
    def message_vector(self, message: str) -> np.ndarray | None:
        """The request's embedding as activation computed it (cached), or None without a message."""
        message = (message or "").strip()[:MAX_MESSAGE_CHARS]
        if not message:
            return None
        words = message.split()
        limit = self.config.query_words_dense
        dense_msg = " ".join(words[:limit]) if 0 < limit < len(words) else message
        return self._query_vectors(self._ensure_index(), dense_msg)[0]

    def text_vectors(self, texts: list[str], wait: bool = True) -> np.ndarray | None:
        """Unit vectors of ``texts`` (a rule's sections), cached by content like the skills' own vectors. With
        ``wait`` False (a hook, bounded in time) texts not cached yet are embedded in the background for the next
        call and None is returned now."""
        import hashlib

        emb = self.embedder
        model = getattr(emb, "model_id", type(emb).__name__)
        keys = ["sec:" + hashlib.sha256(t.encode("utf-8", "replace")).hexdigest()[:24] for t in texts]
        have = self.vector_cache.get_many(model, keys)
        todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in have}

        def embed() -> dict[str, np.ndarray]:
            vecs = np.asarray(emb.embed(list(todo.values())), dtype=np.float32)
            vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
            new = dict(zip(todo, vecs, strict=True))
            self.vector_cache.put_many(model, new)
            return new

        if todo and not wait:
            threading.Thread(target=embed, name="mnemo-section-vectors", daemon=True).start()
            return None
        if todo:
            have.update(embed())
        return np.stack([have[k] for k in keys]).astype(np.float32, copy=False)

    def conversation_score(self, message: str, wait: bool = True) -> float | None:
        """How much ``message`` reads as a turn of the conversation rather than a request ("continue", "looks
        good", "undo that"): its mean cosine to the nearest of :data:`background.CONVERSATION_TURNS` (embedded
        once, cached like sections). None without a message, or with ``wait`` False while they are being embedded."""
        from .background import CONVERSATION_NEAREST, CONVERSATION_TURNS

        qv = self.message_vector(message)
        if qv is None:
            return None
        turns = self.text_vectors(list(CONVERSATION_TURNS), wait)
        if turns is None:
            return None
        near = np.sort(np.asarray(turns, dtype=np.float32) @ np.asarray(qv, dtype=np.float32))
        return float(near[-CONVERSATION_NEAREST:].mean())

    def rank(self, message: str, k: int = 3, file_path: str | None = None) -> list[Skill]:
        """The top-k skills by probability with no threshold (benchmarks: the ranking alone)."""
        cfg = ActivationConfig(**{**self.config.to_dict(), "threshold": 0.0, "max_skills": k,
                                  "include_always": False, "token_budget": 0})
        res = self.activate(file_path, message, max_skills=k, config=cfg)
        by_id = {s.id: s for s in self._ensure_index().skills}
        return [by_id[a.skill_id] for a in res.activations]
