"""Custom requests and notifications that feed the editor's views: `mnemo/status`, `mnemo/listMemories`,
`mnemo/getMemory`, `mnemo/recall`, `mnemo/activeSkills`, `mnemo/skills`, `mnemo/reviewQueue`,
`mnemo/injectionPreview`, `mnemo/stats`, `mnemo/branchDiff`, `mnemo/mergedBranches`; and the
`mnemo/didChangeActiveEditor` notification. Shapes in docs/protocol.md.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mnemo.core.errors import InvalidInput
from mnemo.editor_settings import to_dict
from mnemo.lsp import convert
from mnemo.lsp.convert import want
from mnemo.lsp.feature import LanguageFeature, Server

OPTIONAL_METHODS = ("review_list", "review_resolve", "snapshot_export", "snapshot_diff", "snapshot_merge",
                    "branch_diff", "branch_merge", "branch_delete", "decay", "compact", "anchor", "check_anchors",
                    "merged_branches", "restore", "activate_skills", "skills_list", "publish")


async def injection_preview(server: Server, p: dict) -> dict[str, Any]:
    """What an agent working on the file would get: active skills (scores, signals, token cost) + top memories."""
    m = "mnemo/injectionPreview"
    uri = want(p, "uri", str, m) or server.active_uri
    message = want(p, "message", str, m)
    ctx = await server.run_blocking(server.ctx_for, uri)
    rel = server.rel_path(uri, ctx)
    query = message
    if not query and uri:
        found = None
        position = p.get("position")
        if isinstance(position, dict) and isinstance(position.get("line"), int):
            from lsprotocol import types as t

            found = await server.documents.context_at(uri, t.Position(line=position["line"],
                                                                       character=int(position.get("character", 0))))
        if found is not None and found[0].symbol is not None:
            query = found[0].query()
        else:
            syms = await server.documents.symbols(uri) or []
            names = " ".join(s.name for s in syms[:20])
            query = f"{rel or ''} {names}".strip()
    skills, recalled = await asyncio.gather(
        server.editor.active_skills(uri, message, ctx=ctx),
        server.service("recall", ctx, query, limit=max(1, server.settings.injection.max_memories),
                       include_docs=True) if query and server.settings.injection.max_memories > 0
        else asyncio.sleep(0, {"cards": []}))
    activations = skills.get("activations", [])
    found = recalled.get("cards", [])
    cards = [c for c in found if convert.auto_injectable(c)]  # trust decides what is injected unasked
    withheld = [c for c in found if not convert.auto_injectable(c)]
    skill_tokens = int(skills.get("total_tokens") or sum(int(a.get("token_cost") or 0) for a in activations))
    memory_tokens = sum(convert.estimate_tokens(c.get("compressed_summary") or "") for c in cards)
    return {"file": rel, "query": query, "skills": activations, "memories": cards, "skillTokens": skill_tokens,
            "memoryTokens": memory_tokens, "totalTokens": skill_tokens + memory_tokens,
            "skillsError": skills.get("error"), "withheld": withheld,
            "markdown": convert.injection_markdown(rel, activations, cards, skill_tokens, memory_tokens, withheld)}


def filter_params(p: dict, method: str, names: tuple[str, ...]) -> dict[str, Any]:
    """The filter fields of a request (core/memory/filters.py checks their values): `tags` a list of words, `since` /
    `until` a time (epoch seconds or text like `2026-11-30` or `7d`), the others a word."""
    out: dict[str, Any] = {}
    for name in names:
        if p.get(name) is None:
            continue
        if name == "tags":
            out[name] = want(p, name, list, method)
        elif name in ("since", "until"):
            out[name] = want(p, name, (str, int, float), method)
        else:
            out[name] = want(p, name, str, method)
    return out


class SidebarFeature(LanguageFeature):
    def requests(self):
        return {
            "mnemo/status": self.status,
            "mnemo/listMemories": self.list_memories,
            "mnemo/getMemory": self.get_memory,
            "mnemo/recall": self.recall,
            "mnemo/activeSkills": self.active_skills,
            "mnemo/skills": self.skills,
            "mnemo/reviewQueue": self.review_queue,
            "mnemo/injectionPreview": self.injection_preview,
            "mnemo/stats": self.stats,
            "mnemo/branchDiff": self.branch_diff,
            "mnemo/mergedBranches": self.merged_branches,
        }

    def notifications(self):
        return {"mnemo/didChangeActiveEditor": self.did_change_active_editor}

    async def _ctx(self, p: dict) -> dict[str, Any]:
        return await self.server.run_blocking(self.server.ctx_for, p.get("uri"))

    async def status(self, p: dict) -> dict[str, Any]:
        server = self.server
        state = await server.publish_state()
        owner = server.owner.status() if server.owner else {"home": None, "owner": {}}
        return {**state, "home": owner.get("home"), "owner": owner.get("owner", {}),
                "settings": to_dict(server.settings), "settingsProblems": server.settings_problems,
                "supported": {name: bool(server.owner and server.owner.supports(name)) for name in OPTIONAL_METHODS},
                **server.status_extras()}

    async def list_memories(self, p: dict) -> dict[str, Any]:
        m = "mnemo/listMemories"
        ctx = await self._ctx(p)
        kw: dict[str, Any] = {
            "scope": want(p, "scope", str, m, "hybrid"),
            "include_deprecated": bool(want(p, "includeDeprecated", bool, m, False)),
            "include_cold": bool(want(p, "includeCold", bool, m, False)),
            "all_branches": bool(want(p, "allBranches", bool, m, False)),
            "limit": want(p, "limit", int, m, 200), "offset": want(p, "offset", int, m, 0),
        }
        for key, name in (("branch", "branch"), ("type", "type"), ("kind", "kind")):
            value = want(p, key, str, m)
            if value:
                kw[name] = value
        if "status" in p:
            kw["status"] = want(p, "status", str, m)
        kw.update(filter_params(p, m, ("tags", "since", "until", "author", "source", "search")))
        if not 0 < kw["limit"] <= 5000 or kw["offset"] < 0:
            raise InvalidInput(f"{m}: limit must be 1..5000 and offset >= 0")
        res = await self.server.service("list_memories", ctx, **kw)
        return {**res, "branch": ctx.get("branch"), "defaultBranch": ctx.get("default_branch"),
                "project": {"id": ctx.get("project_id"), "name": ctx.get("project_name"), "root": ctx.get("root")}}

    async def get_memory(self, p: dict) -> dict[str, Any]:
        mid = want(p, "id", str, "mnemo/getMemory", required=True)
        ctx = await self._ctx(p)
        memory = await self.server.service("get_memory", ctx, mid)
        hydrated = None
        if want(p, "hydrate", bool, "mnemo/getMemory", False):
            hydrated = await self.server.service("hydrate", ctx, mid, "default")
        return {"memory": memory, "hydrated": hydrated}

    async def recall(self, p: dict) -> dict[str, Any]:
        m = "mnemo/recall"
        query = want(p, "query", str, m, required=True)
        kw: dict[str, Any] = {"scope": want(p, "scope", str, m, "hybrid"), "limit": want(p, "limit", int, m, 5),
                              "include_docs": bool(want(p, "includeDocs", bool, m, True))}
        if p.get("types") is not None:
            kw["types"] = want(p, "types", list, m)
        if p.get("minConfidence") is not None:
            kw["min_confidence"] = float(want(p, "minConfidence", (int, float), m))
        kw.update(filter_params(p, m, ("kind", "branch", "status", "tags", "since", "until", "author", "source")))
        return await self.server.service("recall", await self._ctx(p), query, **kw)

    async def active_skills(self, p: dict) -> dict[str, Any]:
        m = "mnemo/activeSkills"
        uri = want(p, "uri", str, m) or self.server.active_uri
        return await self.server.editor.active_skills(uri, want(p, "message", str, m), fresh=True)

    async def skills(self, p: dict) -> dict[str, Any]:
        ctx = await self._ctx(p)
        out = dict(await self.server.service("skills_list", ctx))
        if want(p, "check", bool, "mnemo/skills", False):
            out["check"] = await self.server.service("skills_check", ctx)
        return out

    async def review_queue(self, p: dict) -> dict[str, Any]:
        m = "mnemo/reviewQueue"
        kind = want(p, "kind", str, m)
        res = await self.server.service("review_list", await self._ctx(p), kind,
                                        include_resolved=bool(want(p, "includeResolved", bool, m, False)))
        limit = want(p, "limit", int, m)
        if limit is not None and isinstance(res, dict) and isinstance(res.get("items"), list):
            res = {**res, "items": res["items"][: max(0, limit)]}
        return res

    async def injection_preview(self, p: dict) -> dict[str, Any]:
        return await injection_preview(self.server, p)

    async def stats(self, p: dict) -> dict[str, Any]:
        return await self.server.service("stats", await self._ctx(p))

    async def branch_diff(self, p: dict) -> dict[str, Any]:
        m = "mnemo/branchDiff"
        source = want(p, "branch", str, m) or want(p, "source", str, m)
        if not source:
            raise InvalidInput(f"{m}: `branch` is required")
        ctx = await self._ctx(p)
        into = want(p, "into", str, m)
        return await self.server.service("branch_diff", {**ctx, "branch": into} if into else ctx, source)

    async def merged_branches(self, p: dict) -> dict[str, Any]:
        return await self.server.service("merged_branches", await self._ctx(p),
                                         bool(want(p, "queue", bool, "mnemo/mergedBranches", False)))

    async def did_change_active_editor(self, p: dict) -> None:
        uri = p.get("uri")
        self.server.documents.set_active(uri if isinstance(uri, str) else None)
