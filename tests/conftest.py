"""Shared fixtures: temporary stores, git workspaces, engines with the hash embedder (plumbing) or the real model."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("MNEMO_SHARED_DATA") or REPO.parent / "shared" / "data")  # worktrees: set it

# Keep every test away from the user's real store and home directory.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
# The owner opens chroma only for a partition of more than 200,000 vectors (`ann_min_rows`); the tests' stores are
# small, so by default they open it anyway and keep testing the ANN index (its replay, damage, rebuilds). The small-
# store path is tested with the setting at its default (tests/unit/test_write_cost.py); MNEMO_ANN_MIN_ROWS=200000
# runs any test that way.
os.environ.setdefault("MNEMO_ANN_MIN_ROWS", "0")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long fault/soak runs, only with MNEMO_FULL=1")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("MNEMO_FULL") == "1":
        return
    skip = pytest.mark.skip(reason="long run: set MNEMO_FULL=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data, or skip the test with a clear reason when it is absent."""
    p = SHARED_DATA.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"needs ../shared/data ({p} is absent in this clone)")
    return p


def git(cwd: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@e", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@e")
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """A fresh git repository on `main` with one commit and an origin URL."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "remote", "add", "origin", "git@github.com:acme/payments.git")
    (repo / "README.md").write_text("# Payments\n\nThe payments service.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    return repo


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def hash_embedder():
    from mnemo.core.embedding.embedder import HashEmbedder

    return HashEmbedder()


@pytest.fixture(scope="session")
def real_embedder():
    from mnemo.core.embedding.embedder import get_embedder

    return get_embedder()


@pytest.fixture
def engine(home, hash_embedder):
    from mnemo.core.engine import Engine

    e = Engine(home, embedder=hash_embedder)
    yield e
    e.close()


@pytest.fixture
def real_engine(home, real_embedder):
    from mnemo.core.engine import Engine

    e = Engine(home, embedder=real_embedder)
    yield e
    e.close()


@pytest.fixture
def ctx(git_repo):
    from mnemo.core.identity import detect_context

    return detect_context(git_repo)


def run_cli(*args: str, home: Path, cwd: Path | None = None, env: dict | None = None, timeout: float = 120):
    """Run `python -m mnemo ...` in a subprocess with its own store."""
    e = dict(os.environ, MNEMO_HOME=str(home))
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "mnemo", *args], cwd=cwd, env=e, capture_output=True, text=True,
                          timeout=timeout)


def store_dump(db: Path, memory: Callable[[dict], dict] = lambda d: d, tombstone_reason: bool = True) -> dict:
    """Every table of a store (the crash tests compare the state after a kill with before/after), after
    `PRAGMA integrity_check`. `memory` normalizes each memory row (drop timestamps a run may change)."""
    import sqlite3

    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        tomb_cols = "id, content_hash, reason" if tombstone_reason else "id, content_hash"
        return {
            "memories": [memory(dict(r)) for r in conn.execute("SELECT * FROM memories ORDER BY id")],
            "vectors": [tuple(r) for r in conn.execute("SELECT item_id, part, model_id, vec FROM vectors ORDER BY 1")],
            "fts": sorted(tuple(r) for r in conn.execute("SELECT text, item_id, part FROM fts")),
            "changes": [tuple(r) for r in conn.execute("SELECT seq, item_id, part, op FROM changes ORDER BY seq")],
            "review": [(r["id"], r["kind"], r["item_id"], r["other_id"], r["resolution"])
                       for r in conn.execute("SELECT * FROM review ORDER BY id")],
            "tombstones": [tuple(r) for r in conn.execute(f"SELECT {tomb_cols} FROM tombstones ORDER BY id")],
            "decay_state": [tuple(r) for r in conn.execute("SELECT * FROM decay_state ORDER BY id")],
        }
    finally:
        conn.close()
