"""Recent context of a project: what was learned lately, the hand-off from one agent session to the next.

Every agent and editor of a repository talks to the same owner process, so a note one session leaves (a `handoff`,
a decision, a lesson) is what the next session reads first, whichever tool it runs in. Team members' recent
promotions from the same project are included when a team server answers.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from mnemo.core.api_types.results import RecentContext, RecentItem
from mnemo.core.cards import summarize
from mnemo.core.errors import InvalidInput
from mnemo.core.models import Context, Memory
from mnemo.core.search import memory_visible
from mnemo.core.team.ops import recent_team

if TYPE_CHECKING:
    from mnemo.core.engine import Engine

MAX_HANDOFFS = 3


def _item(m: Memory) -> RecentItem:
    return {"id": m.id, "scope": m.scope, "type": m.type, "kind": m.kind, "branch": m.branch,
            "summary": summarize(m.text, 300), "updated_at": m.updated_at, "created_at": m.created_at,
            "author": m.author, "source": m.source, "confirmations": m.confirmations, "status": m.status,
            "trust": m.trust, "flags": m.flags, "project_name": m.project_name,
            "source_path": m.anchors[0].get("path") if m.anchors else None}


def recent_context(engine: Engine, ctx: Context, limit: int = 10, days: float = 14.0) -> RecentContext:
    try:
        limit, days = int(limit), float(days)
    except (TypeError, ValueError) as exc:
        raise InvalidInput("limit and days must be numbers") from exc
    if not 1 <= limit <= 50:
        raise InvalidInput(f"limit {limit} is out of range", hint="use 1..50")
    if not 0 < days <= 3650:
        raise InvalidInput(f"days {days} is out of range", hint="use a positive number of days")
    since = time.time() - days * 86400
    rows = engine.store.recent_in(ctx.project_id, since, max(200, limit * 10))
    visible = [m for m in rows if memory_visible(m, ctx, include_pending=True)]
    handoffs = [m for m in visible if m.kind == "handoff" and m.status == "active"][:MAX_HANDOFFS]
    shown = {m.id for m in handoffs}
    recent = [m for m in visible if m.id not in shown and m.status == "active"][:limit]
    pending = sum(1 for m in visible if m.status == "pending")
    team: list[Memory] = []
    try:
        team = recent_team(engine, ctx, since, limit=5)
    except Exception:  # noqa: BLE001 - the team part is a bonus; local context must always answer
        team = []
    local_hashes = {m.content_hash for m in visible}
    team = [m for m in team if m.content_hash not in local_hashes]
    return {
        "project": {"id": ctx.project_id, "name": ctx.project_name, "branch": ctx.branch},
        "since": since,
        "days": days,
        "handoffs": [_item(m) for m in handoffs],
        "recent": [_item(m) for m in recent],
        "team": [_item(m) for m in team],
        "pending_review": pending,
    }


__all__ = ["recent_context"]
