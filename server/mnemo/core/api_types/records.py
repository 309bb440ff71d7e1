"""The records of the service API (`mnemo.api`): the caller's context and the objects results are made of, as
TypedDicts (keys marked `NotRequired` appear only in some answers).

No `from __future__ import annotations` here: TypedDict needs its annotations evaluated to know which keys are
required (Python 3.11).
"""

from typing import Any, NotRequired, TypedDict


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
    score: float | None  # None on an unscored card (anchored here, opened by id: core/memory/anchored_to_file.py)
    confidence: float | None
    confidence_state: str | None
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
    stale: NotRequired[bool]  # notes: the anchored code changed since this was written (a stale_anchor item)


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
    published: bool  # written by `mnemo publish`: activates for its paths, never injected


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
    published: bool  # from a file `mnemo publish` wrote: active, not injected (its memories are delivered)


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
