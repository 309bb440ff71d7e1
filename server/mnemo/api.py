"""The service API, declared once: `Service` lists every operation with its typed parameters and typed result.

Every surface calls these operations: the CLI, the language server and the MCP server through
`mnemo.daemon.client.DaemonService` (over the owner's socket), the owner and tests through
`mnemo.service.LocalService` (in process). Both follow this declaration: `SERVICE_METHODS` (what the owner serves)
and the argument mapping of the client are derived from `Service` by introspection, and `call_arguments` refuses
an argument an operation does not take - on the client before anything is sent, and on the owner with an
`InvalidInput` that names the accepted arguments. Results are JSON objects, typed here as TypedDicts (keys marked
`NotRequired` appear only in some answers). tests/unit/test_service_contract.py checks that LocalService matches
this file, that real results have these shapes, and that the extension's `protocol.ts` reads only fields declared
here. Adding an operation: declare it in `Service` (and its result type), implement it in `LocalService`.

No `from __future__ import annotations` here: TypedDict needs its annotations evaluated to know which keys are
required (Python 3.11).
"""

import inspect
from collections.abc import Callable
from functools import cache
from typing import Any, NotRequired, Protocol, TypedDict

from mnemo.core.errors import InvalidInput

Progress = Callable[[dict[str, Any]], None]


# -- the caller's context (`mnemo.core.models.Context` as a dict) -------------------------------------------------
class Ctx(TypedDict, total=False):
    """Who asks and where, derived from the workspace (`mnemo.core.identity.detect_context`), never from an agent;
    with the caller's request-shaped settings (None: not said, the owner's environment applies)."""

    project_id: str  # required: the owner refuses a context without it
    project_name: str
    root: str | None
    branch: str | None
    default_branch: str | None
    user: str
    origin: str | None
    write_policy: str | None
    on_conflict: str | None
    secrets: str | None


# -- records ----------------------------------------------------------------------------------------------------
class Anchor(TypedDict, total=False):
    """Where a memory is attached in the code (lines are 0-based; `hash`: sha256 of the symbol's source)."""

    path: str
    symbol: str
    kind: str
    start_line: int
    end_line: int
    hash: str


class CodeSymbol(TypedDict, total=False):
    """A symbol of a file as it is now (what `check_anchors` compares the anchors with)."""

    name: str
    hash: str
    start_line: int
    end_line: int


class Memory(TypedDict):
    """A stored memory (`mnemo.core.models.Memory`)."""

    id: str
    text: str
    type: str
    kind: str
    scope: str
    project_id: str
    project_name: str
    branch: str | None
    importance: float
    confirmations: int
    created_at: float
    updated_at: float
    last_accessed: float
    access_count: int
    content_hash: str
    source: str
    provenance: dict[str, Any]
    anchors: list[Anchor]
    superseded_by: str | None
    deprecated: bool
    deprecated_reason: str | None
    tier: str
    tags: list[str]
    trust: str
    status: str
    author: str
    flags: list[str]


class Card(TypedDict):
    """A recall hit: a note (`source_kind` "note") or a Markdown block ("markdown")."""

    scope: str
    project_id: str
    project_name: str
    source_kind: str
    item_id: str
    block_id: str | None
    source_path: str | None
    title: str
    heading_path: list[str]
    updated_at: float
    score: float
    confidence: float
    confidence_state: str
    compressed_summary: str
    key_points: list[str]
    can_hydrate: bool
    trust: str
    lines: NotRequired[list[int]]  # Markdown blocks
    type: NotRequired[str]  # notes, from here on
    note_kind: NotRequired[str]
    branch: NotRequired[str | None]
    confirmations: NotRequired[int]
    source: NotRequired[str]
    author: NotRequired[str]
    promoted_from: NotRequired[dict[str, Any] | None]
    imported_from: NotRequired[dict[str, Any] | None]
    tier: NotRequired[str]
    flags: NotRequired[list[str]]
    anchors: NotRequired[list[Anchor]]


class Conflict(TypedDict):
    """A stored memory a new one contradicts (`relation` conflict) or overrides."""

    id: str
    text: str
    scope: str
    branch: str | None
    type: str
    similarity: float
    relation: str
    level: str
    reasons: list[str]
    resolution: str | None


class SameClaim(TypedDict):
    """The memory a new one restates (a paraphrase confirms it; a refinement replaces or overrides it)."""

    id: str
    scope: str
    similarity: float
    refines: bool
    reasons: list[str]


class TeamShare(TypedDict):
    id: NotRequired[str]
    record_id: str
    status: str
    namespace: str
    retry_in_s: NotRequired[float]
    error: NotRequired[str | None]


class BriefMemory(TypedDict):
    """A memory in a branch plan."""

    id: str
    text: str
    type: str
    kind: str
    branch: str | None
    updated_at: float


class SnapshotAction(TypedDict):
    """One memory of a snapshot import plan."""

    op: str
    id: str
    text: str
    scope: str
    branch: str | None
    reason: str
    local: NotRequired[dict[str, Any]]  # {id, text, updated_at} of the local memory it collides with
    remote_updated_at: NotRequired[float]


class ReviewItem(TypedDict):
    id: int
    kind: str
    created_at: float
    project_id: str | None
    item_id: str | None
    other_id: str | None
    item: Memory | None
    other: Memory | None
    payload: dict[str, Any]
    summary: str
    resolutions: list[str]
    help: str
    resolved_at: float | None
    resolution: str | None


class Skill(TypedDict):
    id: str
    name: str
    description: str
    source_path: str
    source_format: str
    scope: str
    globs: list[str]
    glob_mode: str
    keywords: list[str]
    triggers: list[str]
    tools_allowed: list[str]
    tags: list[str]
    importance: float
    always_apply: bool
    manual_only: bool
    content_hash: str
    token_cost: int
    warnings: list[str]
    flags: list[str]
    mtime: float
    size: int


class SkillProblem(TypedDict):
    path: str
    line: int
    reason: str
    severity: str
    source_format: str


class Activation(TypedDict):
    skill_id: str
    name: str
    description: str
    source_path: str
    source_format: str
    scope: str
    score: float
    activated_by: list[str]
    signals: dict[str, float]
    matched: dict[str, Any]
    token_cost: int
    always: bool
    reason: str
    tools_allowed: list[str]
    injected: bool


class SkillMiss(TypedDict):
    """A skill that did not activate (a near miss, left out by the budget, or held for review), and why."""

    skill_id: str
    name: str
    source_path: str
    why: str
    score: NotRequired[float]
    threshold: NotRequired[float]
    token_cost: NotRequired[int]
    flags: NotRequired[list[str]]
    hold_key: NotRequired[str]


class SkillHold(TypedDict):
    """A skill file that reads like a prompt injection, held until a person accepts it in Review."""

    key: str
    path: str
    name: str
    flags: list[str]
    state: str  # held | accepted


# -- results ----------------------------------------------------------------------------------------------------
class Health(TypedDict):
    version: str
    protocol: int
    pid: int
    home: str
    index_ready: bool
    model_loaded: bool
    config: dict[str, Any]  # the store-wide settings the owner applies (`mnemo.core.config.owner_view`)


class RememberResult(TypedDict):
    status: str  # created | confirmed | conflict | pending | kept_existing
    memory: Memory
    message: str
    conflicts: list[Conflict]
    same_as: NotRequired[SameClaim]


class MemoryChange(TypedDict):
    """promote, deprecate, restore, anchor. A team record deprecated on the server has `id` and no `memory`."""

    status: str
    memory: NotRequired[Memory]
    message: NotRequired[str]
    team: NotRequired[TeamShare]
    id: NotRequired[str]
    scope: NotRequired[str]


class Forgotten(TypedDict):
    status: str
    id: str
    tombstone: bool


class RecallResult(TypedDict):
    query: str
    scope: str
    cards: list[Card]
    warnings: list[str]
    took_ms: float
    min_confidence: float
    hidden_low_confidence: int


class HydrateBlock(TypedDict):
    block_id: str
    heading_path: list[str]
    text: str
    lines: list[int]
    is_hit: bool


class Hydrated(TypedDict):
    """A note with related cards, or a Markdown block with its neighbours in the file."""

    item_id: str
    source_kind: str
    mode: str
    memory: NotRequired[Memory]
    related: NotRequired[list[Card]]
    source_path: NotRequired[str]
    blocks: NotRequired[list[HydrateBlock]]
    truncated: NotRequired[bool]


class MemoryList(TypedDict):
    total: int
    memories: list[Memory]


class Stats(TypedDict):
    project: dict[str, str | None]  # id, name, branch, default_branch, root
    memories: dict[str, int]  # project, global, all_projects
    by_type: dict[str, int]
    by_tier: dict[str, int]
    by_branch: dict[str, int]
    by_status: dict[str, int]
    deprecated: int
    tombstones: int
    docs: dict[str, int]  # blocks, files
    review_open: int
    index: dict[str, Any]  # ready, indexed_seq, store_seq, rebuilds, last_error
    model_id: str | None
    store: dict[str, Any]  # home, db_bytes
    tiers: dict[str, dict[str, Any]]  # hot | warm | cold -> count, meaning, top


class IndexDocsResult(TypedDict):
    root: str
    files: int
    added: int
    updated: int
    unchanged: int
    removed: int
    skipped: int
    blocks_written: int
    problems: list[dict[str, Any]]


class SkillList(TypedDict):
    skills: list[Skill]


class SkillsCheck(TypedDict):
    files_seen: int
    loaded: int
    active_skills: int
    skipped: int
    warnings: int
    by_format: dict[str, int]
    problems: list[SkillProblem]
    shadowed: list[dict[str, Any]]
    skills: list[Skill]
    held: list[SkillHold]


class ActivationResult(TypedDict):
    file_path: str | None
    message: str | None
    activations: list[Activation]
    total_tokens: int
    threshold: float
    considered: int
    dropped: list[SkillMiss]
    held: list[SkillMiss]
    budget: dict[str, Any]  # {tokens, used, dropped: [SkillMiss]} when the token budget left skills out
    elapsed_ms: float
    registry_version: int
    embedder: str
    prompt_block: str


class DoctorCheck(TypedDict):
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str | None


class DoctorResult(TypedDict):
    checks: list[DoctorCheck]


class TeamStatus(TypedDict):
    configured: bool
    url: str | None
    namespace: str
    token: str  # set | not set
    source: str
    ca_cert: str | None
    hint: NotRequired[str]
    reachable: NotRequired[bool]
    breaker: NotRequired[dict[str, Any]]
    outbox: NotRequired[dict[str, Any]]
    collection: NotRequired[str]
    model_id: NotRequired[str]
    records: NotRequired[int]
    authors: NotRequired[dict[str, int]]
    recent: NotRequired[list[dict[str, Any]]]
    error: NotRequired[str | None]


class RecentItem(TypedDict):
    id: str
    scope: str
    type: str
    kind: str
    branch: str | None
    summary: str
    updated_at: float
    created_at: float
    author: str
    source: str
    confirmations: int
    status: str
    trust: str
    flags: list[str]
    project_name: str
    source_path: str | None


class RecentContext(TypedDict):
    project: dict[str, str | None]  # id, name, branch
    since: float
    days: float
    handoffs: list[RecentItem]
    recent: list[RecentItem]
    team: list[RecentItem]
    pending_review: int


class ReviewList(TypedDict):
    total: int
    by_kind: dict[str, int]
    items: list[ReviewItem]


class SnapshotExport(TypedDict):
    path: str
    bytes: int
    memories: int
    by_scope: dict[str, int]
    by_branch: dict[str, int]
    model_id: str | None
    sha256: str
    withheld_secrets: list[dict[str, Any]]


class SnapshotMergeReport(TypedDict):
    """snapshot_diff (`dry_run` true, nothing written) and snapshot_merge."""

    strategy: str
    snapshot: dict[str, Any]  # file, created_at, mnemo_version, model_id, source, counts, sha256
    imported: int
    replaced: int
    skipped_duplicates: int
    skipped_forgotten: int
    skipped_secrets: int
    conflicts: int
    resolutions: dict[str, int]
    changes: int
    conflict_details: list[SnapshotAction]
    new: list[SnapshotAction]
    secrets: list[dict[str, Any]]
    dry_run: bool
    vectors_replaced: NotRequired[list[str]]
    review_id: NotRequired[int]


class Superseded(TypedDict):
    by: str
    memory: BriefMemory


class BranchMergeReport(TypedDict):
    """branch_diff (`dry_run` true, nothing written) and branch_merge."""

    source: str
    target: str
    imported: int
    skipped_duplicates: int
    skipped_pending: int
    supersedes: int
    new: list[BriefMemory]
    duplicates: list[BriefMemory]
    pending: list[BriefMemory]
    superseded: list[Superseded]
    dry_run: bool
    copies: NotRequired[dict[str, str]]  # merged: source id -> the copy's id


class ReviewResolution(TypedDict):
    id: int
    kind: str
    resolution: str
    changed: NotRequired[list[str]]
    merge: NotRequired[BranchMergeReport]  # branch_merge items answered `merge`
    trusted: NotRequired[int]  # snapshot_merge items: memories now trusted


class BranchDelete(TypedDict):
    branch: str
    deleted: int
    unmerged: int
    unmerged_memories: list[BriefMemory]


class MergedBranch(TypedDict):
    branch: str
    head: str | None
    memories: int
    state: str  # merged | unmerged | gone
    unmerged_memories: NotRequired[int]
    review_id: NotRequired[int]


class MergedBranches(TypedDict):
    default_branch: str | None
    branches: list[MergedBranch]
    default_head: NotRequired[str]
    note: NotRequired[str]


class DecayReport(TypedDict):
    now: float
    half_life_hours: float
    tombstone_threshold: float
    scanned: int
    decayed: int
    untouched: int
    moved_to_cold: list[dict[str, Any]]
    tier_moves: list[dict[str, Any]]
    dry_run: bool
    tiers: dict[str, int]


class CompactReport(TypedDict):
    merged: list[dict[str, Any]]
    summarized: list[dict[str, Any]]
    tier_moves: list[dict[str, Any]]
    tiers: dict[str, int]


class AnchorCheck(TypedDict):
    path: str
    checked: int
    ok: int
    flagged: list[dict[str, Any]]  # memory_id, review_id, anchor, reason, title
    cleared: list[dict[str, Any]]  # memory_id, anchor


# -- the operations ---------------------------------------------------------------------------------------------
class Service(Protocol):
    """Every operation of the service API. `ctx` first (except `health`); what follows a bare `*` is passed by
    name only; `progress` is local to the caller (over the socket it travels as `"_progress": true`)."""

    def health(self) -> Health:
        """The owner's version, protocol, pid, store and readiness, and the store-wide settings it applies."""

    # memories
    def remember(self, ctx: Ctx, text: str, *, type: str = "project", kind: str = "fact", scope: str = "project",
                 tags: list[str] | None = None, importance: float = 0.5, source: str = "user",
                 anchors: list[Anchor] | None = None, trust: str = "trusted", status: str | None = None,
                 provenance: dict[str, Any] | None = None, on_conflict: str | None = None) -> RememberResult:
        """Store a memory in the project scope (checks, dedup, conflicts). `status` None: active, or pending when
        an agent writes under the `confirm` write policy."""

    def recall(self, ctx: Ctx, query: str, *, scope: str = "hybrid", limit: int = 5, types: list[str] | None = None,
               include_docs: bool = True, include_cold: bool = False,
               min_confidence: float | None = None) -> RecallResult:
        """Memories and Markdown blocks relevant to `query`, as cards."""

    def hydrate(self, ctx: Ctx, item_id: str, mode: str = "default") -> Hydrated:
        """One recall hit in full with its bounded surroundings (`mode` default | related)."""

    def get_memory(self, ctx: Ctx, memory_id: str) -> Memory:
        """One memory visible from this project."""

    def promote(self, ctx: Ctx, memory_id: str, to: str = "global") -> MemoryChange:
        """A project memory to the global scope or to the team server."""

    def deprecate(self, ctx: Ctx, memory_id: str, reason: str | None = None) -> MemoryChange:
        """Out of recall, kept in history (a team record: on the server, for everyone)."""

    def forget(self, ctx: Ctx, memory_id: str, reason: str | None = None) -> Forgotten:
        """Delete for good; a tombstone keeps it from coming back through imports."""

    def list_memories(self, ctx: Ctx, *, scope: str = "hybrid", branch: str | None = None, type: str | None = None,
                      kind: str | None = None, include_deprecated: bool = False, include_cold: bool = False,
                      status: str | None = "active", all_branches: bool = False, limit: int = 200,
                      offset: int = 0) -> MemoryList:
        """The memories this workspace sees, filtered, newest first."""

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
        """A cold memory back to warm, with the importance it had."""

    def anchor(self, ctx: Ctx, memory_id: str, anchor: Anchor) -> MemoryChange:
        """Attach a memory to a place in the code."""

    def check_anchors(self, ctx: Ctx, path: str, symbols: list[CodeSymbol] | None) -> AnchorCheck:
        """Compare the anchors in file `path` with its current symbols; changed ones go to Review."""

    # doctor, team, hand-off
    def doctor(self, ctx: Ctx) -> DoctorResult:
        """The store's health checks, as the owner sees them."""

    def team_status(self, ctx: Ctx) -> TeamStatus:
        """The team server's configuration, reachability and outbox."""

    def recent_context(self, ctx: Ctx, limit: int = 10, days: float = 14.0) -> RecentContext:
        """Hand-offs and recent notes of this project (and teammates'), for the start of a session."""


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
    return sig.replace(parameters=list(sig.parameters.values())[1:])


def parameters(method: str) -> tuple[str, ...]:
    """The names `method` takes, in order."""
    return tuple(signature(method).parameters)


def accepted(method: str, wire: bool = False) -> str:
    """`ctx, text (required), type, kind, ...`: what `method` takes, for an error message."""
    names = [(n, p) for n, p in signature(method).parameters.items() if not (wire and n in LOCAL_ONLY)]
    return ", ".join(f"{n} (required)" if p.default is p.empty else n for n, p in names) or "no arguments"


def call_arguments(method: str, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None,
                   *, wire: bool = False) -> dict[str, Any]:
    """The named arguments of a call to `method`, checked against its declaration: an argument it does not take,
    one positional argument too many, a missing required one or one given twice is an `InvalidInput` that names
    the accepted arguments (nothing was sent or done). `wire`: the arguments arrived over the socket, where local
    parameters (`progress`) cannot appear."""
    kwargs = kwargs or {}
    sig = signature(method)
    names = [n for n in sig.parameters if not (wire and n in LOCAL_ONLY)]
    unknown = [k for k in kwargs if k not in names]
    hint = f"{method} takes: {accepted(method, wire)}"
    if unknown:
        shown = ", ".join(f"`{str(k)[:60]}`" for k in unknown[:5])
        raise InvalidInput(f"{method} does not take {shown}; nothing was done", hint=hint,
                           method=method, unknown=[str(k)[:60] for k in unknown[:5]])
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as exc:  # too many positional arguments, a missing required one, one given twice
        raise InvalidInput(f"bad arguments for {method}: {exc}; nothing was done", hint=hint, method=method) from None
    return dict(bound.arguments)


__all__ = ["SERVICE_METHODS", "Service", "accepted", "call_arguments", "parameters", "signature"]
