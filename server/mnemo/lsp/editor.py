"""What the editor shows from the store, cached: the context of a hover or a code action (`hover_context`, one
owner call), the anchors of a file (code lenses, saves), the skills active for a file.

A hover costs at most one owner round trip: `hover_context` answers the recall cards, the memories anchored to the
symbol and the file's anchors together, and the file's active skills too unless they are cached here. Caches, all
cleared by `forget()` (a write through this server, a settings change, the owner coming back); an answer that
arrives after a `forget()` is used but not cached:
- hover answers per (project, branch, path, symbol, query, options): `HOVER_TTL` seconds;
- active skills per (project, branch, file, message): `SKILLS_TTL` seconds;
- the anchors of a file, `{symbol: [memory ids]}` per (project, branch, path): `AnchorIndex.TTL` seconds, served
  stale while a refresh runs; every hover of the file refreshes them too.
Writes from other processes therefore show within `AnchorIndex.TTL` seconds at worst; writes made here at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from mnemo.core.errors import MnemoError
from mnemo.lsp.owner import Unavailable

if TYPE_CHECKING:
    from mnemo.lsp.feature import Server

log = logging.getLogger("mnemo.lsp.editor")

HOVER_TTL = 15.0  # seconds a hover's answer is reused for the same symbol and query
HOVER_CACHE = 512
SKILLS_TTL = 20.0  # seconds an active-skills answer is reused for the same file and branch
SKILLS_CACHE = 256


def _put(cache: dict[tuple, tuple[float, Any]], key: tuple, value: Any, limit: int) -> None:
    cache[key] = (time.monotonic(), value)
    while len(cache) > limit:
        cache.pop(next(iter(cache)))


class EditorContext:
    def __init__(self, server: Server):
        self.server = server
        self._hovers: dict[tuple, tuple[float, dict[str, Any]]] = {}
        self._skills: dict[tuple, tuple[float, dict[str, Any]]] = {}
        self.anchors = AnchorIndex(server)
        self.generation = 0
        self.stats = {"hits": 0, "misses": 0}  # hover answers from the cache / from the owner

    def forget(self) -> None:
        self._hovers.clear()
        self._skills.clear()
        self.anchors.invalidate()
        self.generation += 1

    # -- hovers and code actions -----------------------------------------------------------------------------
    async def hover(self, ctx: dict[str, Any], rel: str | None, *, symbol: str | None, line: int | None,
                    query: str, limit: int, include_docs: bool, min_confidence: float | None,
                    skills: bool) -> dict[str, Any]:
        """`hover_context` for a position: `{cards, anchored, file_anchors, skills}` (`skills` only when asked
        for). At most one owner call."""
        key = (ctx.get("project_id"), ctx.get("branch"), rel, symbol, None if symbol else line, query, limit,
               include_docs, min_confidence, skills)
        now = time.monotonic()
        hit = self._hovers.get(key)
        if hit is not None and now - hit[0] < HOVER_TTL:
            self.stats["hits"] += 1
            return hit[1]
        self.stats["misses"] += 1
        cached_skills = self._cached_skills(ctx, rel, None) if skills else None
        ask_skills = skills and cached_skills is None
        gen = self.generation
        settings = self.server.settings.skills
        res = dict(await self.server.service(
            "hover_context", ctx, rel, line, symbol, query, limit=limit, include_docs=include_docs,
            min_confidence=min_confidence, skills=ask_skills, max_skills=settings.max_active,
            token_budget=settings.token_budget))
        if ask_skills:
            res["skills"] = self._keep_skills(ctx, rel, None, res.get("skills"), gen)
        elif skills:
            res["skills"] = cached_skills
        if gen == self.generation:
            self.anchors.put(ctx, rel, res.get("file_anchors") or {})
            _put(self._hovers, key, res, HOVER_CACHE)
        return res

    # -- skills (cached per file and branch) -----------------------------------------------------------------
    def _cached_skills(self, ctx: dict[str, Any], rel: str | None, message: str | None) -> dict[str, Any] | None:
        if not self.server.settings.skills.enabled:
            return {"file": rel, "activations": [], "total_tokens": 0, "disabled": True}
        hit = self._skills.get((ctx.get("project_id"), ctx.get("branch"), rel, message))
        return hit[1] if hit is not None and time.monotonic() - hit[0] < SKILLS_TTL else None

    def _keep_skills(self, ctx: dict[str, Any], rel: str | None, message: str | None, result: Any,
                     gen: int) -> dict[str, Any]:
        out = dict(result or {"activations": [], "total_tokens": 0})
        out["file"] = rel
        if gen == self.generation:
            _put(self._skills, (ctx.get("project_id"), ctx.get("branch"), rel, message), out, SKILLS_CACHE)
        return out

    async def active_skills(self, uri: str | None, message: str | None = None, *, fresh: bool = False,
                            ctx: dict | None = None) -> dict[str, Any]:
        server = self.server
        ctx = ctx or server.ctx_for(uri)
        rel = server.rel_path(uri, ctx)
        cached = self._cached_skills(ctx, rel, message)
        if cached is not None and (not fresh or cached.get("disabled")):
            return cached
        gen = self.generation
        try:
            result = await server.service("activate_skills", ctx, rel, message,
                                          max_skills=server.settings.skills.max_active,
                                          token_budget=server.settings.skills.token_budget)
        except Unavailable:
            raise
        except MnemoError as exc:  # e.g. the skills engine is not installed on the owner yet
            log.warning("skills: %s", exc)
            result = {"activations": [], "total_tokens": 0, "error": str(exc)}
        return self._keep_skills(ctx, rel, message, result, gen)


class AnchorIndex:
    """The anchors of each file, `{symbol: [memory ids]}` (a file + lines anchor under ""), per project and branch.

    Asked of the owner per file (`hover_context` without a query or skills: one indexed store query), cached for
    `TTL` seconds and served stale-while-revalidate; a hover of the file refreshes it, a write here clears it."""

    TTL = 30.0
    FILES = 1024

    def __init__(self, server: Server):
        self.server = server
        self._cache: dict[tuple, tuple[float, dict[str, list[str]]]] = {}
        self._inflight: dict[tuple, asyncio.Future] = {}
        self.generation = 0

    def invalidate(self) -> None:
        self._cache.clear()
        self.generation += 1

    @staticmethod
    def _key(ctx: dict[str, Any], rel: str) -> tuple:
        return ctx.get("project_id"), ctx.get("branch"), rel

    def put(self, ctx: dict[str, Any], rel: str | None, anchors: dict[str, list[str]]) -> None:
        if rel:
            _put(self._cache, self._key(ctx, rel), anchors, self.FILES)

    async def for_path(self, ctx: dict[str, Any], rel: str | None) -> dict[str, list[str]]:
        if not rel:
            return {}
        key = self._key(ctx, rel)
        hit = self._cache.get(key)
        if hit is not None:
            if time.monotonic() - hit[0] > self.TTL and key not in self._inflight:
                self._start(key, ctx, rel)
            return hit[1]
        fut = self._inflight.get(key) or self._start(key, ctx, rel)
        return await asyncio.shield(fut)

    def _start(self, key: tuple, ctx: dict[str, Any], rel: str) -> asyncio.Future:
        fut = asyncio.ensure_future(self._fetch(ctx, rel))
        self._inflight[key] = fut
        fut.add_done_callback(lambda _f: self._inflight.pop(key, None))
        return fut

    async def _fetch(self, ctx: dict[str, Any], rel: str) -> dict[str, list[str]]:
        gen = self.generation
        res = await self.server.service("hover_context", ctx, rel, skills=False)
        anchors = dict(res.get("file_anchors") or {})
        if gen == self.generation:
            self.put(ctx, rel, anchors)
        return anchors


__all__ = ["AnchorIndex", "EditorContext", "HOVER_TTL", "SKILLS_TTL"]
