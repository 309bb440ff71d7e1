"""A change to a stored memory's text or metadata, in place (what `mnemo import` of an edited Markdown file does).

Text, type, kind, importance and tags go through `core.history.update` (checked as a new write: secrets,
poisoning, the same text elsewhere, conflicts; re-embedded; the previous version kept in the history); anchors
are checked as on write and set here. Editing the text of a memory whose anchored code changed
settles its `stale_anchor` items as `edited` (the anchor moves to the current code): the note now describes it.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from mnemo.core.api_types import records
from mnemo.core.errors import InvalidInput
from mnemo.core.lifecycle.anchors import reanchor, refresh_stale_flag, rel_path
from mnemo.core.memory.history import update
from mnemo.core.memory.manage import get
from mnemo.core.memory.write import check_fields, check_meta, validate_text
from mnemo.core.models import BRANCH_INDEPENDENT_TYPES, Context, check_type
from mnemo.core.text import content_hash

if TYPE_CHECKING:
    from mnemo.core.engine import Engine

TEXT_FLAGS_KEPT = ("stale_anchor",)  # flags about the memory's place, not its text


def _checked(ctx: Context, m, text, kind, tags, anchors, importance, type_) -> dict[str, Any]:
    """The columns that change, each checked as a write checks it."""
    fields: dict[str, Any] = {}
    if text is not None and text != m.text:
        clean, flags = validate_text(text)
        if clean != m.text:
            fields.update(text=clean, content_hash=content_hash(clean),
                          flags=[f for f in m.flags if f in TEXT_FLAGS_KEPT] + flags)
    imp = check_fields(type_ or m.type, "project", "user", kind if kind is not None else m.kind,
                       importance if importance is not None else m.importance)
    if type_ is not None and check_type(type_) != m.type:
        fields["type"] = type_
        if type_ in BRANCH_INDEPENDENT_TYPES and m.branch is not None:
            fields["branch"] = None  # about the person now: it holds on every branch
    if kind is not None and kind.strip() != m.kind:
        fields["kind"] = kind.strip()
    if tags is not None:
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise InvalidInput("tags must be a list of words", hint='e.g. ["payments", "http"]')
        if [t[:64] for t in tags][:32] != m.tags:
            fields["tags"] = [t[:64] for t in tags][:32]
    if anchors is not None:
        anchors, _ = check_meta(anchors, {})
        anchors = [{**a, "path": rel_path(ctx, a.get("path"))} for a in anchors]
        if anchors != m.anchors:
            fields["anchors"] = anchors
    if importance is not None and imp != m.importance:
        fields["importance"] = imp
    return fields


def edit_memory(engine: Engine, ctx: Context, memory_id: str, *, text: str | None = None, kind: str | None = None,
                tags: list[str] | None = None, anchors: list[dict] | None = None, importance: float | None = None,
                type: str | None = None) -> dict[str, Any]:
    """Change what is given (None: unchanged); `{status: edited | unchanged | conflict | pending | kept_existing,
    memory, changed: [fields], message?}`. Text and metadata go through `update` (every check of a write, the
    previous version kept in the history); anchors are set here, and a rewritten note settles its stale anchors."""
    m = get(engine, ctx, memory_id)
    fields = _checked(ctx, m, text, kind, tags, anchors, importance, type)
    if not fields:
        return {"status": "unchanged", "memory": m.to_dict(), "changed": []}
    edited: dict[str, Any] = {k: fields[k] for k in ("type", "kind", "importance", "tags") if k in fields}
    if "text" in fields:
        edited["text"] = text
    if edited:
        res = update(engine, ctx, m.id, reason="edited in a Markdown export", source="user", **edited)
        if res["status"] not in ("updated", "unchanged"):
            return {"status": res["status"], "memory": res["memory"], "changed": [],
                    "message": res.get("message", "")}
    store, now = engine.store, time.time()
    with store.write() as c:
        if "anchors" in fields:
            store.update_memory(c, m.id, updated_at=now, anchors=fields["anchors"])
        if "text" in fields:
            _settle_stale(c, store, m.id, now)
        refresh_stale_flag(c, store, m.id)
    engine.changed()
    changed = sorted(k for k in fields if k not in ("content_hash", "flags"))
    return {"status": "edited", "memory": store.record(m.id), "changed": changed}


def settle_rewritten(engine: Engine, mem_id: str) -> records.Memory:
    """After the note of `mem_id` was rewritten (`update` with a new text): a stale anchor moves to the current code
    and its Review items close as `edited` (Review's "edit the note"). Returns the memory as it is now."""
    store, now = engine.store, time.time()
    with store.write() as c:
        _settle_stale(c, store, mem_id, now)
        refresh_stale_flag(c, store, mem_id)
    engine.changed()
    return store.record(mem_id)


def _settle_stale(c, store, mem_id: str, now: float) -> None:
    """The note was rewritten after its code changed: its anchors move to the current code, the items close."""
    items = store.open_items_about("stale_anchor", mem_id)
    if not items:
        return
    anchors = store.get_memory(mem_id).anchors
    for r in items:
        anchors = reanchor(anchors, json.loads(r["payload"] or "{}"))
    store.update_memory(c, mem_id, anchors=anchors)
    store.resolve_reviews(c, [r["id"] for r in items], "edited", now)


__all__ = ["edit_memory", "settle_rewritten"]
