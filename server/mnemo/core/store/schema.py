"""Every table of the store, its indexes, and the migrations of stores written by older versions: one place.

`create(conn)` runs at every open (all statements are `IF NOT EXISTS`); `migrate(conn)` adds what a store made
before a column or index existed lacks. Repair (store/rebuild.py) builds a new store from the same statements.
"""

from __future__ import annotations

import sqlite3

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS memories (
    id TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    type TEXT NOT NULL,
    kind TEXT NOT NULL,
    scope TEXT NOT NULL,
    project_id TEXT NOT NULL,
    project_name TEXT NOT NULL,
    branch TEXT,
    importance REAL NOT NULL,
    confirmations INTEGER NOT NULL DEFAULT 1,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    last_accessed REAL NOT NULL,
    access_count INTEGER NOT NULL DEFAULT 0,
    content_hash TEXT NOT NULL,
    source TEXT NOT NULL,
    provenance TEXT NOT NULL DEFAULT '{}',
    anchors TEXT NOT NULL DEFAULT '[]',
    superseded_by TEXT,
    deprecated INTEGER NOT NULL DEFAULT 0,
    deprecated_reason TEXT,
    tier TEXT NOT NULL DEFAULT 'warm',
    tags TEXT NOT NULL DEFAULT '[]',
    trust TEXT NOT NULL DEFAULT 'trusted',
    status TEXT NOT NULL DEFAULT 'active',
    author TEXT NOT NULL DEFAULT 'local',
    flags TEXT NOT NULL DEFAULT '[]',
    part TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS memories_hash_project ON memories(content_hash, project_id, scope);
CREATE INDEX IF NOT EXISTS memories_part ON memories(part, scope, branch);
CREATE INDEX IF NOT EXISTS memories_project ON memories(project_id, scope);
-- only anchored memories (few): `Store.anchored_memories` reads this, not every memory of the project
CREATE INDEX IF NOT EXISTS memories_anchored ON memories(project_id, scope) WHERE anchors != '[]';
CREATE TABLE IF NOT EXISTS blocks (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    source_path TEXT NOT NULL,
    ordinal INTEGER NOT NULL,
    title TEXT NOT NULL,
    heading_path TEXT NOT NULL,
    text TEXT NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    file_hash TEXT NOT NULL,
    updated_at REAL NOT NULL,
    part TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS blocks_file ON blocks(project_id, source_path, ordinal);
CREATE TABLE IF NOT EXISTS vectors (
    item_id TEXT PRIMARY KEY,
    part TEXT NOT NULL,
    model_id TEXT NOT NULL,
    vec BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS vectors_part ON vectors(part);
CREATE TABLE IF NOT EXISTS tombstones (
    id TEXT PRIMARY KEY,
    content_hash TEXT NOT NULL,
    project_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    forgotten_at REAL NOT NULL,
    reason TEXT,
    memory TEXT
);
-- the earlier versions of edited memories (`mnemo history`): one row per replaced version, with who wrote it,
-- when and why; deleted with the memory's tombstone text once the forget retention has passed
CREATE TABLE IF NOT EXISTS memory_versions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    text TEXT NOT NULL,
    type TEXT NOT NULL,
    kind TEXT NOT NULL,
    importance REAL NOT NULL,
    tags TEXT NOT NULL DEFAULT '[]',
    content_hash TEXT NOT NULL,
    written_at REAL NOT NULL,
    written_by TEXT NOT NULL,
    why TEXT NOT NULL,
    replaced_at REAL NOT NULL,
    UNIQUE(memory_id, version)
);
CREATE TABLE IF NOT EXISTS changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    item_id TEXT NOT NULL,
    part TEXT NOT NULL,
    op TEXT NOT NULL,
    at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS review (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    item_id TEXT,
    other_id TEXT,
    project_id TEXT,
    payload TEXT NOT NULL DEFAULT '{}',
    created_at REAL NOT NULL,
    resolved_at REAL,
    resolution TEXT
);
CREATE INDEX IF NOT EXISTS review_open ON review(resolved_at, project_id);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(
    text, item_id UNINDEXED, part UNINDEXED, tokenize = 'porter unicode61'
);
-- overrides are looked up by the overridden id on every recall; conflicts by the new memory's id
CREATE INDEX IF NOT EXISTS review_other ON review(kind, other_id);
CREATE INDEX IF NOT EXISTS review_item ON review(kind, item_id);
-- lifecycle: when a memory last decayed; base_importance = its importance before the first decay (`restore`)
CREATE TABLE IF NOT EXISTS decay_state (id TEXT PRIMARY KEY, decayed_at REAL NOT NULL, base_importance REAL);
-- team promotions waiting for the team server (sent by the owner's sender thread)
CREATE TABLE IF NOT EXISTS team_outbox (
    record_id TEXT PRIMARY KEY,
    memory_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    last_attempt REAL
);
-- the relation check's parse of a memory's text (store/parses.py): read for the neighbours of a write instead of
-- parsing their texts again; trusted only from the same parser version and for the same text (checked on read)
CREATE TABLE IF NOT EXISTS note_parses (id TEXT PRIMARY KEY, parser TEXT NOT NULL, parse BLOB NOT NULL);
"""

MEMORY_COLUMNS = (
    "id", "text", "type", "kind", "scope", "project_id", "project_name", "branch", "importance", "confirmations",
    "created_at", "updated_at", "last_accessed", "access_count", "content_hash", "source", "provenance", "anchors",
    "superseded_by", "deprecated", "deprecated_reason", "tier", "tags", "trust", "status", "author", "flags", "part",
)
JSON_COLUMNS = frozenset({"provenance", "anchors", "tags", "flags"})


VISIBILITY_COLUMNS = ("id", "type", "scope", "project_id", "branch", "status", "deprecated", "superseded_by",
                      "tier", "content_hash", "updated_at")


def migrate(conn: sqlite3.Connection) -> None:
    """What a store written by an older version lacks (run after `SCHEMA`, inside a write)."""
    if "base_importance" not in {r[1] for r in conn.execute("PRAGMA table_info(decay_state)")}:
        conn.execute("ALTER TABLE decay_state ADD COLUMN base_importance REAL")
    # the forgotten memory itself (JSON), so `mnemo restore` can bring it back until the retention has passed
    if "memory" not in {r[1] for r in conn.execute("PRAGMA table_info(tombstones)")}:
        conn.execute("ALTER TABLE tombstones ADD COLUMN memory TEXT")


def statements() -> list[tuple[str, str, str]]:
    """(type, name, sql) of a store as this version creates it (repair uses it when no copy names a table)."""
    mem = sqlite3.connect(":memory:")
    try:
        mem.executescript(SCHEMA)
        return [(r[0], r[1], r[2]) for r in mem.execute("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL")]
    finally:
        mem.close()


def primary_key(sql: str, table: str) -> list[str]:
    """The primary-key columns of `table` as `sql` (its CREATE TABLE) declares them; [] when it does not parse."""
    mem = sqlite3.connect(":memory:")
    try:
        mem.execute(sql)
        return [r[1] for r in sorted(mem.execute(f'PRAGMA table_info("{table}")'), key=lambda r: r[5]) if r[5]]
    except sqlite3.Error:
        return []
    finally:
        mem.close()
