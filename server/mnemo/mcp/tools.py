"""The MCP tools: thin wrappers that derive the workspace context, call the Service API through the `Backend`,
and format the answer for a model (`mnemo.mcp.format`). Their signatures are the tools' schemas (the SDK reads the
annotations); the docstrings are what the agent reads."""

import inspect
import os
from collections.abc import Callable
from typing import Annotated, Any, Literal

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, create_model

from mnemo.core.api_types import requests
from mnemo.core.api_types.requests import NoteFields, offered
from mnemo.core.models import MemoryType, SourceName, StatusName
from mnemo.mcp.edit_tools import add_edit_tools
from mnemo.mcp.format import (
    format_activation,
    format_batch,
    format_hydrate,
    format_recall,
    format_recent,
    format_stats,
    format_status,
)

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


TEXT = Field(description="One short, self-contained fact, decision, lesson or hand-off, written so it makes sense "
                         "months later without this chat.")


def declared(decl: type) -> list[inspect.Parameter]:
    """The parameters of a tool for the fields of `decl` (core/api_types/requests.py) the MCP tools offer: the
    declared type (narrowed to the declared choices), default, description and bounds."""
    out = []
    for f in offered(decl, "mcp"):
        p = f.param
        tp = Literal.__getitem__(p.choices) if p.choices else f.type
        out.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=p.default,
                                     annotation=Annotated[tp, Field(description=p.help, ge=p.ge, le=p.le)]))
    return out


def batch_note_model() -> type[BaseModel]:
    """One note of `remember_batch`: its text and the note's fields the tools offer (an unknown field is refused)."""
    fields: dict[str, Any] = {p.name: (p.annotation, p.default) for p in declared(NoteFields)}
    return create_model("BatchNoteIn", __config__=ConfigDict(extra="forbid"),
                        text=(Annotated[str, TEXT], ...), **fields)


def with_parameters(fn: Callable[..., Any], params: list[inspect.Parameter]) -> Callable[..., Any]:
    """`fn` with the signature the MCP SDK reads its input schema from (`fn` takes them as keywords)."""
    fn.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    return fn


def add_tools(server: MCPServer, backend, workspace) -> None:
    """Every tool, in the order `tools/list` shows them. `backend`: `mnemo.mcp.server.Backend`; `workspace`:
    `mnemo.mcp.server.Workspace`."""
    _memory_tools(server, backend, workspace)
    _skill_tools(server, backend, workspace)
    _curation_tools(server, backend, workspace)
    _overview_tools(server, backend, workspace)
    add_edit_tools(server, backend, workspace, READ, WRITE)


def _memory_tools(server: MCPServer, backend, workspace) -> None:
    async def remember(text: str, mcp_ctx: Context, file: str | None = None, **options: Any) -> str:
        """Store a memory in this repository's project scope, for later sessions and other agents. Call it when
        you learn something durable: a decision and its reason, a gotcha, a convention, a fix that worked, the
        user's preference. Before ending a session, remember a hand-off (kind "handoff"): what was done, what is
        left, what to watch. Saying the same thing again confirms the existing memory instead of duplicating it.
        Never include secrets (refused)."""
        ctx = await workspace.context(mcp_ctx)
        anchors = [{"path": file}] if file else None
        res = await backend.call("remember", ctx, text, **options, source="agent", anchors=anchors)
        return format_status(res, "remember")

    # its options are declared once (core/api_types/requests.py), with the CLI's and the service's
    P = inspect.Parameter
    server.tool(annotations=WRITE)(with_parameters(remember, [
        P("text", P.POSITIONAL_OR_KEYWORD, annotation=Annotated[str, TEXT]),
        P("mcp_ctx", P.POSITIONAL_OR_KEYWORD, annotation=Context),
        *declared(requests.RememberOptions),
        P("file", P.KEYWORD_ONLY, default=None, annotation=Annotated[str | None, Field(
            description="repository-relative path the note is about, if any")]),
    ]))

    async def remember_batch(notes: list[Any], mcp_ctx: Context) -> str:
        """Store many memories in one call (an import, or what a long session learned): each note gets every check
        of `remember` (secrets refused, the same claim confirmed, contradictions held in Review), in order, much
        faster than one call per note. The answer lists what became of each note by its number."""
        ctx = await workspace.context(mcp_ctx)
        items = [n.model_dump(exclude_none=True) for n in notes]
        res = await backend.call("remember_batch", ctx, items, source="agent")
        return format_batch(res)

    server.tool(annotations=WRITE)(with_parameters(remember_batch, [
        P("notes", P.POSITIONAL_OR_KEYWORD, annotation=Annotated[list[batch_note_model()], Field(  # type: ignore[misc]
            min_length=1, max_length=1000, description=(
                "The notes to store (at most 1000), each one short, self-contained fact with optional kind, type, "
                "tags and importance, as for `remember`."))]),
        P("mcp_ctx", P.POSITIONAL_OR_KEYWORD, annotation=Context),
    ]))

    @server.tool(annotations=READ)
    async def recall(
        query: Annotated[str, Field(description="what you need to know, in words (a question or the task)")],
        mcp_ctx: Context,
        limit: Annotated[int, Field(ge=1, le=20, description="how many cards (default 5)")] = 5,
        scope: Annotated[Literal["hybrid", "project", "global", "team"],
                         Field(description="hybrid (default) = this project + global + team")] = "hybrid",
        include_docs: Annotated[bool, Field(description="also search the repository's Markdown docs")] = True,
        min_confidence: Annotated[float | None, Field(
            ge=0, le=1, description="hide hits below this confidence (default 0.15, the store's "
                                    "MNEMO_MIN_CONFIDENCE; with a filter below: 0, every match with its "
                                    "confidence; 0 shows every hit)")] = None,
        types: Annotated[list[MemoryType] | None,
                         Field(description="only memories of these types")] = None,
        kind: Annotated[str | None, Field(description="only this kind (decision, lesson, ...)")] = None,
        branch: Annotated[str | None, Field(description="only memories of this branch (or branch-free)")] = None,
        tags: Annotated[list[str] | None, Field(description="only memories carrying every one of these tags")
                        ] = None,
        since: Annotated[str | None, Field(description="last written at or after: 2026-11-30, 7d, 12h, ...")
                         ] = None,
        until: Annotated[str | None, Field(description="last written at or before (same forms)")] = None,
        author: Annotated[str | None, Field(description="only memories written by this user")] = None,
        source: Annotated[SourceName | None,
                          Field(description="only memories from this source")] = None,
        status: Annotated[StatusName | None,
                          Field(description="only this status (default: active)")] = None,
    ) -> str:
        """Search this repository's memory (earlier decisions, lessons, conventions, hand-offs) and its indexed
        Markdown docs, by meaning and keywords. Call it at the start of a task, before changing unfamiliar code,
        and whenever you wonder "did we decide this before?". Returns compact cards with provenance (scope,
        project, branch, source, updated, confidence, trust); `hydrate` an id for more."""
        ctx = await workspace.context(mcp_ctx)
        res = await backend.call("recall", ctx, query, limit=limit, scope=scope, include_docs=include_docs,
                                 min_confidence=min_confidence, types=types, kind=kind, branch=branch, tags=tags,
                                 since=since, until=until, author=author, source=source, status=status)
        return format_recall(res)

    @server.tool(annotations=READ)
    async def hydrate(
        item_id: Annotated[str, Field(description="an id from a recall card (mem-..., blk-..., team-...)")],
        mcp_ctx: Context,
        mode: Annotated[Literal["default", "related"],
                        Field(description="default: the item and a small neighbourhood; related: a wider one")
                        ] = "default",
    ) -> str:
        """The full text and bounded surroundings of one recall hit: a note with its metadata and related notes,
        or a Markdown section with its neighbouring sections in the same file."""
        ctx = await workspace.context(mcp_ctx)
        return format_hydrate(await backend.call("hydrate", ctx, item_id, mode))


FileArg = Annotated[str | None, Field(description="the file you are about to read or edit (path relative to the "
                                                   "repository, or absolute)")]
RequestArg = Annotated[str | None, Field(description="the user's request or your current step")]


def _need_file_or_request(file: str | None, request: str | None) -> None:
    if not file and not request:
        raise ToolError("give a file, a request, or both. What to do: pass the path you are editing and/or what the "
                        "user asked for")


def _skill_tools(server: MCPServer, backend, workspace) -> None:
    @server.tool(annotations=READ)
    async def activate_skills(
        mcp_ctx: Context,
        file: FileArg = None,
        request: RequestArg = None,
    ) -> str:
        """The project's rules and skills that apply to this file and request (from skills/, .github
        instructions, .cursor rules, CLAUDE.md, AGENTS.md ...), as an "Active skills" block to follow, plus why
        each one was chosen (glob, keyword, semantic match, scores, token cost). Call it before editing a file."""
        _need_file_or_request(file, request)
        ctx = await workspace.context(mcp_ctx)
        return format_activation(await backend.call("activate_skills", ctx, file, request))

    @server.tool(annotations=READ)
    async def context(
        mcp_ctx: Context,
        file: FileArg = None,
        request: RequestArg = None,
        budget: Annotated[int, Field(ge=100, le=20000, description="tokens for the whole block (default 2000)")
                          ] = 2000,
    ) -> str:
        """Everything Mnemo would put in front of you for this file and request, in one block under a token
        budget: the skills and rules that apply (their text) and the memories (quoted, with provenance): those
        anchored to the file first, then those recall finds; a note whose code changed since it was written says
        so. One call instead of `recall` + `activate_skills`; call it at the start of a task and before editing a
        file. The same block Claude Code's hooks and `mnemo context` give."""
        _need_file_or_request(file, request)
        ctx = await workspace.context(mcp_ctx)
        res = await backend.call("context", ctx, file, request, event="context", budget=budget, client="any")
        return res.get("markdown") or "Nothing in Mnemo's memory or skills applies to this file and request.\n"


def _curation_tools(server: MCPServer, backend, workspace) -> None:
    @server.tool(annotations=WRITE)
    async def promote(
        memory_id: Annotated[str, Field(description="a project memory id (mem-...)")],
        mcp_ctx: Context,
        to: Annotated[Literal["global", "team"],
                      Field(description="global: your other repositories too; team: everyone on the team server")
                      ] = "global",
    ) -> str:
        """Share a project memory more widely: `global` makes it visible in all of this user's repositories,
        `team` sends it to the team's Chroma server for every member. Only for facts that hold beyond this
        project. Secrets are refused; provenance (the project and note it came from) is kept."""
        ctx = await workspace.context(mcp_ctx)
        res = await backend.call("promote", ctx, memory_id, to)
        return format_status(res, f"promote to {to}")

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                             open_world_hint=False))
    async def deprecate(
        memory_id: Annotated[str, Field(description="the memory id (mem-... or team-...)")],
        mcp_ctx: Context,
        reason: Annotated[str | None, Field(description="why it no longer holds")] = None,
    ) -> str:
        """Take a memory that is wrong or outdated out of recall (it stays in history with the reason). Use it
        when a recalled note contradicts the current code or a newer decision."""
        ctx = await workspace.context(mcp_ctx)
        return format_status(await backend.call("deprecate", ctx, memory_id, reason), "deprecate")

    _anchor_tool(server, backend, workspace)


def _anchor_tool(server: MCPServer, backend, workspace) -> None:
    @server.tool(annotations=WRITE)
    async def anchor(
        memory_id: Annotated[str, Field(description="the memory id (mem-...), e.g. from remember's answer")],
        file: Annotated[str, Field(description="repository-relative path of the code the memory is about")],
        mcp_ctx: Context,
        symbol: Annotated[str | None, Field(description="a function, class or method in the file "
                                                        "(Class.method); omit to anchor to the whole file")] = None,
        line: Annotated[int | None, Field(ge=1, description="instead of symbol: a 1-based line; the symbol around "
                                                            "it is used")] = None,
    ) -> str:
        """Tie a memory to the code it is about, e.g. after fixing a function, anchor the lesson to that function.
        Editors then show it when someone works on that code, and flag it as stale when the code changes."""
        from mnemo.cli.anchor_cmd import code_anchor  # lazy: tree-sitter loads only when an anchor is made
        from mnemo.core.errors import MnemoError

        ctx = await workspace.context(mcp_ctx)
        root = ctx.get("root")
        path = file if os.path.isabs(file) or not root else os.path.join(root, file)
        try:  # (a parse of a large file must not hold up the other requests)
            a = await anyio.to_thread.run_sync(lambda: code_anchor(root, path, symbol, line))
        except MnemoError as exc:
            raise ToolError(exc.message + (f". What to do: {exc.hint}" if exc.hint else "")) from exc
        res = await backend.call("anchor", ctx, memory_id, a)
        placed = res.get("memory", {}).get("anchors", [])
        where = next((x for x in placed if x.get("symbol") == a.get("symbol")), {"path": file})
        target = where.get("path", file) + (f" › {where['symbol']}" if where.get("symbol") else "")
        return format_status({**res, "message": f"anchored to {target}"}, "anchor")


def _overview_tools(server: MCPServer, backend, workspace) -> None:
    @server.tool(annotations=READ)
    async def stats(mcp_ctx: Context) -> str:
        """What Mnemo holds for this repository: memory counts by scope, type and tier, indexed docs, the review
        queue, the dense index, and the team server's state."""
        ctx = await workspace.context(mcp_ctx)
        st = await backend.call("stats", ctx)
        try:
            team = await backend.call("team_status", ctx)
        except ToolError:
            team = None
        return format_stats(st, team)

    @server.tool(annotations=READ)
    async def recent_context(
        mcp_ctx: Context,
        limit: Annotated[int, Field(ge=1, le=50, description="how many recent notes (default 10)")] = 10,
        days: Annotated[float, Field(gt=0, le=3650, description="how far back (default 14)")] = 14.0,
    ) -> str:
        """What was learned lately in this repository: the hand-offs earlier agent sessions left, and recent
        decisions and lessons (also from teammates). Call it first when you start working here."""
        ctx = await workspace.context(mcp_ctx)
        return format_recent(await backend.call("recent_context", ctx, limit, days))


__all__ = ["READ", "WRITE", "add_tools"]
