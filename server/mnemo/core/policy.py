"""What the memory operations may accept and the store-wide numbers they follow: text and metadata limits, the
conflict resolutions, the lifecycle settings, times given by callers. Pure checks (no store, no model)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from mnemo.core import environment
from mnemo.core import store_settings as config
from mnemo.core.errors import InvalidInput
from mnemo.core.models import Context
from mnemo.core.relation.compare import SIGNAL_MIN_COSINE

MAX_TEXT_CHARS = environment.integer("MNEMO_MAX_TEXT_CHARS")
# Anchors + provenance + tags of one memory, as JSON (a memory's metadata is small; a huge one is an attack or a bug).
MAX_META_BYTES = environment.integer("MNEMO_MAX_META_BYTES")
MAX_ANCHORS = environment.integer("MNEMO_MAX_ANCHORS")
# Notes in one `remember_batch` call (`mnemo import` sends 500 per call); the owner lands them BATCH_CHUNK at a time:
# one embedding call and one transaction each (the embedder batches by 32 anyway, and a chunk holds the write lock,
# so other writers wait less with small chunks).
MAX_BATCH_ITEMS = environment.integer("MNEMO_MAX_BATCH_ITEMS")
BATCH_CHUNK = 64

ON_CONFLICT = ("review", "supersede", "keep_both", "keep_existing")


@dataclass(frozen=True)
class Settings:
    conflict_threshold: float = SIGNAL_MIN_COSINE  # nearby notes from this cosine on are compared (core/relation)
    half_life_hours: float = 168.0
    tombstone_threshold: float = 0.05
    hot_max: int = 10
    hot_min_importance: float = 0.7
    compact_dup_threshold: float = 0.95
    verbose_chars: int = 1500
    summary_chars: int = 400
    restore_importance: float = 0.5


def settings(home: Path | None = None) -> Settings:
    """The store-wide values (`<home>/config.json`, `mnemo config set`; `MNEMO_CONFLICT_THRESHOLD`,
    `MNEMO_HALF_LIFE_HOURS`, ... override them for this process), re-read when the file changes."""
    names = ("conflict_threshold", "half_life_hours", "tombstone_threshold", "hot_max", "hot_min_importance",
             "compact_dup_threshold", "verbose_chars")
    return Settings(**{n: config.value(n, home) for n in names})


def default_on_conflict() -> str:
    """This process's MNEMO_ON_CONFLICT (a client's own value travels in its Context: `Context.on_conflict`)."""
    return environment.text("MNEMO_ON_CONFLICT").strip().lower() or "review"


WRITE_POLICIES = ("auto", "confirm")


def write_policy(ctx: Context | None = None) -> str:
    """`auto`: agent-written memories land directly; `confirm`: they wait in Review. People's writes always land.

    The policy is the caller's: it travels in the request's context (`MNEMO_WRITE_POLICY` of the client process,
    the editor's `mnemo.writePolicy` for the language server), so a running owner applies each client's own value.
    A context without one (built by hand, in-process) uses this process's environment. A bad value is refused."""
    policy = ctx.write_policy if ctx is not None and ctx.write_policy is not None else \
        environment.text("MNEMO_WRITE_POLICY")
    policy = (policy or "auto").strip().lower()
    if policy not in WRITE_POLICIES:
        raise InvalidInput(f"write policy {policy!r} is not one of {', '.join(WRITE_POLICIES)}; nothing was stored",
                           hint="fix MNEMO_WRITE_POLICY (or the editor's mnemo.writePolicy): auto or confirm")
    return policy


def landing_status(ctx: Context | None, source: str, status: str | None) -> str:
    """The status a write lands with: the one asked for, else `pending` for an agent's note under the caller's
    `confirm` write policy, else `active`. The policy is checked on every write (a bad value is refused)."""
    policy = write_policy(ctx)
    if status is not None:
        return status
    return "pending" if source == "agent" and policy == "confirm" else "active"


def check_on_conflict(value: str | None) -> str:
    if value is None:
        value = default_on_conflict()
    if value not in ON_CONFLICT:
        raise InvalidInput(f"unknown conflict resolution {value!r}; nothing was stored",
                           hint=f"use one of: {', '.join(ON_CONFLICT)} (MNEMO_ON_CONFLICT or on_conflict)")
    return value


def parse_now(now: Any) -> float:
    """`now` as epoch seconds or an ISO 8601 string (tests, replays); None is the wall clock."""
    if now is None:
        return time.time()
    if isinstance(now, bool):
        raise InvalidInput("now must be a time", hint="epoch seconds or ISO 8601, e.g. 2026-01-31T12:00:00+00:00")
    if isinstance(now, int | float):
        if not math.isfinite(now):
            raise InvalidInput("now must be finite")
        return float(now)
    if isinstance(now, str):
        try:
            return float(now)
        except ValueError:
            pass
        try:
            dt = datetime.fromisoformat(now.replace("Z", "+00:00"))
        except ValueError as exc:
            raise InvalidInput(f"cannot read the time {now!r}",
                               hint="epoch seconds or ISO 8601, e.g. 2026-01-31T12:00:00+00:00") from exc
        return dt.timestamp()
    raise InvalidInput("now must be a time", hint="epoch seconds or ISO 8601")


def check_decay_time(now: Any, force: bool = False, slack: float = 60.0) -> float:
    """`now` for a decay run, refused when it lies in the future (aging notes ahead of time cannot be undone)
    unless `force` (a dry run passes force: it writes nothing)."""
    at = parse_now(now)
    if at > time.time() + slack and not force:
        when = datetime.fromtimestamp(at).astimezone().isoformat(timespec="seconds")
        raise InvalidInput(f"the decay time {when} is in the future: it would age memories ahead of time, and that "
                           "cannot be undone",
                           hint="see what it would do first with a dry run (`mnemo decay --now ... --dry-run`), "
                                "then pass --force to run it anyway")
    return at


def check_min_confidence(value: Any) -> float:
    """The minimum confidence of a recall: the call's value, else the store-wide `min_confidence` (`mnemo config
    set min_confidence`, MNEMO_MIN_CONFIDENCE), default 0.15 (`recall.MIN_CONFIDENCE`)."""
    if value is None:
        return float(config.value("min_confidence"))
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"min_confidence {value!r} is not a number", hint="use a number from 0 to 1, e.g. 0.15") from exc
    if isinstance(value, bool) or not math.isfinite(v) or not 0.0 <= v <= 1.0:
        raise InvalidInput(f"min_confidence {value!r} is out of range", hint="use a number from 0 to 1 (0 shows every hit)")
    return v
