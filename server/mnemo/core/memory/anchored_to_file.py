"""The memories anchored to a file, as an editor shows them: the one card (`cards.memory_card`), unscored.

`anchored_context` answers the anchor part of a hover or a code lens with one store query
(`Store.anchored_memories`: the partial index on anchored memories, so its cost follows the anchored memories of
the project, not all of them; only their visibility columns and anchors are read) and reads whole only the
memories anchored at the cursor: those, to the symbol (or, outside any symbol, to the lines around the cursor), as
cards with their anchor there and whether it is stale (the `stale_anchor` flag a save of a changed symbol sets),
and every anchor of the file as `{symbol: [memory ids]}` for lenses. Visibility is recall's (`memory_visible`:
active, not deprecated or superseded, not cold, on a visible branch).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from mnemo.core.api_types import records
from mnemo.core.api_types.records import Card
from mnemo.core.api_types.results import AnchoredCard, AnchoredContext, MemoryCards
from mnemo.core.cards import memory_card
from mnemo.core.errors import InvalidInput, NotFound
from mnemo.core.memory.manage import get
from mnemo.core.models import Context, Memory
from mnemo.core.search import Light, memory_visible

if TYPE_CHECKING:
    from mnemo.core.engine import Engine


def unscored_card(m: Memory) -> Card:
    """A memory's card when it was not found by a query (anchored here, opened by id): no score or confidence."""
    card = memory_card(m, 0.0, 0.0)
    card["score"] = card["confidence"] = card["confidence_state"] = None
    return card


def project_path(ctx: Context, path: str) -> str | None:
    """`path` relative to the project root (the form anchors are stored in), or None when it is outside."""
    p = path.strip().replace("\\", "/")
    if os.path.isabs(p) and ctx.root:
        root, real = os.path.realpath(ctx.root), os.path.realpath(p)
        if real.startswith(root + os.sep):
            p = os.path.relpath(real, root).replace(os.sep, "/")
    while p.startswith("./"):
        p = p[2:]
    if not p or os.path.isabs(p) or any(part == ".." for part in p.split("/")):
        return None
    return p


def _at(anchor: dict[str, Any], symbol: str | None, line: int | None) -> bool:
    """Is `anchor` the one at the cursor: the same symbol, or (outside any symbol) a file + lines anchor covering
    `line`."""
    if symbol:
        return anchor.get("symbol") == symbol
    if line is None or anchor.get("symbol"):
        return False
    start, end = anchor.get("start_line"), anchor.get("end_line")
    return isinstance(start, int) and isinstance(end, int) and start <= line <= end


def anchored_context(engine: Engine, ctx: Context, path: str, symbol: str | None = None,
                     line: int | None = None) -> AnchoredContext:
    """`{path, anchored: [card + {anchor, stale}], file_anchors: {symbol or "": [ids]}}` for `path` (a path outside
    the project has no anchors). Only the memories anchored at the cursor are read whole."""
    rel = project_path(ctx, path)
    if rel is None:
        return {"path": path, "anchored": [], "file_anchors": {}}
    file_anchors: dict[str, list[str]] = {}
    at: dict[str, Any] = {}  # memory id -> its anchor at the cursor (a stored Anchor)
    for row in engine.store.anchored_memories(ctx.project_id, rel, ctx.visible_branches()):
        if not memory_visible(Light(row), ctx):  # the visibility columns are all the rule reads
            continue
        here = [a for a in row["anchors"] if isinstance(a, dict) and a.get("path") == rel]
        for a in here:
            ids = file_anchors.setdefault(str(a.get("symbol") or ""), [])
            if row["id"] not in ids:
                ids.append(row["id"])
        match = next((a for a in here if _at(a, symbol, line)), None)
        if match is not None:
            at[row["id"]] = match
    full = engine.store.get_memories(list(at))
    anchored: list[AnchoredCard] = [{**unscored_card(full[mid]), "anchor": a, "stale": "stale_anchor" in full[mid].flags}
                                    for mid, a in at.items() if mid in full]  # (one forgotten between the two reads is left out)
    return {"path": rel, "anchored": anchored, "file_anchors": file_anchors}


MAX_CARD_IDS = 200


def memory_cards(engine: Engine, ctx: Context, ids: list[str]) -> MemoryCards:
    """`{cards, memories, missing}`: the unscored card and the record of each memory opened by id (visible as
    `memories.get` decides: this project's or a shared one); the others are `missing`."""
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise InvalidInput("ids must be a list of memory ids", hint='e.g. ["mem-0f3c..."]')
    if len(ids) > MAX_CARD_IDS:
        raise InvalidInput(f"{len(ids)} ids; the limit is {MAX_CARD_IDS}", hint="ask in smaller batches")
    cards: list[Card] = []
    memories: list[records.Memory] = []
    missing: list[str] = []
    for mid in dict.fromkeys(ids):
        try:
            m = get(engine, ctx, mid)
        except NotFound:
            missing.append(mid)
            continue
        cards.append(unscored_card(m))
        memories.append(m.to_dict())
    return {"cards": cards, "memories": memories, "missing": missing}


def check_position(path: Any, line: Any, symbol: Any) -> None:
    """A position in a file, as an editor sends it: strings or None, and a 0-based line."""
    for name, value in (("path", path), ("symbol", symbol)):
        if value is not None and not isinstance(value, str):
            raise InvalidInput(f"hover_context: {name} must be a string, got {type(value).__name__}")
    if line is not None and (isinstance(line, bool) or not isinstance(line, int) or line < 0):
        raise InvalidInput(f"hover_context: line must be a 0-based line number, got {line!r}")


__all__ = ["anchored_context", "check_position", "memory_cards", "project_path", "unscored_card"]
