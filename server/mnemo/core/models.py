"""The data model: memories, scopes, types, project context, result cards. Plain frozen dataclasses."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from mnemo.core.api_types import records
from mnemo.core.api_types.requests import (  # noqa: F401 - each closed set, declared once there, as a type and its values
    DEFAULT_KINDS,
    MEMORY_TYPES,
    SOURCES,
    STATUSES,
    MemoryType,
    SourceName,
    StatusName,
)
from mnemo.core.errors import InvalidInput, ScopeError

# `user` and `feedback` are about the person: they hold on every branch. The others are about the code.
BRANCH_INDEPENDENT_TYPES = frozenset({"user", "feedback"})
STORED_SCOPES = ("project", "global", "team")
READ_SCOPES = ("project", "global", "team", "hybrid")
SCOPE_PRIORITY = {"project": 0, "global": 1, "team": 2}
TIERS = ("hot", "warm", "cold")
TRUST = ("trusted", "untrusted")


MAX_EVENTS = 50  # the events a memory's provenance keeps (the newest)


def with_event(provenance: dict | None, event: str, by: str | None, detail: str | None = None,
               at: float | None = None) -> dict:
    """The provenance with one more entry in its `events`: what `history` lists besides the versions of the text
    (an anchor dropped in Review, forgotten, restored), with when, who and why."""
    import time

    entry = {"at": time.time() if at is None else at, "by": by or "unknown", "event": event}
    if detail:
        entry["detail"] = str(detail)[:500]
    prov = dict(provenance or {})
    prov["events"] = [*(prov.get("events") or []), entry][-MAX_EVENTS:]
    return prov


def check_type(value: str) -> str:
    if value not in MEMORY_TYPES:
        raise InvalidInput(f"unknown memory type {value!r}", hint=f"use one of: {', '.join(MEMORY_TYPES)}")
    return value


def check_status(value: str) -> str:
    if value not in STATUSES:
        raise InvalidInput(f"unknown status {value!r}", hint=f"use one of: {', '.join(STATUSES)}")
    return value


def check_read_scope(value: str) -> str:
    if value not in READ_SCOPES:
        raise InvalidInput(f"unknown scope {value!r}", hint=f"use one of: {', '.join(READ_SCOPES)}")
    return value


def check_write_scope(value: str) -> str:
    if value in ("global", "team"):
        raise ScopeError(
            f"a direct write to the {value} scope is refused",
            hint=f"remember it in the project scope, then promote it: `mnemo promote <id> --to {value}`",
        )
    if value == "hybrid":
        raise ScopeError("hybrid is a read-only view", hint="write to the project scope (the default)")
    if value != "project":
        raise InvalidInput(f"unknown scope {value!r}", hint="memories are written to the project scope")
    return value


@dataclass(frozen=True)
class Context:
    """Who is asking and where: derived from the workspace, never from an agent-supplied argument.

    It also carries the caller's request-shaped settings (its write policy, conflict resolution and secrets mode,
    like its `user`), so an owner serving many clients applies each client's own value to that client's writes.
    None means "not said" (a context built by hand): the serving process's environment, then the default."""

    project_id: str
    project_name: str
    root: str | None = None
    branch: str | None = None
    default_branch: str | None = None
    user: str = "local"
    origin: str | None = None
    write_policy: str | None = None
    on_conflict: str | None = None
    secrets: str | None = None

    def to_dict(self) -> records.Ctx:
        return cast("records.Ctx", dataclasses.asdict(self))  # the API's record of it (core/api_types/records.py)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Context:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def visible_branches(self) -> tuple[str, ...]:
        """A feature branch sees its own memories plus the default branch's; the default branch only its own.
        Worked out once per context (recall asks it for each of its ~80 candidates): kept beside the fields, not
        one of them (equality, hashing and `to_dict` read only the fields)."""
        kept = self.__dict__.get("_visible_branches")
        if kept is not None:
            return kept
        out = []
        if self.branch:
            out.append(self.branch)
        if self.default_branch and self.default_branch not in out:
            out.append(self.default_branch)
        branches = tuple(out)
        object.__setattr__(self, "_visible_branches", branches)  # a frozen dataclass: its own setter refuses
        return branches


_FIELDS: dict[type, frozenset[str]] = {}  # the field names of `Memory` (and of any subclass), for `from_row`
_ORDER: dict[type, tuple[str, ...]] = {}  # the same in their order, for `to_dict`
_ATOMIC = frozenset({str, int, float, bool, type(None)})


class _NotPlain(Exception):
    pass


def _json_copy(v: Any) -> Any:
    """A copy of a JSON value (lists and dicts copied, the rest shared), as `dataclasses.asdict` copies it."""
    t = type(v)
    if t in _ATOMIC:
        return v
    if t is list:
        return [_json_copy(x) for x in v]
    if t is dict:
        return {_json_copy(k): _json_copy(x) for k, x in v.items()}
    raise _NotPlain


@dataclass(frozen=True)
class Memory:
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
    provenance: dict[str, Any] = field(default_factory=dict)
    anchors: list[records.Anchor] = field(default_factory=list)
    superseded_by: str | None = None
    deprecated: bool = False
    deprecated_reason: str | None = None
    tier: str = "warm"
    tags: list[str] = field(default_factory=list)
    trust: str = "trusted"
    status: str = "active"
    author: str = "local"
    flags: list[str] = field(default_factory=list)

    def to_dict(self) -> records.Memory:
        """The API's record of it (core/api_types/records.py): what `dataclasses.asdict` gives (every list and
        dict copied), ~10x quicker: asdict copies each of the 27 values through `copy.deepcopy`, ~50 us a memory
        on Python 3.11 (5 us here), and a write of an import made two (issue 22, sixth pass)."""
        order = _ORDER.get(type(self))
        if order is None:
            order = _ORDER[type(self)] = tuple(f.name for f in dataclasses.fields(self))
        out: dict[str, Any] = {}
        values = self.__dict__
        for name in order:
            v = values[name]
            if type(v) not in _ATOMIC:
                try:
                    v = _json_copy(v)
                except _NotPlain:  # a value JSON does not hold (none is stored): asdict's own copy
                    return cast("records.Memory", dataclasses.asdict(self))
            out[name] = v
        return cast("records.Memory", out)

    @classmethod
    def from_row(cls, row: Any) -> Memory:
        """The memory of a `memories` row (a `sqlite3.Row`, or a mapping of its columns)."""
        # a `sqlite3.Row` (no mapping: it iterates its values) by zip, ~3x quicker than dict(row)
        d = dict(row) if isinstance(row, Mapping) else dict(zip(row.keys(), row, strict=True))
        for key in ("provenance", "anchors", "tags", "flags"):
            v = d.get(key)
            if not v:
                d[key] = {} if key == "provenance" else []
            elif v == "[]":  # what most rows hold: no parse
                d[key] = []
            elif v == "{}":
                d[key] = {}
            else:
                d[key] = json.loads(v)
        d["deprecated"] = bool(d["deprecated"])
        names = _FIELDS.get(cls)
        if names is None:  # once per class: `dataclasses.fields` cost ~5 us a row (issue 22, fifth pass)
            names = _FIELDS[cls] = frozenset(f.name for f in dataclasses.fields(cls))
        # through `__init__`: an instance filled through its `__dict__` instead (4x quicker) holds a dict of its own,
        # ~1 kB more than `__init__`'s inline values: +8-17 MB in a 10k-note owner (docs/benchmarks.md, fifth pass)
        return cls(**{k: v for k, v in d.items() if k in names})


CARD_FIELDS = (
    "scope", "project_id", "project_name", "source_kind", "item_id", "block_id", "source_path", "title",
    "heading_path", "updated_at", "score", "confidence", "confidence_state", "compressed_summary", "key_points",
    "can_hydrate",
)
