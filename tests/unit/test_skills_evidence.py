"""Evidence the activation decision weighs: lexical coverage, closeness to everyday requests (background.py),
grouped glob matching; and the fitted model's shape (every feature known, evidence for a skill never counts
against it)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from mnemo.core.embedding.embedder import HashEmbedder
from mnemo.core.skills import SkillEngine, SkillRegistry
from mnemo.core.skills.activation import FITTED_MODEL, FITTED_THRESHOLD
from mnemo.core.skills.background import BACKGROUND_REQUESTS, background_vectors
from mnemo.core.skills.decision import FEATURES
from mnemo.core.skills.evidence import COVERAGE_MIN_WORDS, SparseBM25
from mnemo.core.skills.vectors import VectorCache

REPO = Path(__file__).resolve().parents[2]


def write(p: Path, text: str) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


def test_lexical_coverage_is_the_idf_weighted_share_of_the_request():
    docs = [["docker", "image", "build"], ["python", "test"], ["docker", "compose"], ["go"], ["rust"], ["java"]]
    bm = SparseBM25(docs)
    idf = {t: bm.idf[t] for t in ("docker", "image", "build", "python")}
    unknown = bm.idf_unknown
    assert unknown > idf["image"] > idf["docker"]  # a word no skill has is the rarest
    query = ["docker", "image", "build", "haiku", "python"]
    cov = bm.coverage(query)
    total = idf["docker"] + idf["image"] + idf["build"] + unknown + idf["python"]
    assert total > COVERAGE_MIN_WORDS * unknown  # a long enough message: the plain share
    assert cov[0] == pytest.approx((idf["docker"] + idf["image"] + idf["build"]) / total, rel=1e-6)
    assert cov[1] == pytest.approx(idf["python"] / total, rel=1e-6)
    assert cov[3] == 0.0
    assert bm.coverage(query + query)[0] == cov[0]  # distinct words
    assert not bm.coverage([]).any()


def test_a_one_word_message_is_not_fully_grounded_by_every_skill_that_has_the_word():
    """"continue" / "help": the share is taken over at least COVERAGE_MIN_WORDS rare words, so a skill whose text
    has the word is not 100% grounded (with the plain share it was, and short chatter activated skills)."""
    bm = SparseBM25([["help", "docker"], ["help", "python"], ["go"], ["rust"], ["java"], ["ruby"]])
    cov = bm.coverage(["help"])
    assert cov[0] == pytest.approx(bm.idf["help"] / (COVERAGE_MIN_WORDS * bm.idf_unknown), rel=1e-6)
    assert cov[0] < 0.2 and cov[2] == 0.0


def test_background_vectors_are_embedded_once_and_cached(tmp_path):
    class Counting(HashEmbedder):
        calls = 0

        def embed(self, texts):
            Counting.calls += len(texts)
            return super().embed(texts)

    cache = VectorCache(tmp_path / "v.sqlite")
    v = background_vectors(Counting(), cache)
    assert v.shape == (len(BACKGROUND_REQUESTS), Counting().dim) and v.dtype == np.float32
    assert Counting.calls == len(BACKGROUND_REQUESTS)
    again = background_vectors(Counting(), VectorCache(tmp_path / "v.sqlite"))  # a new process: from disk
    assert Counting.calls == len(BACKGROUND_REQUESTS) and np.array_equal(v, again)
    assert len(set(BACKGROUND_REQUESTS)) == len(BACKGROUND_REQUESTS)


def test_grouped_glob_matching_equals_each_matcher(tmp_path):
    """SkillIndex.match_globs checks a group's required ending once; every answer must equal the matcher's own."""
    root = tmp_path / "p"
    rules = {
        ".github/instructions/py.instructions.md": "---\napplyTo: '**/*.py'\n---\nx",
        ".github/instructions/ts.instructions.md": "---\napplyTo: 'src/**/*.ts,*.TSX'\n---\nx",
        ".github/instructions/all.instructions.md": "---\napplyTo: '**'\n---\nx",
        ".cursor/rules/docker.mdc": "---\nglobs: **/Dockerfile\n---\nx",
        ".cursor/rules/neg.mdc": "---\nglobs: ['!**/*.md']\n---\nx",
        ".cursor/rules/py2.mdc": "---\nglobs: **/*.py\n---\nx",
        ".continue/rules/root.md": "---\nglobs: '*.py'\n---\nx",
        ".continue/rules/dot.md": "---\nglobs: '.github/**/*.yml'\n---\nx",
        "skills/a.md": "---\nname: a\nglobs: ['**/*.py', '**/Makefile']\n---\nx",
    }
    for path, text in rules.items():
        write(root / path, text)
    eng = SkillEngine(SkillRegistry(root, use_user_dir=False), HashEmbedder())
    idx = eng._ensure_index()
    assert len(idx.glob_groups) < len(idx.distinct)
    for f in ("app.py", "src/x/y.ts", "web/App.TSX", "README.md", "deploy/Dockerfile", ".github/workflows/ci.yml",
              "Makefile", "docs/a.PY", str(root / "lib" / "m.py"), "noext"):
        rel, abs_p = eng._paths(f)
        assert idx.match_globs(rel, abs_p) == [m.match(rel, abs_p) for m in idx.distinct], f


def test_fitted_model_covers_every_feature_with_the_expected_signs():
    assert set(FITTED_MODEL) == set(FEATURES) | {"intercept"}
    for f in ("cos", "part_cos", "bm25_log", "keyword", "lexical", "glob", "glob_lit"):
        assert FITTED_MODEL[f] >= 0.0, f  # evidence for a skill never counts against it
    assert FITTED_MODEL["background"] < 0.0  # near ordinary chat: no skill stands out
    assert 0.0 < FITTED_THRESHOLD < 1.0


# -- with the real model -------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def real_engine():
    from mnemo.core.embedding.embedder import get_embedder

    return SkillEngine(SkillRegistry(REPO, use_user_dir=False), get_embedder("onnx-int8"))


@pytest.mark.parametrize("chat,work", [
    ("what should I name my new puppy", "add an index to speed up this slow query"),
    ("recommend a novel for a long flight", "the nightly workflow keeps failing on the cache step"),
    ("how do I make my sourdough rise more", "review this endpoint for sql injection and auth bypass"),
])
def test_background_evidence_tells_chat_from_a_skill_request(real_engine, chat, work):
    """Requests written here (none is in background.py): ordinary chat is nearer to the background than to any
    skill, a request for one of the starter skills the other way round, and the chat activates nothing."""
    a_idx, a = real_engine.evidence(None, chat)
    _, b = real_engine.evidence(None, work)
    assert a.background - float(a.cos.max()) > b.background - float(b.cos.max())
    res = real_engine.activate(None, chat)
    assert [x for x in res.activations if not x.always] == []
    assert math.isfinite(a.background) and len(a_idx.background) == len(BACKGROUND_REQUESTS)


def test_without_message_equals_the_features_of_the_file_alone(tmp_path):
    """SkillEngine._file_decides reuses the request's features with the message taken out; they must be exactly
    what the model sees for the same file and no message (what fit_activation.py fits on file-only examples)."""
    from mnemo.core.skills.decision import without_message

    root = tmp_path / "p"
    write(root / ".github/instructions/docker.instructions.md", "---\napplyTo: '**/Dockerfile'\n---\nPin images.")
    write(root / ".cursor/rules/py.mdc", "---\nglobs: **/*.py\ndescription: Python style\n---\nType hints.")
    write(root / "skills/any.md", "---\nname: ops\ndescription: deployment runbooks\n---\nx")
    eng = SkillEngine(SkillRegistry(root, use_user_dir=False), HashEmbedder())
    for f in ("Dockerfile", "app/main.py", "README.md"):
        _idx, ev, X, _p = eng.probabilities(f, "add a healthcheck and deploy it")
        _idx, _ev, X_file, _p = eng.probabilities(f, None)
        assert ev.message and X.any()
        np.testing.assert_array_equal(without_message(X, ev), X_file)
