"""The activation decision: one probability per skill that it applies to (file, message), from a small logistic
model over the evidence (:mod:`evidence`), and one threshold. The coefficients and the threshold are fitted on tune
data only by ``bench/fit_activation.py`` and kept as the defaults of :class:`ActivationConfig.model` /
``threshold`` (docs/architecture.md "Skills" explains each feature)."""

from __future__ import annotations

import numpy as np

from .evidence import Evidence, SkillIndex

# The model's inputs, in order. Message features are 0 without a message, file features 0 without a file.
# The dense, BM25 and fused ranks are computed and explained but are not inputs: as reciprocal ranks they made the
# cross-validated tune objective worse (0.822 -> 0.757; 1/rank falls steeply, so a second skill that applies too
# is pushed far below the first), and the RRF score itself lowered it too (0.815) without helping the ranking.
FEATURES: tuple[str, ...] = (
    "message",      # a message was given (shifts the baseline: without one, only files and always-rules decide)
    "cos",          # dense cosine of message and skill
    "cos_gap",      # best cosine over all skills minus this skill's: how far behind the best candidate it is
    "cos_lead",     # this skill's cosine minus the next best (> 0 only for the top skill): a clear winner
    "part_cos",     # best cosine to one part of a request that asks for several things ("... and ..."), else cos
    "part_gap",     # how far behind the best skill for that part it is (else cos_gap)
    "bm25_log",     # log(1 + BM25 score)
    "keyword",      # keyword / trigger-phrase / name hits: 1 - 0.5 ** hits
    "lexical",      # IDF-weighted share of the message's words found in the skill's text (lexical grounding)
    "background",   # the message's mean cosine to its 3 nearest everyday requests (background.py): near ordinary
    #                 chat, no skill stands out (the same for every skill of one request)
    "glob",         # a specific (not catch-all) glob matched the file
    "glob_lit",     # how literal the matched pattern is (0 for **/*.py, 1 for src/lib/router.ts)
    "glob_shared",  # glob x log(number of skills whose specific glob matched): the file alone cannot choose
    "glob_alone",   # glob x no message: the file is all there is
    "glob_catch",   # only a catch-all glob (**/*) matched: says nothing about the file
    "glob_miss",    # the skill has specific globs, a file is open and none matched
    "no_globs",     # the skill can only be chosen by meaning (no globs, or only a catch-all)
    "no_desc",      # the skill has no description (meaning comes from its name and body only)
)


def feature_matrix(ev: Evidence, idx: SkillIndex) -> np.ndarray:
    """(n skills, len(FEATURES)) float32."""
    n = ev.n
    X = np.zeros((n, len(FEATURES)), dtype=np.float32)
    col = {name: j for j, name in enumerate(FEATURES)}
    has_msg = ev.message is not None
    if has_msg and n:
        cos = ev.cos
        order = np.argsort(-cos, kind="stable")
        best = float(cos[order[0]])
        second = float(cos[order[1]]) if n > 1 else best
        X[:, col["message"]] = 1.0
        X[:, col["cos"]] = cos
        X[:, col["cos_gap"]] = best - cos
        X[order[0], col["cos_lead"]] = best - second
        X[:, col["part_cos"]] = ev.part_cos
        X[:, col["part_gap"]] = ev.part_gap
        X[:, col["bm25_log"]] = np.log1p(ev.bm25)
        X[:, col["keyword"]] = ev.kw
        X[:, col["lexical"]] = ev.lexical
        X[:, col["background"]] = ev.background
    X[:, col["glob"]] = ev.glob
    X[:, col["glob_lit"]] = ev.glob_lit
    X[:, col["glob_shared"]] = ev.glob * np.float32(np.log(max(1, ev.n_glob)))
    X[:, col["glob_alone"]] = ev.glob * np.float32(0.0 if has_msg else 1.0)
    X[:, col["glob_catch"]] = ev.glob_catch
    if ev.rel is not None or ev.abs_path is not None:
        X[:, col["glob_miss"]] = (idx.specific & (ev.glob == 0)).astype(np.float32)
    X[:, col["no_globs"]] = (~idx.specific).astype(np.float32)
    X[:, col["no_desc"]] = idx.no_desc
    return X


# The features that come from the message (0 without one).
MESSAGE_FEATURES = ("message", "cos", "cos_gap", "cos_lead", "part_cos", "part_gap", "bm25_log", "keyword", "lexical",
                    "background")


def without_message(X: np.ndarray, ev: Evidence) -> np.ndarray:
    """``feature_matrix`` as it would be for the same file and no message (the file is all there is)."""
    Xf = X.copy()
    Xf[:, [FEATURES.index(f) for f in MESSAGE_FEATURES]] = 0.0
    Xf[:, FEATURES.index("glob_alone")] = ev.glob
    return Xf


def coefficients(model: dict[str, float]) -> tuple[np.ndarray, float]:
    """(weights in FEATURES order, intercept) from a ``{feature: weight, "intercept": b}`` mapping; a feature
    left out weighs 0."""
    unknown = sorted(set(model) - set(FEATURES) - {"intercept"})
    if unknown:
        raise ValueError(f"unknown activation model feature(s): {', '.join(unknown)}; known: "
                         f"{', '.join(FEATURES)}, intercept")
    w = np.asarray([float(model.get(f, 0.0)) for f in FEATURES], dtype=np.float64)
    return w, float(model.get("intercept", 0.0))


def probabilities(X: np.ndarray, w: np.ndarray, b: float) -> np.ndarray:
    z = X.astype(np.float64) @ w + b
    return (1.0 / (1.0 + np.exp(-np.clip(z, -40.0, 40.0)))).astype(np.float64)


def contributions(x: np.ndarray, w: np.ndarray) -> dict[str, float]:
    """Each feature's share of the logit for one skill (non-zero ones), for the explanation."""
    return {f: round(float(v * c), 3) for f, v, c in zip(FEATURES, x, w, strict=True) if v * c != 0.0}
