"""Anchors: a memory tied to code (file, symbol, line range, hash of the code). `check_anchors` with the file's
current symbols opens one `stale_anchor` review item per changed or vanished anchor, and closes it when the code
is back.

Checked when read (`freshen`): every surface that shows memories (recall cards, `mnemo context`, the hooks, the
hover, MCP) checks the anchors of the few memories it is about to show against the working tree: the files they
are anchored into are parsed (tree-sitter, `core/files/code_symbols.py`; cached by size and modification time) and the
anchored symbols' hashes compared. Only a change of state writes (`check_anchors`: the review item is filed once,
the first time a read sees the change, and closed when the code is back); a read of an unchanged file writes
nothing. `check_files` is the same check for whole files (`mnemo anchors check`, the session-end hook).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from mnemo.core.api_types.records import Anchor, CodeSymbol
from mnemo.core.api_types.results import AnchorCheck, AnchorsCheck, MemoryChange
from mnemo.core.cards import summarize
from mnemo.core.errors import InvalidInput
from mnemo.core.files import code_symbols as code_context
from mnemo.core.memory.manage import get
from mnemo.core.models import Context, Memory
from mnemo.core.safety import screen as safety
from mnemo.core.search import Light, memory_visible

if TYPE_CHECKING:
    from mnemo.core.engine import Engine
    from mnemo.core.store import Store


def rel_path(ctx: Context, path: Any) -> str:
    if not isinstance(path, str) or not path.strip():
        raise InvalidInput("an anchor needs a file path", hint="pass the path of the anchored file")
    p = path.strip().replace("\\", "/")
    if os.path.isabs(p) and ctx.root:
        root = os.path.realpath(ctx.root)
        real = os.path.realpath(p)
        if real == root or real.startswith(root + os.sep):
            p = os.path.relpath(real, root).replace(os.sep, "/")
    if os.path.isabs(p) or any(part == ".." for part in p.split("/")):
        raise InvalidInput(f"anchor path {path!r} is outside the project",
                           hint="anchor to a file inside the workspace (a path relative to its root)")
    return p.lstrip("./") if p.startswith("./") else p


def check_anchor(ctx: Context, anchor: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(anchor, dict):
        raise InvalidInput("an anchor is an object", hint='e.g. {"path": "src/pay.py", "symbol": "charge", '
                                                          '"hash": "..."}')
    out: dict[str, Any] = {"path": rel_path(ctx, anchor.get("path"))}
    for key in ("symbol", "hash"):
        v = anchor.get(key)
        if v is not None:
            if not isinstance(v, str) or len(v) > 512:
                raise InvalidInput(f"anchor {key} must be a short string")
            out[key] = v
    for key in ("start_line", "end_line"):
        v = anchor.get(key)
        if v is not None:
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise InvalidInput(f"anchor {key} must be a line number")
            out[key] = v
    return out


def anchor_key(a: Mapping[str, Any]) -> tuple:
    return (a.get("path"), a.get("symbol"))


def _stale_items(store: Store, mem_id: str) -> dict[tuple, int]:
    """The open `stale_anchor` items of a memory, by the anchor they are about."""
    return {anchor_key(json.loads(r["payload"]).get("anchor", {})): r["id"]
            for r in store.open_items_about("stale_anchor", mem_id)}


def anchor(engine: Engine, ctx: Context, memory_id: str, anchor_: Anchor) -> MemoryChange:
    """Anchor a memory to code (file, symbol, line range, hash of the code); replaces an anchor on the same spot."""
    m = get(engine, ctx, memory_id)
    a = safety.screen_field_tree(check_anchor(ctx, anchor_), "anchor", f"anchor {memory_id}", mode=ctx.secrets)
    anchors = [x for x in m.anchors if anchor_key(x) != anchor_key(a)] + [a]
    store = engine.store
    with store.write() as c:
        store.update_memory(c, m.id, anchors=anchors, updated_at=time.time())
        store.resolve_reviews(c, [r["id"] for r in store.open_items_about("stale_anchor", m.id)
                                  if anchor_key(json.loads(r["payload"]).get("anchor", {})) == anchor_key(a)], "update")
        refresh_stale_flag(c, store, m.id)
    return {"status": "anchored", "memory": store.record(m.id)}


def unanchor(engine: Engine, ctx: Context, memory_id: str, path: str | None = None,
             symbol: str | None = None) -> MemoryChange:
    """Detach a memory from code: every anchor when `path` is None, else the anchors into `path` (only the one on
    `symbol` when given). Their open `stale_anchor` items close as `unanchored`. Refused when nothing matches."""
    m = get(engine, ctx, memory_id)
    if symbol is not None and path is None:
        raise InvalidInput("unanchor: a symbol needs its file", hint="pass the file too: --file F --symbol S")
    rel = rel_path(ctx, path) if path is not None else None

    def matches(a: Anchor) -> bool:
        return rel is None or (a.get("path") == rel and (symbol is None or a.get("symbol") == symbol))

    gone = [a for a in m.anchors if matches(a)]
    if not gone:
        where = "anchor" if rel is None else f"an anchor in {rel}" + (f" on {symbol}" if symbol else "")
        have = ", ".join(f"{a.get('path')}" + (f"#{a['symbol']}" if a.get("symbol") else "") for a in m.anchors)
        raise InvalidInput(f"memory {m.id} has no {where}",
                           hint=f"its anchors: {have}" if have else "it is not anchored to code")
    keys = {anchor_key(a) for a in gone}
    store = engine.store
    with store.write() as c:
        store.update_memory(c, m.id, anchors=[a for a in m.anchors if not matches(a)], updated_at=time.time())
        store.resolve_reviews(c, [rid for key, rid in _stale_items(store, m.id).items() if key in keys],
                              "unanchored")
        refresh_stale_flag(c, store, m.id)
    engine.changed()
    return {"status": "unanchored", "memory": store.record(m.id),
            "message": f"removed {len(gone)} anchor{'s' if len(gone) != 1 else ''}"}


def reanchor(anchors: list[Anchor], payload: dict) -> list[Anchor]:
    """The anchors after a `stale_anchor` item is answered `update`: moved to the current code, or dropped when
    it vanished."""
    old = payload.get("anchor") or {}
    out: list[Anchor] = []
    for a in anchors:
        if anchor_key(a) == anchor_key(old):
            if payload.get("reason") == "vanished":
                continue
            cur = payload.get("current") or {}
            moved: dict[str, Any] = {**a, **{k: cur[k] for k in ("hash", "start_line", "end_line")
                                              if cur.get(k) is not None and (k != "hash" or cur[k])}}
            a = cast(Anchor, moved)
        out.append(a)
    return out


def refresh_stale_flag(conn, store: Store, mem_id: str) -> None:
    """The memory carries the `stale_anchor` flag while it has an open `stale_anchor` item."""
    m = store.get_memory(mem_id)
    if m is None:
        return
    open_ = store.open_items_about("stale_anchor", mem_id)
    flags = [f for f in m.flags if f != "stale_anchor"] + (["stale_anchor"] if open_ else [])
    if flags != m.flags:
        store.update_memory(conn, mem_id, flags=flags)


def check_anchors(engine: Engine, ctx: Context, path: str, symbols: list[CodeSymbol] | None) -> AnchorCheck:
    """Flag memories anchored into `path` whose symbol changed (other hash) or vanished; `symbols` is what the
    file holds now (`[{"name", "hash", "start_line", "end_line"}]`; None = the file is gone). A symbol that is
    back to its anchored hash clears its flag."""
    rel = rel_path(ctx, path)
    if symbols is not None and not isinstance(symbols, list):
        raise InvalidInput("symbols must be a list", hint='[{"name": "charge", "hash": "..."}]')
    current: dict[str | None, dict] = {}
    for sdef in symbols or []:
        if isinstance(sdef, dict):
            given: dict[str, Any] = dict(sdef)
            name = given.get("name") or given.get("symbol")
            current[name if name else None] = given
    store = engine.store
    rows = store.anchored_memories(ctx.project_id, rel, ctx.visible_branches())  # the hover's query too
    ids = [r["id"] for r in rows if memory_visible(Light(r), ctx, include_cold=True, include_pending=True)]
    full = store.get_memories(ids)
    mems = [full[i] for i in ids if i in full]
    out: AnchorCheck = {"path": rel, "checked": len(mems), "ok": 0, "flagged": [], "cleared": [], "stale": []}
    now = time.time()
    with store.write() as c:
        for m in mems:
            _check_memory(c, store, ctx, m, rel, symbols is None, current, now, out)
            refresh_stale_flag(c, store, m.id)
    return out


def _check_memory(c, store: Store, ctx: Context, m: Memory, rel: str, gone: bool, current: dict[str | None, dict],
                  now: float, out: AnchorCheck) -> None:
    """Open an item for each anchor of `m` into `rel` that changed or vanished; close those that are fine now."""
    open_by_key = _stale_items(store, m.id)
    for a in m.anchors:
        if a.get("path") != rel:
            continue
        sym = a.get("symbol")
        cur = None if gone else current.get(sym if sym else None)
        reason = anchor_reason(a, gone, current)
        key = anchor_key(a)
        if reason is None:
            out["ok"] += 1
            if key in open_by_key:
                store.resolve_reviews(c, [open_by_key[key]], "fixed", now)
                out["cleared"].append({"memory_id": m.id, "anchor": a})
            continue
        if key not in open_by_key:
            cur_info = {k: cur.get(k) for k in ("hash", "start_line", "end_line")} if cur else None
            rid = store.add_review(c, "stale_anchor", m.id, None, ctx.project_id,
                                   {"anchor": a, "reason": reason, "current": cur_info}, now=now)
            out["flagged"].append({"memory_id": m.id, "review_id": rid, "anchor": a, "reason": reason,
                                   "title": summarize(m.text, 60)})
        out["stale"].append({"memory_id": m.id, "anchor": a, "reason": reason, "title": summarize(m.text, 60)})


def anchor_reason(a: Mapping[str, Any], gone: bool, current: dict[str | None, dict]) -> str | None:
    """Why anchor `a` is stale against the file's `current` symbols (`gone`: the file is): `vanished`, `changed`
    (another hash), or None (fine; an anchor without a hash is fine while its file exists)."""
    sym = a.get("symbol")
    cur = None if gone else current.get(sym if sym else None)
    if gone or (sym and cur is None):
        return "vanished"
    if cur is not None and a.get("hash") and cur.get("hash") and cur["hash"] != a["hash"]:
        return "changed"
    return None


# -- the check on read ---------------------------------------------------------------------------------------------
MAX_SOURCE_BYTES = 4 * 1024 * 1024  # a larger file is not parsed on read (its symbol anchors are left as they are)
UNREADABLE = object()               # a file that exists but cannot be parsed (another language, too large)
_PARSED: OrderedDict[str, tuple[tuple[int, int], list[dict[str, Any]] | object]] = OrderedDict()
_PARSED_MAX = 256
_parsed_lock = threading.Lock()


def file_symbols(path: str) -> list[dict[str, Any]] | object | None:
    """The symbols `path` holds now, as `check_anchors` takes them; None when the file is gone, `UNREADABLE` when it
    cannot be parsed. Cached by (modification time, size): an unchanged file is parsed once."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError:
        return UNREADABLE
    stamp = (st.st_mtime_ns, st.st_size)
    with _parsed_lock:
        hit = _PARSED.get(path)
        if hit is not None and hit[0] == stamp:
            _PARSED.move_to_end(path)
            return hit[1]
    language = code_context.language_for(path)
    if language is None or st.st_size > MAX_SOURCE_BYTES:
        syms: list[dict[str, Any]] | object = UNREADABLE
    else:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            syms = [s.current() for s in code_context.symbols(code_context.parse_document(text, language))]
        except (OSError, ValueError, RuntimeError):
            syms = UNREADABLE
    with _parsed_lock:
        _PARSED[path] = (stamp, syms)
        _PARSED.move_to_end(path)
        while len(_PARSED) > _PARSED_MAX:
            _PARSED.popitem(last=False)
    return syms


def _by_name(symbols: list[dict[str, Any]] | None) -> dict[str | None, dict]:
    return {(s.get("name") or None): s for s in symbols or []}


def freshen(engine: Engine, ctx: Context, ids: list[str]) -> dict[str, dict[str, Any]]:
    """Check the anchors of the memories `ids` against the working tree now (the few a surface is about to show).
    Returns `{id: {"stale": bool, "anchors": [{anchor, reason}]}}` for the anchored ones among them (the others are
    not in it). A change of state files (or closes) the `stale_anchor` review item through `check_anchors`, once;
    without a project root nothing is read and the stored state is returned."""
    ids = [i for i in dict.fromkeys(ids) if isinstance(i, str)]
    if not ids:
        return {}
    store = engine.store
    mems = {k: m for k, m in store.get_memories(ids).items() if m.anchors and m.scope == "project"
            and m.project_id == ctx.project_id}
    out: dict[str, dict[str, Any]] = {mid: {"stale": "stale_anchor" in m.flags, "anchors": []}
                                      for mid, m in mems.items()}
    if not mems or not ctx.root:
        return out
    paths: dict[str, list[Memory]] = {}
    for m in mems.values():
        for a in m.anchors:
            if isinstance(a, dict) and isinstance(a.get("path"), str):
                paths.setdefault(a["path"], []).append(m)
    changed: set[str] = set()
    for rel, ms in paths.items():
        cur = file_symbols(os.path.join(ctx.root, rel))
        if cur is UNREADABLE:
            continue
        current = _by_name(cur)  # type: ignore[arg-type]
        for m in ms:
            open_keys = set(_stale_items(store, m.id)) if "stale_anchor" in m.flags else set()
            for a in m.anchors:
                if not isinstance(a, dict) or a.get("path") != rel:
                    continue
                if cur is None and not (a.get("hash") or a.get("symbol")):
                    continue  # a file anchor to a file not (yet) in this working tree: nothing was anchored to change
                reason = anchor_reason(a, cur is None, current)
                if reason is not None:
                    out[m.id]["anchors"].append({"anchor": a, "reason": reason})
                if (reason is not None) != (anchor_key(a) in open_keys):
                    changed.add(rel)
    for rel in changed:  # the state changed since the last check: file (or close) the review items, once
        cur = file_symbols(os.path.join(ctx.root, rel))
        if cur is not UNREADABLE:
            check_anchors(engine, ctx, rel, cur)  # type: ignore[arg-type]
    if changed:
        fresh = store.get_memories(list(mems))
        for mid, m in fresh.items():
            out[mid]["stale"] = "stale_anchor" in m.flags
    return out


def check_files(engine: Engine, ctx: Context, paths: list[str] | None = None) -> AnchorsCheck:
    """`check_anchors` against the working tree for `paths` (relative to the project root or absolute; None: every
    file a memory of this project is anchored into). Returns `{checked_files, checked, ok, flagged, cleared, stale,
    skipped}`: `stale` lists every stale anchor found (new or already in Review), `skipped` the files that could not
    be parsed."""
    if not ctx.root:
        raise InvalidInput("checking anchors needs a project root",
                           hint="run it inside the repository (or pass -C DIR)")
    anchored = engine.store.anchored_paths(ctx.project_id, ctx.visible_branches())
    if paths is None:
        rels = sorted(anchored)
    else:  # (files no memory is anchored into have nothing to check)
        rels = []
        for p in paths:
            try:
                rel = rel_path(ctx, p)
            except InvalidInput:  # a file outside the project has no anchors of it
                continue
            if rel in anchored and rel not in rels:
                rels.append(rel)
    out: AnchorsCheck = {"checked_files": 0, "checked": 0, "ok": 0, "flagged": [], "cleared": [], "stale": [],
                         "skipped": []}
    for rel in rels:
        cur = file_symbols(os.path.join(ctx.root, rel))
        if cur is UNREADABLE:
            out["skipped"].append(rel)
            continue
        res = check_anchors(engine, ctx, rel, cur)  # type: ignore[arg-type]
        out["checked_files"] += 1
        out["checked"] += res["checked"]
        out["ok"] += res["ok"]
        out["flagged"] += [{**x, "path": rel} for x in res["flagged"]]
        out["cleared"] += [{**x, "path": rel} for x in res["cleared"]]
        out["stale"] += [{**x, "path": rel} for x in res["stale"]]
    return out
