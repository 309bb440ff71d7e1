"""How values are laid out in the store: partitions, vector blobs, the text that the full-text and keyword indexes
see, FTS5 queries. Pure functions (numpy is imported when a vector is converted)."""

from __future__ import annotations

from collections.abc import Sequence

from mnemo.core.models import Memory


def partition_for(scope: str, project_id: str) -> str:
    """Memories and blocks of one project share a partition; global has one of its own (team lives remotely)."""
    return "g" if scope == "global" else f"p-{project_id}"


def vec_to_blob(vec) -> bytes:
    import numpy as np  # heavy: only when a vector is stored

    return np.asarray(vec, dtype=np.float32).tobytes()


def blob_to_vec(blob: bytes):
    import numpy as np

    return np.frombuffer(blob, dtype=np.float32)


def fts_query(tokens: Sequence[str]) -> str | None:
    """An OR query of quoted terms; FTS5's porter tokenizer stems them the same way as the documents."""
    terms = []
    seen = set()
    for t in tokens:
        t = t.replace('"', "")
        if t and t not in seen:
            seen.add(t)
            terms.append(f'"{t}"')
    return " OR ".join(terms[:64]) if terms else None


def memory_text(text: str, tags: Sequence[str], kind: str) -> str:
    """What the full-text (FTS5) and keyword (BM25) indexes hold for a memory."""
    return " ".join([text, " ".join(tags), kind])


def memory_fts_text(mem: Memory) -> str:
    return memory_text(mem.text, mem.tags, mem.kind)


def block_fts_text(heading_path: Sequence[str], text: str, source_path: str) -> str:
    """What the full-text (FTS5) and keyword (BM25) indexes hold for a Markdown block."""
    return " ".join([" ".join(heading_path), text, source_path])
