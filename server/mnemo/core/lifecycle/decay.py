"""Decay, tiers, restore.

Decay (SPEC §4): `importance * 2^(-hours / half_life)` where the hours are counted from the later of the last
access and the last decay run (kept in the `decay_state` table), so two runs at the same moment equal one, and runs
at t1 then t2 equal one run at t2. Access resets the clock (reinforcement). Below the tombstone threshold a memory
moves to the cold tier: out of recall, still searchable with `include_cold`, restorable; nothing is deleted.

Tiers: hot (a small set always offered: the most important memories), warm (recalled on match), cold (archive).
"""

from __future__ import annotations

import math
import sqlite3
import time
from typing import TYPE_CHECKING, Any

from mnemo.core.api_types import records
from mnemo.core.api_types.results import DecayReport, MemoryChange
from mnemo.core.cards import summarize
from mnemo.core.memory.manage import get
from mnemo.core.models import Context, Memory, with_event
from mnemo.core.policy import parse_now, settings
from mnemo.core.search import memory_visible

if TYPE_CHECKING:
    from mnemo.core.engine import Engine
    from mnemo.core.store import Store

TIER_MEANING = {"hot": "always offered (small)", "warm": "recalled on match", "cold": "archive: search with --cold"}


def decay(engine: Engine, ctx: Context, now: Any = None, dry_run: bool = False) -> DecayReport:
    """Exponential decay of this project's (and global) memories; cold below the threshold. Idempotent.
    `dry_run`: the same report, computed inside a savepoint that is rolled back (nothing is written)."""
    now = parse_now(now)
    s = settings()
    report: DecayReport = {"now": now, "half_life_hours": s.half_life_hours, "tombstone_threshold": s.tombstone_threshold,
              "scanned": 0, "decayed": 0, "untouched": 0, "moved_to_cold": [], "tier_moves": [],
              "dry_run": bool(dry_run), "tiers": {}}
    store = engine.store
    with store.write() as c:
        if dry_run:
            with store.undone(c, "decay_dry_run"):
                _run(c, store, ctx, now, report)
        else:
            _run(c, store, ctx, now, report)
    if not dry_run:
        engine.changed()
    return report


def _run(c: sqlite3.Connection, store: Store, ctx: Context, now: float, report: DecayReport) -> None:
    _decay_rows(c, store, ctx, now, report)
    report["tier_moves"] = retier(c, store, ctx)
    report["tiers"] = _tier_counts(store, ctx.project_id)  # this thread's connection: sees the run's changes


def _decay_rows(c: sqlite3.Connection, store: Store, ctx: Context, now: float, report: DecayReport) -> None:
    s = settings()
    hl = s.half_life_hours * 3600.0
    mems = store.decaying(ctx.project_id)
    state = store.decayed_at([m.id for m in mems])
    for m in mems:
        report["scanned"] += 1
        ref = max(m.last_accessed, m.created_at, state.get(m.id, -math.inf))
        elapsed = now - ref
        if elapsed <= 0:
            report["untouched"] += 1
            continue
        new = min(m.importance * math.pow(2.0, -elapsed / hl), m.importance)
        if m.importance - new < 1e-6 and new >= s.tombstone_threshold:
            report["untouched"] += 1  # negligible: keep the clock where it was (path independence holds)
            continue
        store.record_decay(c, m.id, now, m.importance)
        if new < s.tombstone_threshold:
            store.update_memory(c, m.id, reindex=True, importance=new, tier="cold")
            report["moved_to_cold"].append({
                "id": m.id, "title": summarize(m.text, 60), "from_tier": m.tier, "importance": round(new, 4),
                "reason": f"importance {new:.3f} < {s.tombstone_threshold} after "
                          f"{elapsed / 3600:.0f} h without access"})
        elif new != m.importance:
            store.update_memory(c, m.id, importance=new)
            report["decayed"] += 1
        else:
            report["untouched"] += 1


def hot_score(m: Memory) -> float:
    return m.importance * (1.0 + 0.1 * min(max(m.confirmations - 1, 0), 10))


def retier(conn: sqlite3.Connection, store: Store, ctx: Context) -> list[dict[str, Any]]:
    """Hot = the few most important active memories of the project (and of global); the rest warm. Cold stays."""
    s = settings()
    moves = []
    for project_id in (ctx.project_id, None):
        mems = store.hot_or_warm(project_id)
        eligible = [m for m in mems if m.status == "active" and not m.superseded_by and not m.deprecated
                    and m.importance >= s.hot_min_importance]
        eligible.sort(key=lambda m: (-hot_score(m), -m.last_accessed, m.id))
        hot = {m.id for m in eligible[: max(0, s.hot_max)]}
        for m in mems:
            want = "hot" if m.id in hot else "warm"
            if m.tier != want:
                store.update_memory(conn, m.id, tier=want)
                why = (f"among the {s.hot_max} most important (importance {m.importance:.2f}, "
                       f"confirmed {m.confirmations}x)" if want == "hot" else
                       "no longer among the most important active memories")
                moves.append({"id": m.id, "title": summarize(m.text, 60), "from_tier": m.tier, "to_tier": want,
                              "reason": why})
    return moves


def _tier_counts(store: Store, project_id: str) -> dict[str, int]:
    return {"hot": 0, "warm": 0, "cold": 0, **store.tier_counts(project_id)}


def tier_counts(engine: Engine, ctx: Context) -> dict[str, int]:
    """Live memories of this project and global per tier."""
    return _tier_counts(engine.store, ctx.project_id)


def tier_index(engine: Engine, ctx: Context, top: int = 5) -> dict[str, Any]:
    """`mnemo stats`: the tiers like an index of the memory (count, meaning, the top entries)."""
    out: dict[str, Any] = {}
    for tier in ("hot", "warm", "cold"):
        mems = [m for m in engine.store.live_in_tier(ctx.project_id, tier)
                if memory_visible(m, ctx, include_cold=True)]
        out[tier] = {"count": len(mems), "meaning": TIER_MEANING[tier],
                     "top": {m.id: f"{summarize(m.text, 60)} (importance {m.importance:.2f})" for m in mems[:top]}}
    return out


def hot_memories(engine: Engine, ctx: Context) -> list[records.Memory]:
    return [m.to_dict() for m in engine.store.hot(ctx.project_id) if memory_visible(m, ctx)]


def restore(engine: Engine, ctx: Context, memory_id: str) -> MemoryChange:
    """Bring a cold (archived) memory back to warm, with its decay clock reset and the importance it had before it
    decayed (memories archived before that was recorded get at least `restore_importance`)."""
    m = get(engine, ctx, memory_id)
    if m.tier != "cold":
        return {"status": "unchanged", "memory": m.to_dict(), "message": f"{m.id} is {m.tier}, not archived"}
    store = engine.store
    now = time.time()
    with store.write() as c:
        base = store.base_importance(m.id)
        base = settings().restore_importance if base is None else base
        store.update_memory(c, m.id, reindex=True, tier="warm", last_accessed=now,
                            importance=max(m.importance, float(base)),  # as it was before it decayed
                            provenance=with_event(m.provenance, "restored", ctx.user, "from the archive", now))
        store.clear_decay(c, m.id)
    engine.changed()
    return {"status": "restored", "memory": store.record(m.id), "message": "back in recall"}
