"""The results of the service API (`mnemo.api.Service`), one TypedDict per shape (keys marked `NotRequired`
appear only in some answers).

No `from __future__ import annotations` here: TypedDict needs its annotations evaluated to know which keys are
required (Python 3.11).
"""

from typing import Any, NotRequired, TypedDict

from mnemo.core.api_types.records import (
    Activation,
    Anchor,
    BriefMemory,
    Card,
    Conflict,
    Memory,
    ReviewItem,
    SameClaim,
    Skill,
    SkillHold,
    SkillMiss,
    SkillProblem,
    SnapshotAction,
    TeamShare,
)


class Health(TypedDict):
    version: str
    protocol: int
    pid: int
    home: str
    index_ready: bool
    model_loaded: bool
    config: dict[str, Any]  # the store-wide settings the owner applies (`mnemo.core.store_settings.owner_view`)


class RememberResult(TypedDict):
    status: str  # created | confirmed | conflict | pending | kept_existing
    memory: Memory
    message: str
    conflicts: list[Conflict]
    same_as: NotRequired[SameClaim]


class BatchItem(TypedDict):
    """What became of one note of a batch, at its `index` in the input."""

    index: int
    status: str  # created | confirmed | conflict | pending | kept_existing | error (refused: nothing stored)
    message: str
    id: NotRequired[str]  # the memory stored or confirmed
    conflicts: NotRequired[list[str]]  # ids of the memories it conflicts with or overrides
    same_as: NotRequired[str]  # the id of the memory stating the same claim
    hint: NotRequired[str | None]  # what to do about a refused note


class RememberBatchResult(TypedDict):
    total: int
    counts: dict[str, int]  # items by status
    items: list[BatchItem]  # one per input note, in order


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
    restorable: NotRequired[bool]  # `restore` brings it back until the forget retention has passed


class UpdateResult(TypedDict):
    """An edit (`update`): status updated | unchanged | conflict | pending | kept_existing."""

    status: str
    memory: Memory
    message: str
    conflicts: list[Conflict]
    version: int  # the number of the memory's current version
    same_as: NotRequired[SameClaim]


class MemoryVersion(TypedDict):
    version: int
    text: str
    type: str
    kind: str
    importance: float
    tags: list[str]
    content_hash: str
    written_at: float
    written_by: str
    why: str  # `created` for the first version, else the edit's reason (`edited` without one)
    replaced_at: NotRequired[float]  # earlier versions: when the next one replaced it
    current: NotRequired[bool]


class MemoryEvent(TypedDict):
    at: float
    by: str
    event: str  # anchor dropped | forgotten | restored
    detail: NotRequired[str]


class MemoryHistory(TypedDict):
    id: str
    versions: list[MemoryVersion]  # oldest first, the current one last
    events: list[MemoryEvent]  # what happened to it besides its text: an anchor dropped, forgotten, restored
    forgotten: bool  # the memory is forgotten (its history read from the tombstone, until the retention passes)


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
    tags: dict[str, int]  # tag -> how many memories of this project (and global) carry it
    index: dict[str, Any]  # ready, ann, indexed_seq, store_seq, rebuilds, last_error, reembed
    model_id: str | None
    store: dict[str, Any]  # home, db_bytes (the file), wal_bytes (its write-ahead log), total_bytes
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
    secrets: list[dict[str, Any]]  # secrets redacted in the stored blocks: path, line, kind, masked preview


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


class MarkdownFile(TypedDict):
    name: str  # <scope>-<type>.md
    scope: str
    type: str
    memories: int


class MarkdownExport(TypedDict):
    """markdown_export: the files written into `path` (core/sharing/markdown_format.py is the format)."""

    path: str
    files: list[MarkdownFile]
    memories: int
    scopes: list[str]


class MarkdownEdit(TypedDict, total=False):
    id: str
    where: str  # file:line
    fields: list[str]
    status: str  # after the import: edited, or conflict / pending / kept_existing (the edit went through update)
    message: str  # why an edit was not applied as written


class MarkdownNew(TypedDict, total=False):
    where: str
    id: str
    status: str  # remember's status (created, confirmed, pending, conflict ...)
    requested_id: str  # the id the file named, which this store never held (a new id was given)
    reason: str


class MarkdownSkip(TypedDict, total=False):
    id: str
    where: str
    reason: str


class MarkdownRemoved(TypedDict):
    id: str
    title: str
    file: str


class MarkdownUnreadable(TypedDict):
    file: str
    reason: str  # "not UTF-8 text (byte 0xff at offset 12); nothing was read from it"


class MarkdownRestored(TypedDict):
    id: str
    where: str  # file:line
    branch: str | None
    title: str
    reason: str


class MarkdownImport(TypedDict):
    """markdown_import: what reading the files back did (or, `dry_run`, would do); `removed` memories are here and
    in no file: reported, never deleted."""

    files: list[str]
    ignored: list[str]  # other .md files of the directory (not Mnemo memories files), left alone
    dry_run: bool
    unchanged: int
    edited: list[MarkdownEdit]
    restored: list[str]  # ids this store held once (change log, history, review, a repair's lost list)
    restored_detail: list[MarkdownRestored]
    created: list[MarkdownNew]
    skipped: list[MarkdownSkip]
    removed: list[MarkdownRemoved]
    unreadable: list[MarkdownUnreadable]  # files of the folder that are not UTF-8 text: nothing read from them


class PublishedFile(TypedDict):
    path: str  # relative to the project root
    target: str  # claude | agents | cursor | copilot | windsurf | continue
    tool: str
    globs: list[str]  # [] : applies to every file
    status: str  # new | changed | unchanged | skipped (a file of that name that is not Mnemo's)
    memories: int
    reason: str
    tokens: int


class PublishReport(TypedDict):
    """publish: the files each target gets (written, or with `dry_run` only planned with their unified `diff`),
    the memories meant for agents that were left out and why, and what reading the hand edits back did
    (`sync`: edited / removed / added / skipped / sections_missing)."""

    dry_run: bool
    targets: list[str]
    budget: int
    root: str
    files: list[PublishedFile]
    published: int
    written: list[str]
    left_out: list[dict[str, Any]]  # {id, text, reason}
    sync: dict[str, list[dict[str, Any]]]
    diff: str


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
    dropped_anchors: NotRequired[list[str]]  # stale_anchor answered `update`: anchors whose symbol vanished
    message: NotRequired[str]  # what the answer did that is not obvious from it (an anchor dropped)


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
    stale: list[dict[str, Any]]  # memory_id, anchor, reason, title: every stale anchor found (new or in Review)


class AnchorsCheck(TypedDict):
    """`mnemo anchors check`: the anchors of the files checked against the working tree."""
    checked_files: int
    checked: int
    ok: int
    flagged: list[dict[str, Any]]  # newly filed in Review: memory_id, review_id, anchor, reason, title, path
    cleared: list[dict[str, Any]]  # closed, the code is back: memory_id, anchor, path
    stale: list[dict[str, Any]]  # every stale anchor found (new or already in Review): memory_id, anchor, reason, ...
    skipped: list[str]  # files that could not be parsed (another language, too large)


class AnchoredCard(Card, total=False):
    anchor: Anchor  # (and `stale`, from Card: always present on a note)


class AnchoredContext(TypedDict):
    """The memories anchored at a position of a file (core/memory/anchored_to_file.py), part of `HoverContext`."""

    path: str | None
    anchored: list[AnchoredCard]
    file_anchors: dict[str, list[str]]  # symbol ("" = the file) -> ids of the memories anchored there


class SkillsFailed(TypedDict):
    """A hover's skills when activating them failed (the memories are still shown)."""

    activations: list[Activation]  # empty
    total_tokens: int  # 0
    error: str


class HoverContext(AnchoredContext):
    symbol: str | None
    cards: list[Card]
    warnings: list[str]
    skills: ActivationResult | SkillsFailed | None  # None: not asked for


class MemoryCards(TypedDict):
    cards: list[Card]
    memories: list[Memory]
    missing: list[str]


class ContextBlock(TypedDict):
    """What an agent receives for one event (core/agent/context_block.py): one quoted Markdown block and what went into it."""

    event: str
    markdown: str
    tokens: int
    budget: int
    token_cost: dict[str, int]  # {total, skills, memories, references, framing}
    # {kind, id, title, section, tokens, state: inlined | partial | referenced, score, why, reason, sections?, ...}
    items: list[dict[str, Any]]
    dropped: list[dict[str, Any]]
    yielded: list[dict[str, Any]]  # starter skills that yielded to a project's own rule ({name, why, yields_to})
    always_share: float  # the share of the budget the always-apply rules may fill (context_always_share)
    already_sent: int
    learned: list[dict[str, Any]]
    session: dict[str, Any] | None  # {id, seen}
    delivered: NotRequired[dict[str, Any]]  # commit=False: what to confirm with context_commit
    project: dict[str, Any]
    file: str | None
    warnings: list[str]
    elapsed_ms: float


class ContextCommit(TypedDict):
    session: str | None
    seen: int | None


class SessionEnd(TypedDict):
    handoff: dict[str, Any]
    session_cleared: bool
    anchors: NotRequired[AnchorsCheck]  # the anchors into the files the session edited, checked
