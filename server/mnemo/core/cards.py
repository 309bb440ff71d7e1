"""The one card builder: what every surface shows for a recalled memory or Markdown block (SPEC §2 plus
provenance extras), and the short summaries the cards and reports use."""

from __future__ import annotations

import json
import re
from typing import Any

from mnemo.core.api_types.records import Card
from mnemo.core.models import Memory

CONF_HIGH = 0.5
CONF_MEDIUM = 0.25
SUMMARY_CHARS = 200


def confidence_state(conf: float) -> str:
    return "high" if conf >= CONF_HIGH else "medium" if conf >= CONF_MEDIUM else "low"


_HEADING = re.compile(r"^#+\s*")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+(.+)$", re.M)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def summarize(text: str, limit: int = SUMMARY_CHARS) -> str:
    return _shortened(_HEADING.sub("", " ".join(text.split())), limit)


def _shortened(flat: str, limit: int) -> str:
    """`flat` (one line, no leading heading marks) within `limit` characters: at a sentence end when one falls in
    its second half, else at a word."""
    if len(flat) <= limit:
        return flat
    cut = flat[:limit]
    dot = cut.rfind(". ")
    if dot > limit * 0.5:
        return cut[: dot + 1]
    return cut.rsplit(" ", 1)[0] + " …"


def key_points(text: str, limit: int = 3, *, joined: str | None = None) -> list[str]:
    """Up to `limit` bullets of `text`, else its sentences after the first (`joined`: `text`'s words joined by
    single spaces, when the caller has it)."""
    bullets = [m.group(1).strip() for m in _BULLET.finditer(text)]
    if bullets:
        return [summarize(b, 120) for b in bullets[:limit]]
    if joined is None:
        joined = " ".join(text.split())
    sentences = [s.strip() for s in _SENTENCE_END.split(joined) if s.strip()]
    return [summarize(s, 120) for s in sentences[1: 1 + limit]] if len(sentences) > 1 else []


def memory_card(m: Memory, score: float, conf: float) -> Card:
    joined = " ".join(m.text.split())  # the text's words, flattened once for the title, summary and key points
    flat = _HEADING.sub("", joined)
    return {
        "scope": m.scope,
        "project_id": m.project_id,
        "project_name": m.project_name,
        "source_kind": "note",
        "item_id": m.id,
        "block_id": None,
        "source_path": (m.anchors[0].get("path") if m.anchors else None),
        "title": _shortened(flat, 72),
        "heading_path": [],
        "updated_at": m.updated_at,
        "score": round(score, 4),
        "confidence": round(conf, 4),
        "confidence_state": confidence_state(conf),
        "compressed_summary": _shortened(flat, SUMMARY_CHARS),
        "key_points": key_points(m.text, joined=joined),
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
        "stale": "stale_anchor" in m.flags,  # the anchored code changed since this was written (in Review)
    }


def block_card(b: Any, project_name: str, score: float, conf: float) -> Card:
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
