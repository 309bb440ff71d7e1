"""Skill activation for (active file, user message): glob + keyword + semantic (dense + BM25, RRF), explained.

Signals (each 0..1):

- ``glob``: 0.85..1.0 when one of the skill's globs matches the file with the semantics of the skill's own tool
  (:mod:`globs`), more for more specific patterns (``**/test_*.py`` over ``**/*.py``);
  ``catch_all_glob_score`` when the match is a catch-all such as ``**/*`` (it says nothing about the file);
  0 otherwise.
- ``keyword``: frontmatter ``keywords``, trigger clauses from the description ("Use when ..."), and the skill's
  name mentioned in the message; ``1 - 0.5 ** hits`` (a name mention counts half).
- ``semantic``: dense cosine (MiniLM) and BM25 over name, description, keywords and body, fused by RRF; the fused
  rank score is scaled by an absolute relevance gate on the dense cosine, so an unrelated message scores ~0 even
  for the top-ranked skill.

``score = (w_glob*glob + w_keyword*keyword + w_semantic*semantic) * importance_factor``; then the minimum score,
the gap filter (``score >= gap_ratio * best``) and ``max_skills``. Always-apply skills are always included (they
are what their tool does) and do not count against ``max_skills``.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from functools import lru_cache
from pathlib import Path, PurePosixPath

import numpy as np

from ..errors import InvalidInput
from ..text import BM25, STOPWORDS, rrf, tokenize
from .globs import GlobMatcher, matcher_for
from .model import LoadReport, Skill
from .registry import SkillRegistry
from .vectors import VectorCache

MAX_MESSAGE_CHARS = 20_000
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_CLAUSE_SPLIT = re.compile(r",|;|\band/or\b|\bor\b|\band\b", re.IGNORECASE)
_MD_NOISE = re.compile(r"```.*?```|`[^`]*`|[#>*_|\[\]()-]+", re.DOTALL)


@dataclass
class ActivationConfig:
    """Activation settings (mirrored in the editor settings as ``mnemo.skills.*``)."""

    w_glob: float = 0.45
    w_keyword: float = 0.25
    w_semantic: float = 0.30
    min_score: float = 0.2
    gap_ratio: float = 0.5  # keep a skill only if score >= gap_ratio * best score (0 disables)
    max_skills: int = 5  # not counting always-apply skills
    include_always: bool = True
    catch_all_glob_score: float = 0.3
    semantic_fire: float = 0.3  # a semantic score at least this much is reported as "semantic" in activated_by
    rrf_k: int = 10  # tuned on a held-out MetaTool split (never the benchmark sample)
    w_dense: float = 1.0  # RRF weights of the two semantic rankings
    w_bm25: float = 0.8
    rrf_share: float = 0.6  # semantic = gate(cosine) * ((1 - rrf_share) + rrf_share * normalized RRF)
    candidates: int = 50  # depth of each semantic ranking fused by RRF
    dense_floor: float = 0.15  # cosine at or below which the semantic gate is 0
    dense_full: float = 0.6  # cosine at or above which the semantic gate is 1
    name_keywords: bool = True  # a skill's name mentioned in the message is a keyword hit ...
    name_hit_weight: float = 0.5  # ... worth half an explicit keyword (names are often common words)
    body_chars_bm25: int = 4000  # body prefix indexed by BM25
    body_chars_dense: int = 600  # body prefix embedded when the description is short
    query_words_dense: int = 64  # only the message's first words are embedded (bounds latency on long messages;
    #                              BM25 and keywords see all of it); 0 = no limit

    @classmethod
    def from_dict(cls, d: dict | None) -> ActivationConfig:
        d = d or {}
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise InvalidInput(f"unknown skill activation setting(s): {', '.join(unknown)}",
                               hint=f"known: {', '.join(sorted(names))}")
        cfg = cls()
        for k, v in d.items():
            typ = type(getattr(cfg, k))
            if typ is bool and isinstance(v, str):
                if v.strip().lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise InvalidInput(f"setting {k} must be true or false, got {v!r}")
                v = v.strip().lower() in ("true", "1", "yes")
            try:
                setattr(cfg, k, typ(v))
            except (TypeError, ValueError) as exc:
                raise InvalidInput(f"setting {k} must be {typ.__name__}, got {v!r}") from exc
        return cfg

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Activation:
    skill_id: str
    name: str
    description: str
    source_path: str
    source_format: str
    scope: str
    score: float
    activated_by: list[str]
    signals: dict[str, float]
    matched: dict[str, object]
    token_cost: int
    always: bool
    reason: str
    tools_allowed: list[str] = field(default_factory=list)
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
    dropped: list[dict]  # near misses: {skill_id, name, score, why}
    elapsed_ms: float
    registry_version: int
    embedder: str

    @property
    def total_tokens(self) -> int:
        return sum(a.token_cost for a in self.activations)

    def names(self) -> list[str]:
        return [a.name for a in self.activations]

    def to_dict(self) -> dict:
        return {
            "file_path": self.file_path,
            "message": self.message,
            "activations": [a.to_dict() for a in self.activations],
            "total_tokens": self.total_tokens,
            "considered": self.considered,
            "dropped": self.dropped,
            "elapsed_ms": round(self.elapsed_ms, 3),
            "registry_version": self.registry_version,
            "embedder": self.embedder,
        }


@lru_cache(maxsize=4096)
def glob_specificity(pattern: str) -> float:
    """Glob signal of a matched pattern: 0.85 for a bare extension (``**/*.py``) up to 1.0 for a pattern with 16+
    literal characters (``src/lib/router.ts``), so the more specific rule wins a tie."""
    lit = sum(1 for ch in pattern if ch not in "*?[]{}()!@+|/,\\")
    return round(0.85 + 0.15 * min(1.0, max(0, lit - 2) / 14), 4)


def split_name(name: str) -> str:
    """``ResearchHelper`` / ``python-testing`` / ``api_docs`` -> space separated words."""
    return " ".join(_CAMEL.sub(" ", name).replace("-", " ").replace("_", " ").replace(".", " ").split())


def _plain(text: str, limit: int) -> str:
    return " ".join(_MD_NOISE.sub(" ", text[: limit * 2]).split())[:limit]


def dense_text(skill: Skill, body_chars: int = 600) -> str:
    parts = [split_name(skill.name)]
    if skill.description:
        parts.append(skill.description)
    if skill.keywords:
        parts.append("Keywords: " + ", ".join(skill.keywords))
    text = ". ".join(p.strip().rstrip(".") for p in parts if p.strip())
    if len(skill.description) < 200 and skill.body and body_chars > 0:
        text += ". " + _plain(skill.body, body_chars)
    return text


def dense_views(skill: Skill, body_chars: int = 600) -> list[str]:
    """Texts embedded for a skill; its vector is their normalized centroid. Several views of one skill (the
    full card, the bare description, a request-style phrasing) average out wording and move the vector towards
    what the skill is about; measured on a held-out MetaTool split: +2 points top-1 over the card alone."""
    card = dense_text(skill, body_chars)
    about = skill.description or _plain(skill.body, body_chars) or split_name(skill.name)
    return [card, f"{split_name(skill.name)}: {about}", about, f"Can you help me? {about}"]


def bm25_tokens(skill: Skill, body_chars: int = 4000) -> list[str]:
    name_toks = tokenize(split_name(skill.name))
    return (name_toks * 2 + tokenize(skill.description) + tokenize(" ".join(skill.keywords))
            + tokenize(" ".join(skill.triggers)) + tokenize(skill.body[:body_chars]))


@dataclass
class _Spec:
    kind: str  # keyword | trigger | name
    label: str
    tokens: frozenset[str]
    need: int


def _keyword_specs(skill: Skill, name_keywords: bool) -> list[_Spec]:
    specs: list[_Spec] = []
    seen: set[frozenset[str]] = set()

    def add(kind: str, label: str, toks: Sequence[str], need: int | None = None) -> None:
        ts = frozenset(toks)
        if not ts or ts in seen:
            return
        seen.add(ts)
        specs.append(_Spec(kind, label, ts, need if need is not None else len(ts)))

    for kw in skill.keywords:
        add("keyword", kw, tokenize(kw))
    for trig in skill.triggers:
        for clause in _CLAUSE_SPLIT.split(trig):
            toks = tokenize(clause)
            if not toks or len(toks) > 6:
                continue
            if len(toks) == 1 and len(toks[0]) < 4:
                continue
            need = len(set(toks)) if len(set(toks)) <= 2 else max(2, int(np.ceil(0.67 * len(set(toks)))))
            add("trigger", clause.strip(), toks, need)
    if name_keywords and not skill.always_apply:
        toks = [t for t in tokenize(split_name(skill.name)) if len(t) >= 3 and t not in _GENERIC_NAME_WORDS]
        if toks and len(toks) <= 4:
            add("name", skill.name, toks)
    return specs


# Words too generic to count as a mention of a skill by name.
_GENERIC_NAME_WORDS = frozenset(tokenize(
    "agent agents claude readme rules rule guide guidelines instructions best practices general coding standards "
    "code skill skills md local tool tools helper assistant project default main index file files app api "
    "create get make find search check list update add delete generate build run manage track new pro plus "
    "finder helper ai gpt bot chat query data info", stem=True
)) | STOPWORDS


class SparseBM25:
    """Okapi BM25 (same formula as :class:`mnemo.core.text.BM25`) with per-term weight vectors precomputed, so
    a query costs one numpy scatter-add per query term instead of a Python loop over postings."""

    def __init__(self, docs: Sequence[Sequence[str]], k1: float = 1.2, b: float = 0.75):
        ref = BM25(docs, k1, b)
        self.n = ref.n
        self.postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        lens = np.asarray(ref.doc_len, dtype=np.float32)
        avg = ref.avgdl or 1.0
        for term, plist in ref.postings.items():
            ids = np.fromiter((d for d, _ in plist), dtype=np.int32, count=len(plist))
            tf = np.fromiter((t for _, t in plist), dtype=np.float32, count=len(plist))
            w = ref.idf(term) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lens[ids] / avg))
            self.postings[term] = (ids, w.astype(np.float32))

    def scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        out = np.zeros(self.n, dtype=np.float32)
        for term in set(query_tokens):
            hit = self.postings.get(term)
            if hit is not None:
                out[hit[0]] += hit[1]
        return out

    def top(self, query_tokens: Sequence[str], k: int) -> list[tuple[int, float]]:
        s = self.scores(query_tokens)
        nz = np.flatnonzero(s > 0)
        if nz.size > k:
            nz = nz[np.argpartition(-s[nz], k - 1)[:k]]
        nz = nz[np.lexsort((nz, -s[nz]))]
        return [(int(i), float(s[i])) for i in nz]


class _Index:
    """Immutable per-registry-version index used by activation."""

    def __init__(self, skills: list[Skill], vectors: np.ndarray, cfg: ActivationConfig, version: int):
        self.version = version
        self.skills = skills
        self.vectors = vectors
        self.bm25 = SparseBM25([bm25_tokens(s, cfg.body_chars_bm25) for s in skills])
        self.specs: list[list[_Spec]] = [_keyword_specs(s, cfg.name_keywords) for s in skills]
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for i, specs in enumerate(self.specs):
            for j, spec in enumerate(specs):
                for t in spec.tokens:
                    self.postings.setdefault(t, []).append((i, j))
        self.matchers: list[GlobMatcher | None] = [
            matcher_for(s.globs, s.glob_mode) if s.globs else None for s in skills
        ]
        # distinct matchers, evaluated once per file; slot[i] is skill i's matcher (-1: no globs)
        self.distinct: list[GlobMatcher] = []
        where: dict[int, int] = {}
        slots = []
        for m in self.matchers:
            if m is None:
                slots.append(-1)
                continue
            if id(m) not in where:
                where[id(m)] = len(self.distinct)
                self.distinct.append(m)
            slots.append(where[id(m)])
        self.slot = np.asarray(slots, dtype=np.int64)
        self.slot_catch_all = np.asarray([m.catch_all for m in self.distinct] + [False], dtype=bool)
        self.always = np.asarray([s.always_apply for s in skills], dtype=bool)
        self.manual = np.asarray([s.manual_only for s in skills], dtype=bool)
        self.importance = np.asarray([0.85 + 0.3 * s.importance for s in skills], dtype=np.float32)
        names = [s.name.lower() for s in skills]
        self.name_rank = np.empty(len(skills), dtype=np.int64)
        self.name_rank[sorted(range(len(skills)), key=lambda i: (names[i], i))] = np.arange(len(skills))
        self.query_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.glob_cache: OrderedDict[tuple[str | None, str | None], list[str | None]] = OrderedDict()
        self.lock = threading.Lock()


class SkillEngine:
    """Activation over a :class:`SkillRegistry`. Thread-safe; rebuilds its index when the registry changes."""

    def __init__(self, registry: SkillRegistry, embedder=None, config: ActivationConfig | None = None,
                 vector_cache: VectorCache | Path | str | None = None, auto_refresh: bool = True):
        self.registry = registry
        self._embedder = embedder
        self.config = config or ActivationConfig()
        self.vector_cache = vector_cache if isinstance(vector_cache, VectorCache) else VectorCache(vector_cache)
        self.auto_refresh = auto_refresh
        self._index: _Index | None = None
        self._lock = threading.RLock()
        self._last_refresh = 0.0
        self.refresh_interval = 1.0  # seconds between stat scans when auto_refresh (the watcher is faster)

    # -- plumbing --------------------------------------------------------------------------------------------
    @property
    def embedder(self):
        if self._embedder is None:
            from ..embeddings import get_embedder

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

    def _maybe_refresh(self) -> None:
        if not self.auto_refresh:
            return
        now = time.monotonic()
        if now - self._last_refresh >= self.refresh_interval:
            self._last_refresh = now
            self.registry.refresh_if_changed()

    def _ensure_index(self) -> _Index:
        idx = self._index
        if idx is not None and idx.version == self.registry.version:
            return idx
        with self._lock:
            version, skills = self.registry.snapshot()
            idx = self._index
            if idx is not None and idx.version == version:
                return idx
            idx = _Index(skills, self._skill_vectors(skills), self.config, version)
            self._index = idx
            return idx

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
        """Build the index now (embeds the skills) instead of on the first activation."""
        self._ensure_index()

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

    def _glob_hits(self, idx: _Index, rel: str | None, abs_p: str | None) -> list[str | None]:
        key = (rel, abs_p)
        with idx.lock:
            hit = idx.glob_cache.get(key)
            if hit is not None:
                idx.glob_cache.move_to_end(key)
                return hit
        res = [m.match(rel, abs_p) for m in idx.distinct]
        with idx.lock:
            idx.glob_cache[key] = res
            while len(idx.glob_cache) > 512:
                idx.glob_cache.popitem(last=False)
        return res

    # -- activation ------------------------------------------------------------------------------------------
    def activate(self, file_path: str | None = None, message: str | None = None, max_skills: int | None = None,
                 config: ActivationConfig | None = None) -> ActivationResult:
        t0 = time.perf_counter()
        cfg = config or self.config
        if message is not None and not isinstance(message, str):
            raise InvalidInput("message must be a string")
        message = (message or "").strip()[:MAX_MESSAGE_CHARS] or None
        self._maybe_refresh()
        idx = self._ensure_index()
        n = len(idx.skills)
        limit = cfg.max_skills if max_skills is None else int(max_skills)
        if limit < 0:
            raise InvalidInput("max_skills must be >= 0")
        if n == 0:
            return ActivationResult([], file_path, message, 0, [], (time.perf_counter() - t0) * 1000,
                                    idx.version, self._embedder_name())

        # glob
        rel, abs_p = self._paths(file_path)
        glob_s = np.zeros(n, dtype=np.float32)
        hits: list[str | None] = []
        if file_path and idx.distinct:
            hits = self._glob_hits(idx, rel, abs_p)
            slot_score = np.asarray([glob_specificity(h) if h is not None else 0.0 for h in hits] + [0.0],
                                    dtype=np.float32)
            glob_s = slot_score[idx.slot]
            glob_s = np.where(idx.slot_catch_all[idx.slot] & (glob_s > 0), cfg.catch_all_glob_score,
                              glob_s).astype(np.float32)

        # keyword + semantic
        kw_s = np.zeros(n, dtype=np.float32)
        kw_hits: dict[int, list[tuple[str, str]]] = {}
        mentioned = np.zeros(n, dtype=bool)  # "@name", or a manual rule named in the message: always included
        sem_s = np.zeros(n, dtype=np.float32)
        dense = None
        dense_rank: dict[int, int] = {}
        bm25_rank: dict[int, int] = {}
        bm25_raw: dict[int, float] = {}
        if message:
            qtok = tokenize(message)
            qset = set(qtok)
            counts: dict[tuple[int, int], int] = {}
            for t in qset:
                for key in idx.postings.get(t, ()):
                    counts[key] = counts.get(key, 0) + 1
            for (i, j), c in counts.items():
                spec = idx.specs[i][j]
                if c >= spec.need:
                    kw_hits.setdefault(i, []).append((spec.kind, spec.label))
            low = message.lower()
            if "@" in low:
                for i, s in enumerate(idx.skills):
                    if f"@{s.name.lower()}" in low:
                        mentioned[i] = True
                        kw_hits.setdefault(i, []).append(("name", "@" + s.name))
            for i, hl in kw_hits.items():
                if idx.manual[i] and any(k == "name" for k, _ in hl):
                    mentioned[i] = True
                weight = sum(cfg.name_hit_weight if k == "name" else 1.0 for k, _ in hl)
                kw_s[i] = 1.0 - 0.5 ** weight

            words = message.split()
            dense_msg = " ".join(words[: cfg.query_words_dense]) if 0 < cfg.query_words_dense < len(words) else message
            qv = self._query_vector(idx, dense_msg)
            dense = idx.vectors @ qv
            k = min(cfg.candidates, n)
            top_dense = np.argpartition(-dense, k - 1)[:k] if k < n else np.arange(n)
            top_dense = top_dense[np.argsort(-dense[top_dense], kind="stable")]
            dense_rank = {int(i): r for r, i in enumerate(top_dense, start=1)}
            bm = idx.bm25.top(qtok, k)
            bm25_rank = {i: r for r, (i, _s) in enumerate(bm, start=1)}
            bm25_raw = dict(bm)
            fused = rrf([[str(i) for i in top_dense], [str(i) for i, _ in bm]], k=cfg.rrf_k,
                        weights=[cfg.w_dense, cfg.w_bm25])
            top = (cfg.w_dense + cfg.w_bm25) / (cfg.rrf_k + 1)
            span = max(1e-6, cfg.dense_full - cfg.dense_floor)
            gate = np.clip((dense - cfg.dense_floor) / span, 0.0, 1.0).astype(np.float32)
            rn = np.zeros(n, dtype=np.float32)
            if fused:
                rn[np.fromiter((int(key) for key in fused), dtype=np.int64, count=len(fused))] = \
                    np.fromiter(fused.values(), dtype=np.float32, count=len(fused)) / top
            sem_s = gate * ((1.0 - cfg.rrf_share) + cfg.rrf_share * rn)
            sem_s[idx.manual] = 0.0  # manual rules attach only when mentioned by name

        # When a request is given and more skills match the file than may be active, the file type alone cannot
        # choose among them (e.g. dozens of rules on **/*.tsx): their glob signal is diluted by
        # max_skills / matched, so the request decides which of them (and which others) apply.
        n_glob = 0
        if message and limit > 0:
            n_glob = int(np.count_nonzero(glob_s > cfg.catch_all_glob_score))
            if n_glob > limit:
                glob_s = glob_s * np.float32(limit / n_glob)

        # combine
        always = idx.always
        base = cfg.w_glob * glob_s + cfg.w_keyword * kw_s + cfg.w_semantic * sem_s
        score = np.minimum(1.0, base * idx.importance)

        forced = (always & cfg.include_always) | mentioned
        cand = np.flatnonzero((score > 0) | forced)
        order = [int(i) for i in cand[np.lexsort((idx.name_rank[cand], -score[cand]))]]
        chosen: list[int] = []
        dropped: list[dict] = []
        best = next((float(score[i]) for i in order if not forced[i]), 0.0)
        kept = 0
        for i in order:
            sc = float(score[i])
            if forced[i]:
                chosen.append(i)
                continue
            why = None
            if sc <= 0.0:
                continue
            if sc < cfg.min_score:
                why = f"below min_score {cfg.min_score}"
            elif cfg.gap_ratio > 0 and sc < cfg.gap_ratio * best:
                why = f"gap: below {cfg.gap_ratio} x best ({best:.3f})"
            elif kept >= limit:
                why = f"max_skills {limit} reached"
            if why:
                if len(dropped) < 10:
                    dropped.append({"skill_id": idx.skills[i].id, "name": idx.skills[i].name,
                                    "score": round(sc, 4), "why": why})
                continue
            chosen.append(i)
            kept += 1
        chosen.sort(key=lambda i: (-float(score[i]), int(idx.name_rank[i])))

        acts = []
        for i in chosen:
            s = idx.skills[i]
            by: list[str] = []
            if always[i]:
                by.append("always")
            if glob_s[i] > 0:
                by.append("glob")
            if kw_s[i] > 0 or mentioned[i]:
                by.append("keyword")
            if sem_s[i] >= cfg.semantic_fire:
                by.append("semantic")
            signals = {"glob": round(float(glob_s[i]), 4), "keyword": round(float(kw_s[i]), 4),
                       "semantic": round(float(sem_s[i]), 4)}
            matched: dict[str, object] = {}
            if glob_s[i] > 0:
                matched["glob"] = hits[int(idx.slot[i])]
                matched["glob_mode"] = s.glob_mode
                matched["glob_catch_all"] = bool(idx.slot_catch_all[idx.slot[i]])
                if n_glob > limit:
                    matched["glob_shared_by"] = n_glob
            if i in kw_hits:
                matched["keywords"] = [label for _k, label in kw_hits[i]]
            if dense is not None:
                signals["dense_cosine"] = round(float(dense[i]), 4)
                signals["bm25"] = round(float(bm25_raw.get(i, 0.0)), 4)
                if i in dense_rank:
                    matched["dense_rank"] = dense_rank[i]
                if i in bm25_rank:
                    matched["bm25_rank"] = bm25_rank[i]
            acts.append(Activation(
                skill_id=s.id, name=s.name, description=s.description, source_path=s.source_path,
                source_format=s.source_format, scope=s.scope, score=round(float(score[i]), 4), activated_by=by,
                signals=signals, matched=matched, token_cost=s.token_cost, always=bool(always[i]),
                reason=("mentioned by name; " if mentioned[i] else "") + _reason(s, by, signals, matched, rel or abs_p), tools_allowed=list(s.tools_allowed),
                body=s.body,
            ))
        return ActivationResult(acts, file_path, message, n, dropped, (time.perf_counter() - t0) * 1000,
                                idx.version, self._embedder_name())

    def rank(self, message: str, k: int = 3, file_path: str | None = None) -> list[Skill]:
        """The top-k skills by combined score with no filters (benchmarks, 'why not' answers)."""
        cfg = ActivationConfig(**{**self.config.to_dict(), "min_score": 0.0, "gap_ratio": 0.0,
                                  "max_skills": k, "include_always": False})
        res = self.activate(file_path, message, max_skills=k, config=cfg)
        by_id = {s.id: s for s in self._ensure_index().skills}
        return [by_id[a.skill_id] for a in res.activations]

    def _query_vector(self, idx: _Index, message: str) -> np.ndarray:
        with idx.lock:
            v = idx.query_cache.get(message)
            if v is not None:
                idx.query_cache.move_to_end(message)
                return v
        v = np.asarray(self.embedder.embed([message])[0], dtype=np.float32)
        with idx.lock:
            idx.query_cache[message] = v
            while len(idx.query_cache) > 256:
                idx.query_cache.popitem(last=False)
        return v

    def _embedder_name(self) -> str:
        e = self._embedder
        return getattr(e, "model_id", "") if e is not None else ""


def _reason(s: Skill, by: list[str], signals: dict[str, float], matched: dict[str, object], path: str | None) -> str:
    parts: list[str] = []
    if "always" in by:
        parts.append(f"always applies ({s.source_format})")
    if "glob" in by:
        pat = matched.get("glob")
        if matched.get("glob_catch_all"):
            parts.append(f"glob {pat!r} matches every file (weak)")
        else:
            shared = matched.get("glob_shared_by")
            parts.append(f"glob {pat!r} matched {path} ({s.glob_mode} semantics"
                         + (f"; {shared} skills match this file, the request decides)" if shared else ")"))
    if "keyword" in by:
        parts.append("keywords: " + ", ".join(str(k) for k in matched.get("keywords", [])))
    if "semantic" in by or (signals.get("semantic", 0) > 0 and not parts):
        det = []
        if "dense_rank" in matched:
            det.append(f"dense #{matched['dense_rank']} cos {signals.get('dense_cosine', 0):.2f}")
        if "bm25_rank" in matched:
            det.append(f"bm25 #{matched['bm25_rank']}")
        parts.append(f"semantic {signals['semantic']:.2f}" + (f" ({', '.join(det)})" if det else ""))
    return "; ".join(parts) or "no signal"
