"""The anchor check on read (`lifecycle.anchors.freshen`): the anchored code of the memories being shown against the
working tree; a change of state is filed in Review once, a read of unchanged code writes nothing. Real store and
tree-sitter; the hash embedder is plumbing."""

from __future__ import annotations

from mnemo.core.files import code_symbols as cc
from mnemo.core.lifecycle import anchors
from mnemo.service import LocalService

SOURCE = "def charge(amount):\n    return post('/charge', amount)\n\n\ndef refund(x):\n    return -x\n"


def _anchor(root, path: str, name: str) -> dict:
    text = (root / path).read_text()
    sym = next(s for s in cc.symbols(cc.parse_document(text, cc.language_for(path))) if s.qualname == name)
    return sym.anchor(path)


def test_a_change_is_filed_once_and_an_unchanged_read_writes_nothing(engine, ctx, git_repo):
    (git_repo / "pay.py").write_text(SOURCE)
    svc = LocalService(engine)
    c = ctx.to_dict()
    mid = svc.remember(c, "charge takes cents", anchors=[_anchor(git_repo, "pay.py", "charge")])["memory"]["id"]
    loose = svc.remember(c, "a file that is not written yet", anchors=[{"path": "later.py"}])["memory"]["id"]
    conn = engine.store.conn()

    def items() -> list:
        return engine.store.open_items_about("stale_anchor", mid)

    before = conn.total_changes
    state = anchors.freshen(engine, ctx, [mid, loose])
    assert state[mid]["stale"] is False and state[loose]["stale"] is False
    assert conn.total_changes == before                  # nothing changed: nothing written
    (git_repo / "pay.py").write_text(SOURCE.replace("'/charge'", "'/v2/charge'"))
    state = anchors.freshen(engine, ctx, [mid])
    assert state[mid]["stale"] is True and [a["reason"] for a in state[mid]["anchors"]] == ["changed"]
    assert len(items()) == 1
    before = conn.total_changes
    assert anchors.freshen(engine, ctx, [mid])[mid]["stale"] is True
    assert len(items()) == 1 and conn.total_changes == before   # filed once; the next read writes nothing
    (git_repo / "pay.py").write_text(SOURCE)
    assert anchors.freshen(engine, ctx, [mid])[mid]["stale"] is False and items() == []
    (git_repo / "pay.py").unlink()
    assert [a["reason"] for a in anchors.freshen(engine, ctx, [mid])[mid]["anchors"]] == ["vanished"]


def test_an_unchanged_file_is_parsed_once(git_repo):
    path = git_repo / "pay.py"
    path.write_text(SOURCE)
    first = anchors.file_symbols(str(path))
    assert [s["name"] for s in first] == ["charge", "refund"]
    assert anchors.file_symbols(str(path)) is first
    assert anchors.file_symbols(str(git_repo / "gone.py")) is None
    (git_repo / "notes.txt").write_text("not code")
    assert anchors.file_symbols(str(git_repo / "notes.txt")) is anchors.UNREADABLE
