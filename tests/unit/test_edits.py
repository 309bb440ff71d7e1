"""`core/edits.edit_memory` (what an edited Markdown import writes): the text is checked and re-embedded, and
rewriting the note of a memory whose anchored code changed settles its stale anchor (Review: "edit the note")."""

from __future__ import annotations

import pytest

from mnemo.core import lifecycle
from mnemo.core.edits import edit_memory
from mnemo.core.errors import InvalidInput
from mnemo.core.memory.write import remember
from mnemo.core.review import review_list


def test_rewriting_a_stale_note_settles_its_anchor(engine, ctx):
    mid = remember(engine, ctx, "charge rounds each line before summing",
                   anchors=[{"path": "pay.py", "symbol": "charge", "hash": "a" * 64}])["memory"]["id"]
    lifecycle.check_anchors(engine, ctx, "pay.py", [{"name": "charge", "hash": "b" * 64, "start_line": 3,
                                                     "end_line": 9}])
    assert "stale_anchor" in engine.store.get_memory(mid).flags
    unchanged = edit_memory(engine, ctx, mid, text="charge rounds each line before summing", tags=[])
    assert unchanged["status"] == "unchanged" and "stale_anchor" in engine.store.get_memory(mid).flags

    before = engine.store.vectors([mid])[mid]
    res = edit_memory(engine, ctx, mid, text="charge rounds the total once, after summing", tags=["money"])
    assert res["status"] == "edited" and res["changed"] == ["tags", "text"]
    m = engine.store.get_memory(mid)
    assert "stale_anchor" not in m.flags and m.anchors == [{"path": "pay.py", "symbol": "charge", "hash": "b" * 64,
                                                            "start_line": 3, "end_line": 9}]
    items = review_list(engine, ctx, "stale_anchor", include_resolved=True)["items"]
    assert [(i["item_id"], i["resolution"]) for i in items] == [(mid, "edited")]
    assert engine.store.vectors([mid])[mid] != before  # re-embedded

    with pytest.raises(InvalidInput, match="empty"):
        edit_memory(engine, ctx, mid, text="   ")
    assert engine.store.get_memory(mid).text == m.text
