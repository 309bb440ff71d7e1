"""Memory lifecycle: decay and tiers (decay.py), compaction (compaction.py), anchors to code (anchors.py).

Every multi-record change runs inside ONE `store.write()` transaction (BEGIN IMMEDIATE), so a crash leaves the
store as before or as after; every change to a memory's visibility or vector goes through the store helpers that
log to the change log (`update_memory(reindex=True)`, `insert_memory`, `delete_item`, `set_vector`), so the dense
index follows. The checks on write (dedup, conflicts, overrides) are core/memory/write.py and core/memory/neighbours.py; the
review queue is core/review.py.
"""

from mnemo.core.lifecycle.anchors import anchor, check_anchor, check_anchors, rel_path, unanchor
from mnemo.core.lifecycle.compaction import compact, summarize_verbose
from mnemo.core.lifecycle.decay import decay, hot_memories, restore, retier, tier_counts, tier_index
from mnemo.core.policy import Settings, check_decay_time, parse_now, settings

__all__ = ["Settings", "anchor", "check_anchor", "check_anchors", "check_decay_time", "compact", "decay",
           "hot_memories", "parse_now", "rel_path", "restore", "retier", "settings", "summarize_verbose",
           "tier_counts", "tier_index", "unanchor"]
