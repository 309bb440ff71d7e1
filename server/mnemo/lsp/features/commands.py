"""`workspace/executeCommand`: every `mnemo.*` command (writes, lifecycle, sharing, display). See docs/protocol.md.

Each command takes one params object, derives the project/branch from the workspace, calls the owner off the event
loop, and after a write sends `mnemo/memoriesChanged` and refreshes code lenses. Long operations report `$/progress`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from lsprotocol import types as t

from mnemo.core.errors import InvalidInput
from mnemo.core.files import code_symbols as cc
from mnemo.lsp import convert
from mnemo.lsp.convert import want
from mnemo.lsp.feature import LanguageFeature
from mnemo.lsp.features.sidebar import injection_preview

log = logging.getLogger("mnemo.lsp.commands")

MAX_SELECTION_CHARS = 4000
PROGRESS_EVERY_S = 0.1


def _position(value: Any, name: str, method: str) -> t.Position:
    if not isinstance(value, dict) or not isinstance(value.get("line"), int) \
            or not isinstance(value.get("character"), int):
        raise InvalidInput(f"{method}: `{name}` must be a position {{line, character}}")
    return t.Position(line=max(0, value["line"]), character=max(0, value["character"]))


def _range(value: Any, method: str) -> t.Range:
    if not isinstance(value, dict):
        raise InvalidInput(f"{method}: `range` must be {{start, end}}")
    return t.Range(start=_position(value.get("start"), "range.start", method),
                   end=_position(value.get("end"), "range.end", method))


class CommandsFeature(LanguageFeature):
    def commands(self) -> dict[str, Callable[[dict], Any]]:
        return {
            "mnemo.rememberSelection": self.remember_selection,
            "mnemo.remember": self.remember,
            "mnemo.anchorMemory": self.anchor_memory,
            "mnemo.promote": self.promote,
            "mnemo.deprecate": self.deprecate,
            "mnemo.forget": self.forget,
            "mnemo.restore": self.restore,
            "mnemo.openMemory": self.open_memory,
            "mnemo.showInjection": self.show_injection,
            "mnemo.indexDocs": self.index_docs,
            "mnemo.checkAnchors": self.check_anchors,
            "mnemo.snapshotExport": self.snapshot_export,
            "mnemo.snapshotDiff": self.snapshot_diff,
            "mnemo.snapshotMerge": self.snapshot_merge,
            "mnemo.branchDiff": self.branch_diff,
            "mnemo.branchMerge": self.branch_merge,
            "mnemo.branchDelete": self.branch_delete,
            "mnemo.runDecay": self.run_decay,
            "mnemo.compact": self.compact,
            "mnemo.resolveReview": self.resolve_review,
            "mnemo.reconnect": self.reconnect,
            "mnemo.editMemory": self.edit_memory,
            "mnemo.publish": self.publish,
        }

    async def owner_ready(self) -> None:
        """After the first connection: index the workspace's Markdown docs (changed files only)."""
        if not self.server.settings.docs.index_on_startup:
            return
        for root in self.server.workspace_roots()[:4]:
            try:
                await self.index_docs({"uri": root.as_uri()})
            except Exception as exc:  # noqa: BLE001 - indexing is best effort at start-up
                log.warning("indexing docs in %s: %s", root, exc)

    # -- helpers ---------------------------------------------------------------------------------------------
    async def _ctx(self, p: dict) -> dict[str, Any]:
        return await self.server.run_blocking(self.server.ctx_for, p.get("uri"))

    def _changed(self, reason: str, result: Any, ids: list[str] | None = None) -> Any:
        if ids is None and isinstance(result, dict):
            mem = result.get("memory")
            ids = [mem["id"]] if isinstance(mem, dict) and "id" in mem else list(result.get("changed") or [])
        self.server.memories_changed(reason, ids)
        return result

    async def with_progress(self, title: str, fn: str | Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """Run a blocking service call that accepts `progress=`, reporting it as `$/progress`."""
        server = self.server
        window = server.client_capabilities.window
        token = f"mnemo-{uuid.uuid4().hex[:12]}"
        supported = bool(window and window.work_done_progress)
        if supported:
            try:
                await server.work_done_progress.create_async(token)
                server.work_done_progress.begin(token, t.WorkDoneProgressBegin(title=title, percentage=0))
            except Exception as exc:  # noqa: BLE001 - the client may refuse; the work still runs
                log.debug("progress create: %s", exc)
                supported = False
        last = [0.0]

        def report(p: dict) -> None:
            if not supported or not isinstance(p, dict):
                return
            now = time.monotonic()
            if now - last[0] < PROGRESS_EVERY_S and p.get("done") != p.get("total"):
                return
            last[0] = now
            done, total = p.get("done"), p.get("total")
            pct = int(100 * done / total) if isinstance(done, int) and isinstance(total, int) and total else None
            msg = p.get("path") or p.get("message") or (f"{done}/{total}" if total else None)
            server.send_threadsafe(t.PROGRESS, t.ProgressParams(token=token, value=t.WorkDoneProgressReport(
                message=str(msg) if msg else None, percentage=pct)))

        try:
            return await server.service(fn, *args, progress=report, **kw) if isinstance(fn, str) \
                else await server.run_blocking(fn, *args, progress=report, **kw)
        finally:
            if supported:
                await asyncio.sleep(0)  # let queued reports go out before `end`
                server.work_done_progress.end(token, t.WorkDoneProgressEnd(message="done"))

    # -- writes ----------------------------------------------------------------------------------------------
    def _remember_kw(self, p: dict, method: str) -> dict[str, Any]:
        kw: dict[str, Any] = {"source": "user"}
        for key, typ in (("type", str), ("kind", str), ("tags", list), ("importance", float)):
            value = want(p, key, typ, method)
            if value is not None:
                kw[key] = value
        return kw

    async def remember_selection(self, p: dict) -> Any:
        m = "mnemo.rememberSelection"
        uri = want(p, "uri", str, m, required=True)
        rng = _range(p.get("range"), m)
        snap = await self.server.documents.snapshot_or_disk(uri)
        if snap is None:
            raise InvalidInput(f"{m}: {uri} is not open and cannot be read", hint="open the file first")
        encoding = self.server.workspace.position_encoding or t.PositionEncodingKind.Utf16

        def selected() -> str:
            sl, el = rng.start.line, rng.end.line
            sc = convert.col_from_client(cc.line_at(snap.text, sl), rng.start.character, encoding)
            ec = convert.col_from_client(cc.line_at(snap.text, el), rng.end.character, encoding)
            return cc.text_range(snap.text, sl, sc, el, ec)

        text = want(p, "text", str, m) or (await self.server.run_blocking(selected)).strip()
        if not text:
            raise InvalidInput("the selection is empty", hint="select the text to remember, or pass `text`")
        if len(text) > MAX_SELECTION_CHARS:
            raise InvalidInput(f"the selection is {len(text):,} characters; a memory should be short",
                               hint="select less, or pass a summary as `text`")
        found = await self.server.documents.context_at(uri, rng.start)
        ctx = await self._ctx(p)
        rel = self.server.rel_path(uri, ctx)
        sym = None
        if found is not None:
            chain = [s for s in found[0].chain if s.contains(rng.end.line)]
            sym = chain[-1] if chain else None
        anchor = sym.anchor(rel) if sym else {"path": rel, "start_line": rng.start.line, "end_line": rng.end.line}
        res = await self.server.service("remember", ctx, text, anchors=[anchor], **self._remember_kw(p, m))
        return self._changed("remember", res)

    async def remember(self, p: dict) -> Any:
        text = want(p, "text", str, "mnemo.remember", required=True)
        ctx = await self._ctx(p)
        res = await self.server.service("remember", ctx, text, **self._remember_kw(p, "mnemo.remember"))
        return self._changed("remember", res)

    async def anchor_memory(self, p: dict) -> Any:
        m = "mnemo.anchorMemory"
        mid = want(p, "id", str, m, required=True)
        uri = want(p, "uri", str, m, required=True)
        pos = _position(p["position"], "position", m) if "position" in p else _range(p.get("range"), m).start
        found = await self.server.documents.context_at(uri, pos)
        sym = found[0].symbol if found else None
        if sym is None:
            raise InvalidInput("there is no function or class here to anchor to",
                               hint="put the cursor inside a function, method or class")
        ctx = await self._ctx(p)
        res = await self.server.service("anchor", ctx, mid, sym.anchor(self.server.rel_path(uri, ctx)))
        return self._changed("anchor", res)

    async def promote(self, p: dict) -> Any:
        mid = want(p, "id", str, "mnemo.promote", required=True)
        res = await self.server.service("promote", await self._ctx(p), mid,
                                        want(p, "to", str, "mnemo.promote", "global"))
        return self._changed("promote", res)

    async def deprecate(self, p: dict) -> Any:
        mid = want(p, "id", str, "mnemo.deprecate", required=True)
        res = await self.server.service("deprecate", await self._ctx(p), mid,
                                        want(p, "reason", str, "mnemo.deprecate"))
        return self._changed("deprecate", res)

    async def forget(self, p: dict) -> Any:
        mid = want(p, "id", str, "mnemo.forget", required=True)
        res = await self.server.service("forget", await self._ctx(p), mid, want(p, "reason", str, "mnemo.forget"))
        return self._changed("forget", res, [mid])

    async def restore(self, p: dict) -> Any:
        mid = want(p, "id", str, "mnemo.restore", required=True)
        return self._changed("restore", await self.server.service("restore", await self._ctx(p), mid))

    async def edit_memory(self, p: dict) -> Any:
        """`{id, text?, type?, kind?, importance?, tags?, reason?}`: the service's `update` (a client with a UI,
        like the VS Code extension, asks for the new text first; without any field it is refused)."""
        m = "mnemo.editMemory"
        mid = want(p, "id", str, m, required=True)
        importance = want(p, "importance", (int, float), m)
        res = await self.server.service(
            "update", await self._ctx(p), mid, want(p, "text", str, m), type=want(p, "type", str, m),
            kind=want(p, "kind", str, m), importance=None if importance is None else float(importance),
            tags=want(p, "tags", list, m), reason=want(p, "reason", str, m))
        return self._changed("update", res, [mid])

    # -- display ---------------------------------------------------------------------------------------------
    async def open_memory(self, p: dict) -> Any:
        ids = want(p, "ids", list, "mnemo.openMemory") or []
        if "id" in p:
            ids = [want(p, "id", str, "mnemo.openMemory"), *ids]
        ids = [i for i in dict.fromkeys(ids) if isinstance(i, str)]
        if not ids:
            raise InvalidInput("mnemo.openMemory: pass `id` or `ids`")
        symbol = want(p, "symbol", str, "mnemo.openMemory")
        found = await self.server.service("memory_cards", await self._ctx(p), ids[:50])
        memories, cards = found.get("memories") or [], found.get("cards") or []
        return {"memories": memories, "missing": found.get("missing") or [],
                "markdown": convert.memories_markdown(cards, memories, symbol)}

    async def show_injection(self, p: dict) -> Any:
        return await injection_preview(self.server, p)

    # -- maintenance -----------------------------------------------------------------------------------------
    async def index_docs(self, p: dict) -> Any:
        ctx = await self._ctx(p)
        res = await self.with_progress("Mnemo: indexing Markdown docs", "index_docs", ctx, ctx.get("root"))
        if isinstance(res, dict) and (res.get("added") or res.get("updated") or res.get("removed")):
            # docs are not in lenses or anchors: tell the views, keep the caches
            self.server.protocol.notify("mnemo/memoriesChanged", {"reason": "index", "ids": []})
        return res

    async def check_anchors(self, p: dict) -> Any:
        uri = want(p, "uri", str, "mnemo.checkAnchors", required=True)
        return await self.server.documents.check_anchors(uri, force=True)

    async def snapshot_export(self, p: dict) -> Any:
        m = "mnemo.snapshotExport"
        return await self.server.service("snapshot_export", await self._ctx(p), want(p, "path", str, m, required=True),
                                         want(p, "scopes", list, m), want(p, "branches", list, m))

    async def snapshot_diff(self, p: dict) -> Any:
        m = "mnemo.snapshotDiff"
        return await self.server.service("snapshot_diff", await self._ctx(p), want(p, "path", str, m, required=True),
                                         want(p, "strategy", str, m, "newer_wins"))

    async def snapshot_merge(self, p: dict) -> Any:
        m = "mnemo.snapshotMerge"
        ctx = await self._ctx(p)
        res = await self.with_progress("Mnemo: merging snapshot", "snapshot_merge", ctx,
                                       want(p, "path", str, m, required=True),
                                       want(p, "strategy", str, m, "newer_wins"))
        return self._changed("snapshot", res, [])

    async def publish(self, p: dict) -> Any:
        """The reviewed memories into the agent rule files (`targets`, `dryRun`, `budget`, `sync`): the sidebar's
        "Publish to agent files" asks for the dry run first and shows its diff."""
        m = "mnemo.publish"
        targets = want(p, "targets", list, m)
        if targets is not None and not all(isinstance(x, str) for x in targets):
            raise InvalidInput(f"{m}: `targets` must be a list of names", hint="e.g. [\"claude\", \"cursor\"]")
        budget = want(p, "budget", int, m)
        res = await self.server.service("publish", await self._ctx(p), targets, bool(want(p, "dryRun", bool, m)),
                                        budget, bool(want(p, "sync", bool, m)))
        if isinstance(res, dict) and any(res.get("sync", {}).get(k) for k in ("edited", "removed", "added")):
            self.server.memories_changed("publish", [e.get("id") for k in ("edited", "added")
                                                     for e in res["sync"][k] if e.get("id")])
        return res

    def _branch_args(self, p: dict, m: str) -> str:
        source = want(p, "branch", str, m) or want(p, "source", str, m)
        if not source:
            raise InvalidInput(f"{m}: `branch` is required", hint="the branch whose memories to merge")
        return source

    async def _branch_ctx(self, p: dict, m: str) -> dict[str, Any]:
        ctx = await self._ctx(p)
        into = want(p, "into", str, m)
        if into:
            ctx = {**ctx, "branch": into}
        return ctx

    async def branch_diff(self, p: dict) -> Any:
        m = "mnemo.branchDiff"
        return await self.server.service("branch_diff", await self._branch_ctx(p, m), self._branch_args(p, m))

    async def branch_merge(self, p: dict) -> Any:
        m = "mnemo.branchMerge"
        res = await self.server.service("branch_merge", await self._branch_ctx(p, m), self._branch_args(p, m))
        return self._changed("branch", res, [])

    async def branch_delete(self, p: dict) -> Any:
        m = "mnemo.branchDelete"
        res = await self.server.service("branch_delete", await self._ctx(p), self._branch_args(p, m),
                                        bool(want(p, "force", bool, m, False)))
        return self._changed("branch", res, [])

    async def run_decay(self, p: dict) -> Any:
        m = "mnemo.runDecay"
        now = p.get("now")
        if now is not None and not isinstance(now, int | float | str):
            raise InvalidInput("mnemo.runDecay: `now` must be epoch seconds or ISO 8601")
        dry = bool(want(p, "dryRun", bool, m, False))
        res = await self.server.service("decay", await self._ctx(p), now, dry_run=dry,
                                        force=bool(want(p, "force", bool, m, False)))
        return res if dry else self._changed("decay", res, [])

    async def compact(self, p: dict) -> Any:
        return self._changed("compact", await self.server.service("compact", await self._ctx(p)), [])

    async def resolve_review(self, p: dict) -> Any:
        m = "mnemo.resolveReview"
        rid = p.get("id")
        if not isinstance(rid, int | str) or isinstance(rid, bool):
            raise InvalidInput(f"{m}: `id` (the review item id) is required")
        resolution = want(p, "resolution", str, m) or want(p, "action", str, m)
        if not resolution:
            raise InvalidInput(f"{m}: `resolution` is required", hint="one of the item's `resolutions`")
        res = await self.server.service("review_resolve", await self._ctx(p), rid, resolution)
        return self._changed("review", res)

    async def reconnect(self, p: dict) -> Any:
        return await self.server.reconnect()
