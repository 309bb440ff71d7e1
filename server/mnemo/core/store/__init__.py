"""The store: the SQLite file that is the truth, with every table, every SQL statement and the schema.

One module per table family, put together in `Store`:

    db.py          the file: connections, `write()` (one BEGIN IMMEDIATE transaction), error mapping, checks
    schema.py      every CREATE TABLE / INDEX, and the migrations of older stores
    codec.py       partitions, vector blobs, the indexed text of a memory or block (pure)
    memories.py    `memories` (+ its FTS rows, tombstones): writes and the named queries of the operations
    blocks.py      `blocks`: Markdown sections
    vectors.py     `vectors`: one float32 vector per item, with its model id
    fulltext.py    `fts` (FTS5) and the texts the keyword index reads
    changes.py     `changes`: the change log the indexes replay
    review.py      `review`: the review queue and the decisions made in it
    decay.py       `decay_state`
    outbox.py      `team_outbox`
    parses.py      `note_parses`: the relation check's parse of each memory's text, stored with it
    files.py       store files that are not open: backups, checks
    rebuild.py     reading a backup and writing a rebuilt store (repair)
    salvage.py     reading a damaged file page by page (repair)
    skill_vectors.py  the skill embedding cache (a file of its own)
    versions.py    `memory_versions` (earlier versions of edited memories) and forgotten memories kept for restore

Nothing outside this package runs SQL (tests/unit/test_architecture.py checks it).
"""

from __future__ import annotations

from mnemo.core.store.blocks import BlockTable
from mnemo.core.store.changes import ChangeLog
from mnemo.core.store.codec import blob_to_vec, fts_query, partition_for, vec_to_blob
from mnemo.core.store.db import Database, repair_command, repair_hint, summarize_check
from mnemo.core.store.decay import DecayState
from mnemo.core.store.fulltext import FullText
from mnemo.core.store.memories import MemoryTable
from mnemo.core.store.outbox import Outbox
from mnemo.core.store.parses import ParseTable
from mnemo.core.store.review import ReviewTable
from mnemo.core.store.schema import JSON_COLUMNS, MEMORY_COLUMNS, SCHEMA, SCHEMA_VERSION
from mnemo.core.store.vectors import VectorTable
from mnemo.core.store.versions import VersionTable


class Store(Database, ChangeLog, MemoryTable, BlockTable, VectorTable, FullText, ReviewTable, DecayState, Outbox,
            VersionTable, ParseTable):
    """Thread-safe access to the SQLite truth: thread-local connections, one writer at a time."""


__all__ = ["JSON_COLUMNS", "MEMORY_COLUMNS", "SCHEMA", "SCHEMA_VERSION", "Store", "blob_to_vec", "fts_query",
           "partition_for", "repair_command", "repair_hint", "summarize_check", "vec_to_blob"]
