"""The write path of a memory (`remember`), each check once and in this order: the text and metadata are
validated and cleaned (invisible characters stripped, instruction-like text flagged), secrets are refused or
redacted, a flagged note from an agent becomes untrusted and pending, the same text in the same place is a
confirmation, then the related memories on every level decide (core/memory/neighbours.py): the same claim confirms or
refines, a contradiction conflicts (resolved by `on_conflict`) or overrides a more general memory. Every write is
one `store.write()` transaction followed by the engine's commit hook."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, Unpack, cast

from mnemo.core.api_types.requests import BatchNote, DraftOptions, RememberOptions, filled, names
from mnemo.core.api_types.results import BatchItem, RememberBatchResult, RememberResult
from mnemo.core.errors import InvalidInput, MnemoError
from mnemo.core.memory.neighbours import ChunkSearch, Found, relate
from mnemo.core.models import (
    BRANCH_INDEPENDENT_TYPES,
    SOURCES,
    Context,
    Memory,
    check_type,
    check_write_scope,
)
from mnemo.core.policy import (
    BATCH_CHUNK,
    MAX_ANCHORS,
    MAX_BATCH_ITEMS,
    MAX_META_BYTES,
    MAX_TEXT_CHARS,
    check_on_conflict,
)
from mnemo.core.relation import compare as relation
from mnemo.core.safety import screen as safety
from mnemo.core.search import memory_visible
from mnemo.core.text import content_hash

if TYPE_CHECKING:
    from mnemo.core.api_types.records import Anchor, SameClaim
    from mnemo.core.engine import Engine
    from mnemo.core.store import Store


# -- checks ----------------------------------------------------------------------------------------------------
def validate_text(text: Any) -> tuple[str, list[str]]:
    """The text to store, cleaned (core/safety.clean_text), with its flags; refused when empty or too long."""
    if not isinstance(text, str):
        raise InvalidInput("memory text must be a string", hint="pass the note as text")
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidInput(
            f"memory text is {len(text):,} characters; the limit is {MAX_TEXT_CHARS:,}",
            hint="keep memories short (a decision, a lesson); put long material in a Markdown doc and run"
                 " `mnemo index`, or raise MNEMO_MAX_TEXT_CHARS")
    text, flags = safety.clean_text(text)
    if not text:
        raise InvalidInput("memory text is empty", hint="say what should be remembered, e.g. "
                           "`mnemo remember \"payments API requires idempotency keys\"`")
    return text, flags


def check_fields(type: str, scope: str, source: str, kind: Any, importance: Any) -> float:
    """The memory's type, scope, source and kind are known values; returns the importance as a number in 0..1."""
    check_type(type)
    check_write_scope(scope)
    if source not in SOURCES:
        raise InvalidInput(f"unknown source {source!r}", hint=f"use one of: {', '.join(SOURCES)}")
    if not isinstance(kind, str) or not kind.strip() or len(kind) > 64:
        raise InvalidInput("kind must be a short word (1..64 characters)",
                           hint="e.g. decision, lesson, pattern, handoff, fact")
    try:
        importance = float(importance)
    except (TypeError, ValueError) as exc:
        raise InvalidInput("importance must be a number between 0 and 1") from exc
    if not 0.0 <= importance <= 1.0:
        raise InvalidInput(f"importance {importance} is out of range", hint="use a value between 0 and 1")
    return importance


def check_meta(anchors: Any, provenance: Any) -> tuple[list[dict], dict]:
    anchors = anchors or []
    provenance = provenance or {}
    if not isinstance(anchors, list) or not all(isinstance(a, dict) for a in anchors):
        raise InvalidInput("anchors must be a list of objects", hint='e.g. [{"path": "src/app.py", "symbol": "f"}]')
    if len(anchors) > MAX_ANCHORS:
        raise InvalidInput(f"{len(anchors)} anchors; the limit is {MAX_ANCHORS}",
                           hint="anchor the memory to the few places it is about, or raise MNEMO_MAX_ANCHORS")
    if not isinstance(provenance, dict):
        raise InvalidInput("provenance must be an object")
    size = safety.json_size(anchors) + safety.json_size(provenance)
    if size > MAX_META_BYTES:
        raise InvalidInput(f"the memory's metadata (anchors, provenance) is {size:,} bytes; the limit is "
                           f"{MAX_META_BYTES:,}", hint="keep metadata small, or raise MNEMO_MAX_META_BYTES")
    return anchors, provenance


def find_duplicate(engine: Engine, ctx: Context, h: str, branch: str | None) -> Memory | None:
    """A memory of this project holding exactly this text where the new one would land: visible here (pending or
    archived ones too), and for a branch-independent note a branch-independent one."""
    for m in engine.store.same_content(h, ctx.project_id):
        if memory_visible(m, ctx, include_cold=True, include_pending=True) and (branch is not None or m.branch is None):
            return m
    return None


def _relative_anchor(ctx: Context, anchor: dict) -> dict:
    """An anchor path inside the workspace is kept relative to its root, as `mnemo anchor` keeps it (an absolute one
    was never matched to its file: never shown as the note on that file, never checked for a change)."""
    path = anchor.get("path")
    if not isinstance(path, str) or not ctx.root or not os.path.isabs(path):
        return anchor
    root, real = os.path.realpath(ctx.root), os.path.realpath(path)
    if not real.startswith(root + os.sep):
        return anchor
    return {**anchor, "path": os.path.relpath(real, root).replace(os.sep, "/")}


def _put_parses(store: Store, conn, mem: Memory | None, unparsed: list[tuple[str, str]]) -> None:
    """Store the relation check's parse of the memory written (`mem`) and of the neighbours compared without a
    usable stored one (`unparsed`), in the write's transaction (core/store/parses.py): a later write comparing them
    reads it instead of parsing them again."""
    parser = relation.parser_version()
    if not parser:
        return
    todo = ([(mem.id, mem.text)] if mem is not None else []) + unparsed
    store.put_note_parses(conn, [(i, parser, relation.encoded(t)) for i, t in todo])


def _stored(store: Store, mem_id: str) -> Memory:
    """A memory this call has just written or confirmed (it is in the store)."""
    m = store.get_memory(mem_id)
    assert m is not None, mem_id
    return m


# -- remember --------------------------------------------------------------------------------------------------
def draft(ctx: Context, text: str, **options: Unpack[DraftOptions]) -> tuple[Memory, list[str]]:
    """The memory a `remember` would store, every check done once; returns it and the flags that make it
    suspicious (instruction-like or hidden text: an agent's or an import's note then waits in Review). The options
    and their defaults: core/api_types/requests.py (a status of None: active)."""
    o = filled(DraftOptions, options)
    type, kind, scope, tags, importance = o["type"], o["kind"], o["scope"], o["tags"], o["importance"]
    source, given, trust, provenance, status = o["source"], o["anchors"], o["trust"], o["provenance"], o["status"]
    status = status or "active"
    text, flags = validate_text(text)
    importance = check_fields(type, scope, source, kind, importance)
    tags = [str(t)[:64] for t in (tags or [])][:32]
    checked, provenance = check_meta(given, provenance)
    # `check_meta` checked a list of objects: an Anchor's fields are all optional, and the caller's are kept
    anchors = cast("list[Anchor]", [_relative_anchor(ctx, a) for a in checked])
    # Secrets never reach the store (SPEC §7): blocked, or redacted with MNEMO_SECRETS=redact.
    fields, redacted = safety.screen_secrets(
        {"text": text, "kind": kind, "tags": tags, "anchors": anchors, "provenance": provenance}, "remember",
        mode=ctx.secrets)  # the caller's MNEMO_SECRETS, carried by its Context
    if redacted:
        text, kind, tags = fields["text"], fields["kind"], fields["tags"]
        anchors, provenance = fields["anchors"], fields["provenance"]
        flags.append("secret_redacted")
    suspicious = [f for f in flags if safety.is_suspicious([f])] if source != "user" else []
    if suspicious:  # poisoning: untrusted, and waiting in Review; a person's own write lands, its flags shown
        trust = "untrusted"
        status = "pending" if status == "active" else status
    now = time.time()
    mem = Memory(
        id="mem-" + uuid.uuid4().hex[:20], text=text, type=type, kind=kind.strip(), scope=scope,
        project_id=ctx.project_id, project_name=ctx.project_name,
        branch=None if type in BRANCH_INDEPENDENT_TYPES else ctx.branch, importance=importance, confirmations=1,
        created_at=now, updated_at=now, last_accessed=now, access_count=0, content_hash=content_hash(text),
        source=source, provenance=provenance or {}, anchors=anchors or [], tags=tags, trust=trust, status=status,
        author=ctx.user, flags=flags, tier="warm")
    return mem, suspicious


def remember(engine: Engine, ctx: Context, text: str, *, vec=None,
             **options: Unpack[RememberOptions]) -> RememberResult:
    """Store a memory; returns `{"status", "memory", "message", "conflicts", "same_as"?}` with status created |
    confirmed | conflict | pending | kept_existing. `vec`: its embedding when the caller has it already. The
    options: core/api_types/requests.py."""
    on_conflict = options.pop("on_conflict", None)
    # the caller's own resolution: an explicit argument, else its Context's (MNEMO_ON_CONFLICT of the client)
    on_conflict = check_on_conflict(on_conflict if on_conflict is not None else ctx.on_conflict)
    draft_options: DraftOptions = options  # without `on_conflict` (popped above)
    mem, suspicious = draft(ctx, text, **draft_options)
    res = land(engine, ctx, mem, suspicious, on_conflict, vec)
    engine.changed()
    return res


def land(engine: Engine, ctx: Context, mem: Memory, suspicious: list[str], on_conflict: str,
         vec=None, near=None, unheld: bool = False) -> RememberResult:
    """The checks against the store and the write of a drafted memory (`draft`): the same text in the same place
    confirms; otherwise the related memories on every level decide. `vec`: the memory's embedding when the caller
    has it (an import embeds its notes together); `near`: the store's nearest memories when the caller searched
    them already (`ChunkSearch`); `unheld`: the caller knows no memory `find_duplicate` would look at holds this
    text (a `remember_batch` chunk looks its texts up at once); the caller calls `engine.changed()` after its
    commit."""
    existing = None if unheld else find_duplicate(engine, ctx, mem.content_hash, mem.branch)
    if existing is not None:  # the same fact again in the same place is a confirmation, not a copy
        with engine.store.write() as c:
            confirm(c, engine.store, existing.id, mem.importance, mem.created_at)
        m = _stored(engine.store, existing.id)
        return {"status": "confirmed", "memory": m.to_dict(), "message": f"already known: confirmed {m.confirmations}x",
                "conflicts": []}
    if vec is None:
        vec = engine.embed([mem.text])[0]
    # The same claim on any level (a paraphrase, a refinement) confirms; a contradiction conflicts or overrides.
    unparsed: list[tuple[str, str]] = []
    related = relate(engine, ctx, mem, vec, near=near, unparsed=unparsed)
    found = [f for f in related if f.relation != "duplicate"]
    same = [f for f in related if f.relation == "duplicate" and not (f.refines and mem.status == "pending")]
    if same and not found:
        return write_same_claim(engine, ctx, mem, vec, same[0], unparsed)
    if found or mem.status == "pending":
        res = write_new(engine, ctx, mem, vec, found, on_conflict, unparsed)
        if suspicious:
            res["message"] += (f" (untrusted: it reads like instructions to the agent or hides text: "
                               f"{', '.join(suspicious)}; a person accepts or rejects it in Review)")
        return res
    with engine.store.write() as c:
        engine.store.insert_memory(c, mem, vec, engine.model_id)
        _put_parses(engine.store, c, mem, unparsed)
    return {"status": "created" if mem.status == "active" else mem.status, "memory": mem.to_dict(),
            "message": "remembered" if mem.status == "active" else "waiting in Review", "conflicts": []}


# -- the three ways a new memory lands -------------------------------------------------------------------------
def confirm(conn, store, mem_id: str, importance: float, now: float) -> None:
    """The same fact stated again: one more confirmation, importance up a little, back from the archive."""
    m = store.get_memory(mem_id)
    store.update_memory(conn, mem_id, confirmations=m.confirmations + 1, updated_at=now, last_accessed=now,
                        importance=min(1.0, max(m.importance, importance) + 0.05),
                        reindex=m.tier == "cold", tier="warm" if m.tier == "cold" else m.tier)


def write_same_claim(engine: Engine, ctx: Context, mem: Memory, vec, dup: Found,
                     unparsed: list[tuple[str, str]] | None = None) -> RememberResult:
    """The new memory says what `dup.memory` says. A paraphrase confirms it (a team record: nothing is stored); a
    refinement at the same level replaces it (the old one stays in history, its confirmations carry over); a
    refinement of a more general memory lands and is shown instead of it here (an accepted override).
    `unparsed`: the neighbours compared without a stored parse (`relate`), whose parses the write stores."""
    unparsed = unparsed or []
    store, old, now = engine.store, dup.memory, time.time()
    same_as: SameClaim = {"id": old.id, "scope": old.scope, "similarity": round(dup.similarity, 4),
                          "refines": dup.refines, "reasons": dup.reasons}
    if not dup.refines and old.scope == "team":
        return {"same_as": same_as, "conflicts": [], "status": "confirmed", "memory": old.to_dict(),
                "message": f"already known to the team as {old.id} (the same claim, cosine {dup.similarity:.2f});"
                           " not stored again"}
    if not dup.refines:
        with store.write() as c:
            confirm(c, store, old.id, mem.importance, now)
            _put_parses(store, c, None, unparsed)
        m = _stored(store, old.id)
        return {"same_as": same_as, "conflicts": [], "status": "confirmed", "memory": m.to_dict(),
                "message": f"already known: confirmed {m.confirmations}x (the same claim as {old.id}, cosine "
                           f"{dup.similarity:.2f})"}
    if dup.level != "same":
        with store.write() as c:
            store.insert_memory(c, mem, vec, engine.model_id)
            store.add_review(c, "override", mem.id, old.id, ctx.project_id,
                       {"similarity": round(dup.similarity, 4), "level": dup.level, "branch": mem.branch,
                        "overridden_scope": old.scope, "overridden_text": old.text, "refines": True},
                       resolution="accept", now=now)
            _put_parses(store, c, mem, unparsed)
        where = f"on branch {mem.branch}" if dup.level == "branch" else "in this project"
        return {"same_as": same_as, "conflicts": [], "status": "created",
                "memory": _stored(store, mem.id).to_dict(),
                "message": f"remembered; it refines {old.scope} {old.id} and is shown instead of it {where}"}
    new = dataclasses.replace(
        mem, confirmations=old.confirmations + 1, importance=min(1.0, max(old.importance, mem.importance) + 0.05),
        tags=list(dict.fromkeys(mem.tags + old.tags)), anchors=mem.anchors or old.anchors,
        provenance={**mem.provenance, "refines": old.id})
    with store.write() as c:
        store.insert_memory(c, new, vec, engine.model_id)
        store.update_memory(c, old.id, reindex=True, superseded_by=new.id, updated_at=now)
        _put_parses(store, c, new, unparsed)
    return {"same_as": same_as, "conflicts": [], "status": "confirmed",
            "memory": _stored(store, new.id).to_dict(),
            "message": f"confirmed {new.confirmations}x: it refines {old.id}, and the more detailed text replaces it"
                       " (the old one stays in history)"}


def write_new(engine: Engine, ctx: Context, mem: Memory, vec, found: list[Found],
              on_conflict: str, unparsed: list[tuple[str, str]] | None = None) -> RememberResult:
    """Store a new memory given the conflicts and overrides `relate` found, in one transaction, resolved by
    `on_conflict` (checked by the caller); returns the remember result. `unparsed`: as `write_same_claim`'s."""
    store = engine.store
    now = time.time()
    found = [f for f in found if f.relation in ("conflict", "override")]
    same = [f for f in found if f.relation == "conflict"]
    over = [f for f in found if f.relation == "override"]
    if found and on_conflict == "keep_existing":
        first = found[0].memory
        return {"status": "kept_existing", "memory": first.to_dict(),
                "message": f"not stored: it conflicts with {first.id} and keep_existing was asked",
                "conflicts": [f.to_dict("keep_existing") for f in found]}
    status = mem.status
    if same and on_conflict == "review":
        status = "pending"
    mem = dataclasses.replace(mem, status=status)
    with store.write() as c:
        store.insert_memory(c, mem, vec, engine.model_id)
        for f in same:
            payload = {"similarity": round(f.similarity, 4), "new_text": mem.text, "existing_text": f.memory.text,
                       "reasons": f.reasons}
            if on_conflict == "review":
                store.add_review(c, "conflict", mem.id, f.memory.id, ctx.project_id, payload, now=now)
            elif on_conflict == "supersede":
                store.update_memory(c, f.memory.id, reindex=True, superseded_by=mem.id, updated_at=now)
                store.add_review(c, "conflict", mem.id, f.memory.id, ctx.project_id, payload, resolution="supersede",
                           now=now)
            else:  # keep_both: logged as decided, so compaction never merges the pair behind the person's back
                store.add_review(c, "conflict", mem.id, f.memory.id, ctx.project_id, payload, resolution="keep_both",
                           now=now)
        for f in over:
            store.add_review(c, "override", mem.id, f.memory.id, ctx.project_id,
                       {"similarity": round(f.similarity, 4), "level": f.level, "branch": mem.branch,
                        "overridden_scope": f.memory.scope, "overridden_text": f.memory.text,
                        "reasons": f.reasons}, now=now)
        if mem.status == "pending" and not same:
            store.add_review(c, "pending", mem.id, None, ctx.project_id,
                       {"source": mem.source, **({"flags": mem.flags} if mem.flags else {})}, now=now)
        _put_parses(store, c, mem, unparsed or [])
    parts = []
    if same:
        ids = ", ".join(f.memory.id for f in same)
        parts.append({"review": f"conflicts with {ids}: waiting in Review",
                      "supersede": f"remembered; supersedes {ids}",
                      "keep_both": f"remembered; similar to {ids} (kept both)"}[on_conflict])
    elif mem.status == "pending":
        parts.append("waiting in Review")
    else:
        parts.append("remembered")
    for f in over:
        where = f"on branch {mem.branch}" if f.level == "branch" else "in this project"
        parts.append(f"overrides {f.memory.scope} {f.memory.id} {where}")
    if same and on_conflict == "review":
        res_status = "conflict"
    else:
        res_status = "created" if mem.status == "active" else mem.status
    return {"status": res_status, "memory": _stored(store, mem.id).to_dict(), "message": "; ".join(parts),
            "conflicts": [f.to_dict(on_conflict if f.relation == "conflict" else "override") for f in found]}


# -- many at once ------------------------------------------------------------------------------------------------
BATCH_FIELDS = names(BatchNote)


def _draft_item(ctx: Context, item: Any, source: str, status: str) -> tuple[Memory, list[str]]:
    """One batch item's memory, every check of `draft`; an item that is not an object of known fields is refused."""
    if not isinstance(item, dict) or "text" not in item:
        raise InvalidInput("each item must be an object with a `text`",
                           hint='e.g. {"text": "payments API requires idempotency keys", "kind": "decision"}')
    unknown = sorted(set(item) - set(BATCH_FIELDS))
    if unknown:
        raise InvalidInput(f"unknown field(s) {', '.join(map(repr, unknown))}",
                           hint=f"an item takes: {', '.join(BATCH_FIELDS)}")
    fields = {k: v for k, v in item.items() if v is not None}
    return draft(ctx, fields.pop("text"), source=source, status=status, **fields)


def _batch_item(index: int, res: RememberResult) -> BatchItem:
    out: BatchItem = {"index": index, "status": res["status"], "id": res["memory"]["id"], "message": res["message"],
           "conflicts": [c["id"] for c in res["conflicts"]]}
    if "same_as" in res:
        out["same_as"] = res["same_as"]["id"]
    return out


def _error_item(index: int, exc: MnemoError) -> BatchItem:
    return {"index": index, "status": "error", "message": exc.message, "hint": exc.hint}


def remember_batch(engine: Engine, ctx: Context, items: list[Any], *, source: str = "user", status: str = "active",
                   on_conflict: str | None = None, progress=None) -> RememberBatchResult:
    """`remember` for many notes, each with every check of a single one and the same decisions as the same notes
    remembered one after the other (an item sees the items before it): the drafts of a chunk are embedded in one
    call and land in one transaction (a savepoint per item, so a refused item leaves no trace). Acknowledged
    chunk by chunk: a chunk is durable once committed. Returns `{"total", "counts", "items"}`, one item per input
    in order (status `error` with a message and a hint for a refused one)."""
    on_conflict = check_on_conflict(on_conflict if on_conflict is not None else ctx.on_conflict)
    if not isinstance(items, list):
        raise InvalidInput("items must be a list of objects", hint='e.g. [{"text": "..."}, {"text": "..."}]')
    if len(items) > MAX_BATCH_ITEMS:
        raise InvalidInput(f"{len(items):,} items in one batch; the limit is {MAX_BATCH_ITEMS:,}; nothing was stored",
                           hint="send them in several batches (`mnemo import` does), or raise MNEMO_MAX_BATCH_ITEMS")
    out: list[BatchItem] = []
    search: ChunkSearch | None = None  # the chunk before's: what it read of the change log is taken over
    with _Ahead(engine, ctx, items, source, status) as ahead:
        for n, start in enumerate(range(0, len(items), BATCH_CHUNK)):
            drafts, embedded, tops = ahead.take(n)
            landed, search = _land_chunk(engine, ctx, drafts, embedded, tops, start, on_conflict, search)
            out += landed
            engine.changed()
            if progress is not None:
                progress({"done": len(out), "total": len(items)})
    counts: dict[str, int] = {}
    for it in out:
        counts[it["status"]] = counts.get(it["status"], 0) + 1
    return {"total": len(items), "counts": counts, "items": out}


Drafted = list[Any]  # per item of a chunk: its (memory, suspicious flags) from `draft`, or the MnemoError refusing it


def _drafts(ctx: Context, chunk: list[Any], source: str, status: str) -> Drafted:
    drafts: Drafted = []
    for item in chunk:
        try:
            drafts.append(_draft_item(ctx, item, source, status))
        except MnemoError as exc:
            drafts.append(exc)
    return drafts


class _Ahead:
    """The drafts, embeddings and store-wide top lists of a batch's chunks, one chunk ahead: while chunk n lands
    (its checks and its transaction, Python work holding the interpreter), chunk n + 1 is embedded and multiplied
    with the vector file on a second thread (the model and numpy run without the interpreter lock), so an import
    uses the second core. What lands, and in which order, is unchanged: a draft and a vector depend on the note
    alone, never on the store (the int8 model embeds one text per run: a vector is the same as embedded alone),
    and the top lists are used only when they still hold (`ChunkSearch`). The first chunk of a call is embedded
    on both threads, half each, when the model embeds one text per run. Chunk n + 1 is queued before the caller
    waits for chunk n (`take`), and its top lists are left to the caller when it waits already (`_prepare`)."""

    def __init__(self, engine: Engine, ctx: Context, items: list[Any], source: str, status: str):
        self.engine, self.ctx, self.items, self.source, self.status = engine, ctx, items, source, status
        self.chunks = (len(items) + BATCH_CHUNK - 1) // BATCH_CHUNK
        self._pool: Any = None  # a ThreadPoolExecutor of one thread, for a batch of more than one chunk
        # the chunk prepared ahead: (n, drafts, future, set once the caller waits for it)
        self._next: tuple[int, Drafted, Any, threading.Event] | None = None

    def __enter__(self) -> _Ahead:
        if self.chunks > 1:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mnemo-embed-ahead")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:  # an embedding under way finishes (a chunk's worth at most); none is left
            self._pool.shutdown(wait=True, cancel_futures=True)

    def _drafts(self, n: int) -> Drafted:
        start = n * BATCH_CHUNK
        return _drafts(self.ctx, self.items[start:start + BATCH_CHUNK], self.source, self.status)

    @staticmethod
    def _texts(drafts: Drafted) -> list[str]:
        return [d[0].text for d in drafts if not isinstance(d, MnemoError)]

    def _prepare(self, drafts: Drafted, tops, waiting: threading.Event) -> tuple[Any, Any]:
        """On the second thread: the chunk's vectors, and its top lists when `tops` (`ChunkSearch.ahead`) unless
        the caller is `waiting` for the chunk already: then the chunk's search makes them on the caller's thread
        (the same lists) while this thread goes on to embed the next chunk. Whichever thread has time left makes
        them: when the embedding is the slower side, it embeds only."""
        texts = self._texts(drafts)
        embedded = self.engine.embed(texts) if texts else []
        if tops is None or not len(texts) or waiting.is_set():
            return embedded, None
        return embedded, tops(embedded)

    def _embed_now(self, texts: list[str]):
        """The first chunk's vectors, on both threads when the model embeds one text per run (its vectors then
        do not depend on how the texts are grouped)."""
        if self._pool is None or len(texts) < 8 or not getattr(self.engine.embedder, "quantized", False):
            return self.engine.embed(texts) if texts else []
        import numpy as np

        half = len(texts) // 2
        first = self._pool.submit(self.engine.embed, texts[:half])
        rest = self.engine.embed(texts[half:])
        return np.concatenate([first.result(), rest])

    def take(self, n: int) -> tuple[Drafted, Any, Any]:
        """Chunk n's drafts, vectors (in the order of its drafted items) and top lists made ahead (or None); starts
        preparing chunk n + 1: drafted and queued before chunk n's vectors are waited for, so the second thread
        goes from one chunk's embedding straight on to the next one's (it waited idle for each chunk's drafts)."""
        if self._next is not None and self._next[0] == n:
            _, drafts, future, waiting = self._next
            self._next = None
            self._queue(n + 1, len(drafts))
            waiting.set()
            embedded, tops = future.result()
        else:
            drafts = self._drafts(n)
            embedded, tops = self._embed_now(self._texts(drafts)), None
            self._next = None
            self._queue(n + 1, len(drafts))
        return drafts, embedded, tops

    def _queue(self, n: int, before: int) -> None:
        """Draft chunk n and queue its embedding and top lists on the second thread (`before`: the notes that land
        before it, those of chunk n - 1)."""
        if self._pool is not None and n < self.chunks:
            drafts = self._drafts(n)
            tops_fn = ChunkSearch.ahead(self.engine, self.ctx, before=before)
            waiting = threading.Event()
            self._next = (n, drafts, self._pool.submit(self._prepare, drafts, tops_fn, waiting), waiting)


def _land_chunk(engine: Engine, ctx: Context, drafts: Drafted, embedded, tops, start: int, on_conflict: str,
                after: ChunkSearch | None = None) -> tuple[list[BatchItem], ChunkSearch | None]:
    """One chunk in one transaction, a savepoint per note; returns its items and its search (the next chunk
    takes over what it read of the change log: `ChunkSearch(after=...)`)."""
    vecs = iter(enumerate(embedded))
    out: list[BatchItem] = []
    with engine.store.write() as c:
        # the chunk's neighbour searches together, inside its transaction (it sees the chunk's own writes)
        search = ChunkSearch(engine, ctx, embedded, tops=tops, after=after) if len(embedded) else None
        # the duplicate lookup of the chunk's texts at once: a text no memory holds now is held later in the
        # chunk only when a note of the chunk writes it (every memory a note writes holds the note's text), so
        # `find_duplicate` runs for the texts held now and for those of the notes before in the chunk
        held = engine.store.held_hashes([d[0].content_hash for d in drafts if not isinstance(d, MnemoError)],
                                        ctx.project_id)
        for i, d in enumerate(drafts):
            if isinstance(d, MnemoError):
                out.append(_error_item(start + i, d))
                continue
            j, vec = next(vecs)
            h = d[0].content_hash
            try:
                with engine.store.savepoint(c):
                    out.append(_batch_item(start + i, land(engine, ctx, d[0], d[1], on_conflict, vec,
                                                           near=search.nearest(j) if search else None,
                                                           unheld=h not in held)))
            except InvalidInput as exc:
                out.append(_error_item(start + i, exc))
            held.add(h)
    return out, search
