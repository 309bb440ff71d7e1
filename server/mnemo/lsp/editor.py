"""What the editor shows from the store, cached: the context of a hover or a code action (`hover_context`, one
owner call), the anchors of a file (code lenses, saves), the skills active for a file, the memories strongly
relevant to each symbol (code lenses).

A hover costs at most one owner round trip: `hover_context` answers the recall cards, the memories anchored to the
symbol and the file's anchors together, and the file's active skills too unless they are cached here.

One cache lifetime rule (`AnswerCache`, every cache below follows it):
- an answer of the owner is used for `CACHE_LIFETIME_S` seconds after it arrived, then asked again;
- a write through this server, a settings change, a branch change and the owner coming back drop every cache at
  once (`EditorContext.forget`); an answer that arrives after that is used but not kept;
- an edit or a save of a document drops the hover answers for its file (`EditorContext.forget_path`: what a hover
  shows of an anchored memory, its staleness, is read from the working tree), with the same rule for an answer
  in flight;
- what only a background view reads (a file's anchors and the symbols' relevance, for code lenses) is shown past
  its lifetime while the new answer is asked for, never waited on; a hover or a code action never uses an
  answer past its lifetime.
So a write made here shows at the next hover; a write made by another process (the CLI, an agent) within
`CACHE_LIFETIME_S` seconds. The caches: hover answers per (project, branch, path, symbol, query, options); active
skills per (project, branch, file, message); a file's anchors `{symbol: [memory ids]}` per (project, branch, path);
the symbols' relevance per (project, branch, symbol, hash of its code). The owner keeps no answer of its own for
the editor: it caches only what a write cannot change (a query's embedding, `Engine.embed_cached`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mnemo.core.errors import MnemoError
from mnemo.lsp.owner import Unavailable

if TYPE_CHECKING:
    from mnemo.lsp.feature import Server

log = logging.getLogger("mnemo.lsp.editor")

CACHE_LIFETIME_S = 15.0  # THE lifetime of every answer of the owner the language server keeps (see above)
HOVER_CACHE = 512
SKILLS_CACHE = 256
ANCHOR_FILES = 1024
RELEVANCE_CACHE = 20_000


class AnswerCache:
    """Answers of the owner by key, at most `size` of them (the least recently stored first out), each fresh for
    `CACHE_LIFETIME_S` seconds after it was stored. `clock` is for tests."""

    def __init__(self, size: int, clock: Callable[[], float] = time.monotonic):
        self.size = size
        self.clock = clock
        self._items: OrderedDict[tuple, tuple[float, Any]] = OrderedDict()

    def get(self, key: tuple) -> Any | None:
        """The answer if it is within its lifetime, else None."""
        hit = self._items.get(key)
        return hit[1] if hit is not None and self.clock() - hit[0] < CACHE_LIFETIME_S else None

    def get_stale(self, key: tuple) -> tuple[Any, bool] | None:
        """(the answer, whether it is within its lifetime), for a background view that shows an old answer while
        the new one is asked for; None when there is none."""
        hit = self._items.get(key)
        return None if hit is None else (hit[1], self.clock() - hit[0] < CACHE_LIFETIME_S)

    def put(self, key: tuple, value: Any) -> None:
        self._items.pop(key, None)
        self._items[key] = (self.clock(), value)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()

    def drop(self, which: Callable[[tuple], bool]) -> None:
        """Drop the answers whose key `which` accepts."""
        for key in [k for k in self._items if which(k)]:
            del self._items[key]

    def __len__(self) -> int:
        return len(self._items)


class EditorContext:
    def __init__(self, server: Server):
        self.server = server
        self.hovers = AnswerCache(HOVER_CACHE)
        self.skills = AnswerCache(SKILLS_CACHE)
        self.relevance = AnswerCache(RELEVANCE_CACHE)  # code lenses: (project, branch, symbol, code hash) -> ids
        self.anchors = AnchorIndex(self)
        # a file's skills being asked of the owner right now (by a hover or by the state/lens/sidebar), so that the
        # other waits for that answer instead of asking again: the first hover of a session and the state published
        # when the owner link comes up both want the active file's skills at once
        self._skills_inflight: dict[tuple, asyncio.Future] = {}
        self.generation = 0
        self._path_generation: dict[str | None, int] = {}  # per file: bumped when its hover answers are dropped
        self.hovers_asked = 0  # hover answers being asked of the owner right now
        self.stats = {"hits": 0, "misses": 0}  # hover answers from the cache / from the owner

    def caches(self) -> list[AnswerCache]:
        return [self.hovers, self.skills, self.relevance, self.anchors.cache]

    def forget(self) -> None:
        """Drop every cached answer (a write through this server, a settings or branch change, the owner back)."""
        for cache in self.caches():
            cache.clear()
        self.generation += 1

    def forget_path(self, rel: str | None) -> None:
        """Drop the hover answers for the file `rel` (an edit or a save of it); an answer for it in flight is used
        but not kept."""
        self._path_generation[rel] = self._path_generation.get(rel, 0) + 1
        self.hovers.drop(lambda key: key[2] == rel)

    # -- hovers and code actions -----------------------------------------------------------------------------
    async def hover(self, ctx: dict[str, Any], rel: str | None, *, symbol: str | None, line: int | None,
                    query: str, limit: int, include_docs: bool, min_confidence: float | None,
                    skills: bool) -> dict[str, Any]:
        """`hover_context` for a position: `{cards, anchored, file_anchors, skills}` (`skills` only when asked
        for). At most one owner call."""
        key = (ctx.get("project_id"), ctx.get("branch"), rel, symbol, None if symbol else line, query, limit,
               include_docs, min_confidence)
        cached_skills = self._cached_skills(ctx, rel, None) if skills else None
        hit = self.hovers.get(key)
        if hit is not None and (cached_skills is not None or not skills):  # each part within its lifetime
            self.stats["hits"] += 1
            return {**hit, "skills": cached_skills}
        self.stats["misses"] += 1
        skills_key = self._skills_key(ctx, rel, None)
        pending = self._skills_inflight.get(skills_key) if skills and cached_skills is None else None
        ask_skills = skills and cached_skills is None and pending is None
        gen, path_gen = self.generation, self._path_generation.get(rel, 0)
        settings = self.server.settings.skills
        mine = self._claim_skills(skills_key) if ask_skills else None
        self.hovers_asked += 1
        try:
            res = dict(await self.server.service(
                "hover_context", ctx, rel, line, symbol, query, limit=limit, include_docs=include_docs,
                min_confidence=min_confidence, skills=ask_skills, max_skills=settings.max_active,
                token_budget=settings.token_budget))
        except BaseException:
            self._release_skills(skills_key, mine, None)  # failed: whoever waits asks for itself
            raise
        finally:
            self.hovers_asked -= 1
        if ask_skills:
            res["skills"] = self._keep_skills(ctx, rel, None, res.get("skills"), gen)
            self._release_skills(skills_key, mine, res["skills"])
        elif pending is not None:
            res["skills"] = await asyncio.shield(pending)
            if res["skills"] is None:  # the other request failed: ask now (rare)
                res["skills"] = await self.active_skills(None, ctx=ctx, rel=rel)
        elif skills:
            res["skills"] = cached_skills
        if gen == self.generation:
            self.anchors.put(ctx, rel, res.get("file_anchors") or {})
            if path_gen == self._path_generation.get(rel, 0):  # the file was not edited or saved meanwhile
                self.hovers.put(key, {k: v for k, v in res.items() if k != "skills"})  # skills: their own entry
        return res

    # -- skills (cached per file and branch) -----------------------------------------------------------------
    @staticmethod
    def _skills_key(ctx: dict[str, Any], rel: str | None, message: str | None) -> tuple:
        return ctx.get("project_id"), ctx.get("branch"), rel, message

    def _claim_skills(self, key: tuple) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self._skills_inflight[key] = fut
        return fut

    def _release_skills(self, key: tuple, fut: asyncio.Future | None, result: dict[str, Any] | None) -> None:
        """The answer (None: failed) to whoever waits on `fut`."""
        if fut is None:
            return
        if self._skills_inflight.get(key) is fut:
            del self._skills_inflight[key]
        if not fut.done():
            fut.set_result(result)

    def _cached_skills(self, ctx: dict[str, Any], rel: str | None, message: str | None) -> dict[str, Any] | None:
        if not self.server.settings.skills.enabled:
            return {"file": rel, "activations": [], "total_tokens": 0, "disabled": True}
        return self.skills.get(self._skills_key(ctx, rel, message))

    def _keep_skills(self, ctx: dict[str, Any], rel: str | None, message: str | None, result: Any,
                     gen: int) -> dict[str, Any]:
        out = dict(result or {"activations": [], "total_tokens": 0})
        out["file"] = rel
        if gen == self.generation:
            self.skills.put(self._skills_key(ctx, rel, message), out)
        return out

    async def active_skills(self, uri: str | None, message: str | None = None, *, fresh: bool = False,
                            ctx: dict | None = None, rel: str | None = None) -> dict[str, Any]:
        """The skills active for `uri` (or `rel` in `ctx`) and `message`: cached, or the answer a request already
        in flight for them gets, or one `activate_skills` call."""
        server = self.server
        ctx = ctx or await server.run_blocking(server.ctx_for, uri)
        rel = rel if uri is None else server.rel_path(uri, ctx)
        cached = self._cached_skills(ctx, rel, message)
        if cached is not None and (not fresh or cached.get("disabled")):
            return cached
        key = self._skills_key(ctx, rel, message)
        pending = self._skills_inflight.get(key)
        if pending is not None:  # asked right now (a fresh answer either way)
            shared = await asyncio.shield(pending)
            if shared is not None:
                return shared
        gen = self.generation
        mine = self._claim_skills(key)
        result: dict[str, Any] | None = None
        try:
            try:
                result = await server.service("activate_skills", ctx, rel, message,
                                              max_skills=server.settings.skills.max_active,
                                              token_budget=server.settings.skills.token_budget)
            except Unavailable:
                raise
            except MnemoError as exc:  # e.g. the skills engine is not installed on the owner yet
                log.warning("skills: %s", exc)
                result = {"activations": [], "total_tokens": 0, "error": str(exc)}
            kept = self._keep_skills(ctx, rel, message, result, gen)
        finally:
            self._release_skills(key, mine, None if result is None else kept)
        return kept


class AnchorIndex:
    """The anchors of each file, `{symbol: [memory ids]}` (a file + lines anchor under ""), per project and branch.

    Asked of the owner per file (`hover_context` without a query or skills: one indexed store query), kept by the
    lifetime rule (shown past it while a refresh runs: code lenses and saves never wait); a hover of the file
    refreshes it, `EditorContext.forget` drops it."""

    def __init__(self, editor: EditorContext):
        self.editor = editor
        self.cache = AnswerCache(ANCHOR_FILES)
        self._inflight: dict[tuple, asyncio.Future] = {}

    @staticmethod
    def _key(ctx: dict[str, Any], rel: str) -> tuple:
        return ctx.get("project_id"), ctx.get("branch"), rel

    def put(self, ctx: dict[str, Any], rel: str | None, anchors: dict[str, list[str]]) -> None:
        if rel:
            self.cache.put(self._key(ctx, rel), anchors)

    async def for_path(self, ctx: dict[str, Any], rel: str | None) -> dict[str, list[str]]:
        if not rel:
            return {}
        key = self._key(ctx, rel)
        hit = self.cache.get_stale(key)
        if hit is not None:
            anchors, fresh = hit
            if not fresh and key not in self._inflight:
                self._start(key, ctx, rel)
            return anchors
        fut = self._inflight.get(key) or self._start(key, ctx, rel)
        return await asyncio.shield(fut)

    def _start(self, key: tuple, ctx: dict[str, Any], rel: str) -> asyncio.Future:
        fut = asyncio.ensure_future(self._fetch(ctx, rel))
        self._inflight[key] = fut
        fut.add_done_callback(lambda _f: self._inflight.pop(key, None))
        return fut

    async def _fetch(self, ctx: dict[str, Any], rel: str) -> dict[str, list[str]]:
        gen = self.editor.generation
        res = await self.editor.server.service("hover_context", ctx, rel, skills=False)
        anchors = dict(res.get("file_anchors") or {})
        if gen == self.editor.generation:
            self.put(ctx, rel, anchors)
        return anchors


__all__ = ["CACHE_LIFETIME_S", "AnchorIndex", "AnswerCache", "EditorContext"]
