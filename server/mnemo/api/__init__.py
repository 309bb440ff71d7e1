"""The service API, declared once: `Service` lists every operation with its typed parameters and typed result.

Every surface calls these operations: the CLI, the language server and the MCP server through
`mnemo.daemon.client.DaemonService` (over the owner's socket), the owner and tests through
`mnemo.service.LocalService` (in process). Both follow this declaration: `SERVICE_METHODS` (what the owner serves)
and the argument mapping of the client are derived from `Service` by introspection, and `call_arguments` refuses
an argument an operation does not take - on the client before anything is sent, and on the owner with an
`InvalidInput` that names the accepted arguments. Results are JSON objects, typed as TypedDicts in
`mnemo/core/api_types/results.py` (made of the records in `mnemo/core/api_types/records.py`); the options several
surfaces offer (remember's) are declared once in `mnemo/core/api_types/requests.py` and taken as
`**options: Unpack[...]`, which `signature` expands.

tests/unit/test_service_contract.py checks that LocalService matches this declaration and that real results have
these shapes; tests/unit/test_protocol_ts.py that the extension's `protocol.ts` reads only declared fields and sends
only declared parameters. Adding an operation: declare it in `Service` (with its result type), implement it in
`LocalService` (and, if the extension calls it, add its `...Params` interface to `protocol.ts`).
"""

import inspect
from collections.abc import Callable
from functools import cache
from typing import Any, Protocol, Unpack, get_args, get_origin

from mnemo.core.api_types import records, requests, results
from mnemo.core.api_types.records import Anchor, CodeSymbol, Ctx, Memory
from mnemo.core.api_types.requests import BatchNote, RememberOptions
from mnemo.core.api_types.results import (
    ActivationResult,
    AnchorCheck,
    AnchorsCheck,
    BranchDelete,
    BranchMergeReport,
    CompactReport,
    ContextBlock,
    ContextCommit,
    DecayReport,
    DoctorResult,
    Forgotten,
    Health,
    HoverContext,
    Hydrated,
    IndexDocsResult,
    MarkdownExport,
    MarkdownImport,
    MemoryCards,
    MemoryChange,
    MemoryHistory,
    MemoryList,
    MergedBranches,
    PublishReport,
    RecallResult,
    RecentContext,
    RememberBatchResult,
    RememberResult,
    ReviewList,
    ReviewResolution,
    SessionEnd,
    SkillList,
    SkillsCheck,
    SnapshotExport,
    SnapshotMergeReport,
    Stats,
    TeamStatus,
    UpdateResult,
)
from mnemo.core.errors import InvalidInput
from mnemo.core.text import strip_controls

Progress = Callable[[dict[str, Any]], None]


# -- the operations ---------------------------------------------------------------------------------------------
class Service(Protocol):
    """Every operation of the service API. `ctx` first (except `health`); what follows a bare `*` is passed by
    name only; `progress` is local to the caller (over the socket it travels as `"_progress": true`)."""

    def health(self) -> Health:
        """The owner's version, protocol, pid, store and readiness, and the store-wide settings it applies."""

    # memories
    def remember(self, ctx: Ctx, text: str, **options: Unpack[RememberOptions]) -> RememberResult:
        """Store a memory in the project scope (checks, dedup, conflicts). Its options, their defaults and help
        are declared once in `RememberOptions` (core/api_types/requests.py)."""

    def remember_batch(self, ctx: Ctx, items: list[BatchNote], *, source: str = "user", status: str | None = None,
                       on_conflict: str | None = None, progress: Progress | None = None) -> RememberBatchResult:
        """Many `remember`s at once (at most MNEMO_MAX_BATCH_ITEMS): every check of each, the same decisions as
        one after the other; embedded together and committed in chunks. A refused note is an `error` item."""

    def recall(self, ctx: Ctx, query: str, *, scope: str = "hybrid", limit: int = 5, types: list[str] | None = None,
               include_docs: bool = True, include_cold: bool = False, min_confidence: float | None = None,
               kind: str | None = None, branch: str | None = None, tags: list[str] | None = None,
               since: float | str | None = None, until: float | str | None = None, author: str | None = None,
               source: str | None = None, status: str | None = None) -> RecallResult:
        """Memories and Markdown blocks relevant to `query`, as cards; the filters (core/memory/filters.py) keep only
        memories of those types, kind, branch (or branch-independent), tags (all of them), last written between
        `since` and `until` (epoch seconds, an ISO date or a time ago like 7d), author, source and status."""

    def hydrate(self, ctx: Ctx, item_id: str, mode: str = "default") -> Hydrated:
        """One recall hit in full with its bounded surroundings (`mode` default | related)."""

    def get_memory(self, ctx: Ctx, memory_id: str) -> Memory:
        """One memory visible from this project."""

    def promote(self, ctx: Ctx, memory_id: str, to: str = "global") -> MemoryChange:
        """A project memory to the global scope or to the team server."""

    def deprecate(self, ctx: Ctx, memory_id: str, reason: str | None = None) -> MemoryChange:
        """Out of recall, kept in history (a team record: on the server, for everyone)."""

    def forget(self, ctx: Ctx, memory_id: str, reason: str | None = None) -> Forgotten:
        """Delete; a tombstone keeps it from coming back through imports, and keeps it for `restore` until the
        forget retention (`forget_retention_days`, default 30) has passed."""

    def update(self, ctx: Ctx, memory_id: str, text: str | None = None, *, type: str | None = None,
               kind: str | None = None, importance: float | None = None, tags: list[str] | None = None,
               reason: str | None = None, source: str = "user", on_conflict: str | None = None) -> UpdateResult:
        """Edit a memory in place: the new version is re-embedded and re-checked (secrets, poisoning, the same
        text elsewhere, conflicts); the previous version is kept (`history`)."""

    def history(self, ctx: Ctx, memory_id: str) -> MemoryHistory:
        """Every version of a memory, oldest first, with who wrote it, when and why."""

    def list_memories(self, ctx: Ctx, *, scope: str = "hybrid", branch: str | None = None, type: str | None = None,
                      kind: str | None = None, include_deprecated: bool = False, include_cold: bool = False,
                      status: str | None = "active", all_branches: bool = False, limit: int = 200,
                      offset: int = 0, tags: list[str] | None = None, since: float | str | None = None,
                      until: float | str | None = None, author: str | None = None, source: str | None = None,
                      search: str | None = None) -> MemoryList:
        """The memories this workspace sees, filtered (the fields of `recall`, and `search`: every word in the
        text, kind or tags), newest first."""

    def stats(self, ctx: Ctx) -> Stats:
        """Counts by scope, type, tier, branch and status; the index, the store and the tiers."""

    def index_docs(self, ctx: Ctx, root: str | None = None, *, progress: Progress | None = None) -> IndexDocsResult:
        """(Re-)index the workspace's Markdown files (changed files only)."""

    # skills
    def skills_list(self, ctx: Ctx) -> SkillList:
        """The skills and rules of the workspace (every supported format)."""

    def skills_check(self, ctx: Ctx) -> SkillsCheck:
        """The skills load report: problems, shadowed skills, held files."""

    def activate_skills(self, ctx: Ctx, file: str | None = None, message: str | None = None, *,
                        max_skills: int | None = None, token_budget: int | None = None) -> ActivationResult:
        """The skills that apply to `file` and `message`, why, and the prompt block to inject."""

    # lifecycle and sharing
    def review_list(self, ctx: Ctx, kind: str | None = None, include_resolved: bool = False) -> ReviewList:
        """The review queue (conflicts, overrides, pending notes, stale anchors, merges, held skills)."""

    def review_resolve(self, ctx: Ctx, review_id: int, resolution: str) -> ReviewResolution:
        """Answer a review item with one of its `resolutions`."""

    def snapshot_export(self, ctx: Ctx, path: str, scopes: list[str] | None = None,
                        branches: list[str] | None = None) -> SnapshotExport:
        """Write a snapshot file of the chosen scopes and branches (secrets withheld)."""

    def snapshot_diff(self, ctx: Ctx, path: str, strategy: str = "newer_wins") -> SnapshotMergeReport:
        """What merging a snapshot would do; writes nothing."""

    def snapshot_merge(self, ctx: Ctx, path: str, strategy: str = "newer_wins", *,
                       progress: Progress | None = None) -> SnapshotMergeReport:
        """Merge a snapshot file (imported memories are untrusted until accepted in Review)."""

    def markdown_export(self, ctx: Ctx, path: str, scopes: list[str] | None = None) -> MarkdownExport:
        """Write the memories as Markdown into directory `path`: one file per scope and type (project, global)."""

    def markdown_import(self, ctx: Ctx, path: str, dry_run: bool = False) -> MarkdownImport:
        """Read exported Markdown back (a directory or one file): changes become edits, missing ids are restored,
        entries without an id become memories, memories in no file are reported (never deleted)."""

    def publish(self, ctx: Ctx, targets: list[str] | None = None, dry_run: bool = False, budget: int | None = None,
                sync: bool = False) -> PublishReport:
        """Write the project's reviewed memories into the rule files agents read (CLAUDE.md and AGENTS.md sections,
        Cursor, Copilot, Windsurf and Continue rule files), after reading a person's edits of them back (edits,
        deletions to Review, additions); `dry_run`: the plan and the diff only; `sync`: only the files published
        before."""

    def branch_diff(self, ctx: Ctx, source: str) -> BranchMergeReport:
        """What merging branch `source`'s memories into the context's branch would do; writes nothing."""

    def branch_merge(self, ctx: Ctx, source: str) -> BranchMergeReport:
        """Merge branch `source`'s memories into the context's branch."""

    def branch_delete(self, ctx: Ctx, name: str, force: bool = False) -> BranchDelete:
        """Forget a branch's memories (refused while some are unmerged, unless `force`)."""

    def merged_branches(self, ctx: Ctx, queue: bool = True) -> MergedBranches:
        """Branches git shows merged into the default branch whose memories are not; `queue` files review items."""

    def decay(self, ctx: Ctx, now: float | str | None = None, dry_run: bool = False,
              force: bool = False) -> DecayReport:
        """Lower the importance of unused memories as of `now`; the least important go cold."""

    def compact(self, ctx: Ctx) -> CompactReport:
        """Merge near-duplicates, summarize long notes, re-tier."""

    def restore(self, ctx: Ctx, memory_id: str) -> MemoryChange:
        """A cold memory back to warm, with the importance it had; a forgotten one back from its tombstone."""

    def anchor(self, ctx: Ctx, memory_id: str, anchor: Anchor) -> MemoryChange:
        """Attach a memory to a place in the code."""

    def unanchor(self, ctx: Ctx, memory_id: str, path: str | None = None,
                 symbol: str | None = None) -> MemoryChange:
        """Detach a memory from code: every anchor, those into `path`, or the one on `symbol` in `path`."""

    def check_anchors(self, ctx: Ctx, path: str, symbols: list[CodeSymbol] | None) -> AnchorCheck:
        """Compare the anchors in file `path` with its current symbols; changed ones go to Review."""

    def check_anchor_files(self, ctx: Ctx, paths: list[str] | None = None) -> AnchorsCheck:
        """Compare the anchors in `paths` (None: every anchored file of the project) with the working tree as it
        is now (`mnemo anchors check`, the session-end hook); changed ones go to Review once."""

    # doctor, team, hand-off
    def doctor(self, ctx: Ctx) -> DoctorResult:
        """The store's health checks, as the owner sees them."""

    def team_status(self, ctx: Ctx) -> TeamStatus:
        """The team server's configuration, reachability and outbox."""

    def recent_context(self, ctx: Ctx, limit: int = 10, days: float = 14.0) -> RecentContext:
        """Hand-offs and recent notes of this project (and teammates'), for the start of a session."""

    # what agents receive without asking (core/agent/context_block.py), session hand-offs (core/agent/handoff.py)
    def context(self, ctx: Ctx, file: str | None = None, message: str | None = None, *, event: str = "context",
                session: str | None = None, budget: int | None = None, learn: str | None = None,
                client: str | None = None, source: str | None = None, min_confidence: float | None = None,
                commit: bool = True, symbol: str | None = None, line: int | None = None) -> ContextBlock:
        """The context block for an event (session-start | prompt | pre-tool | context) under `budget` tokens,
        never repeating what `session` already received; `learn` (off | confirm | auto) files stated corrections.
        The memories anchored to `file` come first (those on `symbol`, or the symbol around `line`, before others)."""

    def context_commit(self, ctx: Ctx, session: str | None = None, keys: list[str] | None = None,
                       last_file: str | None = None, reset: bool = False) -> ContextCommit:
        """Record what a session received (after a hook delivered a block built with commit=False)."""

    def session_end(self, ctx: Ctx, session: str | None = None, summary: dict[str, Any] | None = None,
                    client: str | None = None) -> SessionEnd:
        """Write the session's hand-off note from its summary and forget what the session was given."""

    # the editor's context in one round trip (core/memory/anchored_to_file.py)
    def hover_context(self, ctx: Ctx, path: str | None = None, line: int | None = None, symbol: str | None = None,
                      query: str | None = None, limit: int = 5, include_docs: bool = True,
                      min_confidence: float | None = None, skills: bool = True, max_skills: int | None = None,
                      token_budget: int | None = None) -> HoverContext:
        """What an editor shows at a position: recall cards for `query`, the memories anchored at the cursor (with
        their stale state), every anchor of the file, and the file's active skills."""

    def memory_cards(self, ctx: Ctx, ids: list[str]) -> MemoryCards:
        """The card and the record of each memory opened by id; ids not visible from this project are `missing`."""


# -- derived from `Service` ---------------------------------------------------------------------------------------
SERVICE_METHODS = frozenset(name for name, value in vars(Service).items()
                            if not name.startswith("_") and inspect.isfunction(value))
LOCAL_ONLY = frozenset({"progress"})  # parameters that never cross the socket (a callable)


@cache
def signature(method: str) -> inspect.Signature:
    """The parameters of `method` without `self`."""
    if method not in SERVICE_METHODS:
        raise InvalidInput(f"unknown method {method!r}", hint=f"use one of: {', '.join(sorted(SERVICE_METHODS))}")
    sig = inspect.signature(getattr(Service, method))
    return sig.replace(parameters=expand(list(sig.parameters.values())[1:]))


def expand(params: list[inspect.Parameter]) -> list[inspect.Parameter]:
    """`**options: Unpack[Declared]` as the keyword parameters it stands for, with their declared defaults."""
    out = []
    for p in params:
        if p.kind is p.VAR_KEYWORD and get_origin(p.annotation) is Unpack:
            out += [inspect.Parameter(f.name, p.KEYWORD_ONLY, default=f.param.default, annotation=f.type)
                    for f in requests.fields(get_args(p.annotation)[0])]
        else:
            out.append(p)
    return out


def parameters(method: str) -> tuple[str, ...]:
    """The names `method` takes, in order."""
    return tuple(signature(method).parameters)


def accepted(method: str, wire: bool = False) -> str:
    """`ctx, text (required), type, kind, ...`: what `method` takes, for an error message."""
    names = [(n, p) for n, p in signature(method).parameters.items() if not (wire and n in LOCAL_ONLY)]
    return ", ".join(f"{n} (required)" if p.default is p.empty else n for n, p in names) or "no arguments"


@cache
def _plan(method: str, wire: bool) -> tuple[tuple[str, ...], frozenset[str], frozenset[str], tuple[str, ...], bool]:
    """(every name in order, the names a call may give, the required ones, the positional ones in order, whether
    every parameter is positional-or-keyword or keyword-only) of `method`, for `call_arguments`."""
    params = signature(method).parameters
    order = tuple(params)
    taken = frozenset(n for n in order if not (wire and n in LOCAL_ONLY))
    required = frozenset(n for n, p in params.items() if p.default is p.empty)
    positional = tuple(n for n, p in params.items() if p.kind is p.POSITIONAL_OR_KEYWORD)
    simple = all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params.values())
    return order, taken, required, positional, simple


def call_arguments(method: str, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None,
                   *, wire: bool = False) -> dict[str, Any]:
    """The named arguments of a call to `method`, checked against its declaration: an argument it does not take,
    one positional argument too many, a missing required one or one given twice is an `InvalidInput` that names
    the accepted arguments (nothing was sent or done). `wire`: the arguments arrived over the socket, where local
    parameters (`progress`) cannot appear."""
    kwargs = kwargs or {}
    sig = signature(method)
    order, taken, required, positional, simple = _plan(method, wire)
    if simple and len(args) <= len(positional) and taken.issuperset(kwargs):
        # the common case without `inspect`'s binding (~20 us a call on each side of the socket, issue 22): every
        # name declared, none given twice, every required one given; anything else is bound below for its error
        given = dict(zip(positional, args, strict=False))
        if given.keys().isdisjoint(kwargs):
            given.update(kwargs)
            if required <= given.keys():
                return {n: given[n] for n in order if n in given}
    names = [n for n in sig.parameters if not (wire and n in LOCAL_ONLY)]
    unknown = [k for k in kwargs if k not in names]
    hint = f"{method} takes: {accepted(method, wire)}"
    if unknown:  # a name from the wire is data: shortened, control characters out
        names_given = [strip_controls(str(k))[:60] for k in unknown[:5]]
        raise InvalidInput(f"{method} does not take {', '.join(f'`{k}`' for k in names_given)}; nothing was done",
                           hint=hint, method=method, unknown=names_given)
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as exc:  # too many positional arguments, a missing required one, one given twice
        raise InvalidInput(f"bad arguments for {method}: {exc}; nothing was done", hint=hint, method=method) from None
    return dict(bound.arguments)


__all__ = [
    "LOCAL_ONLY", "SERVICE_METHODS", "ActivationResult", "Anchor", "AnchorCheck", "AnchorsCheck", "BatchNote", "BranchDelete",
    "BranchMergeReport", "CodeSymbol", "CompactReport", "Ctx", "DecayReport", "DoctorResult", "Forgotten", "Health",
    "Hydrated", "IndexDocsResult", "MarkdownExport", "MarkdownImport", "Memory", "MemoryChange", "MemoryHistory",
    "MemoryList", "MergedBranches", "Progress", "PublishReport", "RecallResult", "RecentContext", "RememberBatchResult",
    "RememberOptions", "RememberResult", "ReviewList", "ReviewResolution", "Service", "SkillList", "SkillsCheck", "SnapshotExport",
    "SnapshotMergeReport", "Stats", "TeamStatus", "UpdateResult", "accepted", "call_arguments", "expand", "parameters",
    "records", "requests", "results", "signature",
]
